"""Held-out ports of notebook 02 (sinusoidal table, the module that adds it, learned positions) in the styles of
public projects the course's own corpus does not use (KerasNLP, ESPnet, fairseq2)."""
from . import Port

ASSIGNMENT = "02_positions"

PORTS = [
    # --- sinusoidal_positions -------------------------------------------------------------------------
    Port("KerasNLP SinePositionEncoding (timescales min_freq ** (2 * (i // 2) / d), sin/cos masks)",
         "keras-team/keras-nlp keras_nlp/layers/modeling/sine_position_encoding.py, SinePositionEncoding.call: "
         "min_freq = 1 / max_wavelength; timescales = ops.power(min_freq, 2 * (arange(hidden_size) // 2) / "
         "hidden_size); angles = position[:, None] * timescales[None, :]; cos_mask = arange(hidden_size) % 2; "
         "sin(angles) * sin_mask + cos(angles) * cos_mask ('even indices are sine, odd are cosine'); the layer is "
         "called on a (max_len, d_model) shape here", "sinusoidal_positions", '''
def sinusoidal_positions(max_len, d_model, max_wavelength=10000):
    if d_model % 2:
        raise ValueError(f"d_model must be even for sin/cos pairs, got {d_model}")
    compute_dtype = torch.float32
    seq_length, hidden_size = max_len, d_model
    position = torch.arange(seq_length).to(compute_dtype)
    min_freq = torch.tensor(1 / max_wavelength, dtype=compute_dtype)
    timescales = torch.pow(
        min_freq,
        (2 * (torch.arange(hidden_size) // 2)).to(compute_dtype) / hidden_size,
    )
    angles = position[:, None] * timescales[None, :]
    # even indices are sine, odd are cosine
    cos_mask = (torch.arange(hidden_size) % 2).to(compute_dtype)
    sin_mask = 1 - cos_mask
    # embedding shape is [seq_length, hidden_size]
    positional_encodings = torch.sin(angles) * sin_mask + torch.cos(angles) * cos_mask
    return positional_encodings
'''),
    # --- SinusoidalPositions --------------------------------------------------------------------------
    Port("ESPnet PositionalEncoding (x * xscale + pe, xscale = sqrt(d_model))",
         "espnet/espnet espnet/nets/pytorch_backend/transformer/embedding.py, PositionalEncoding: self.xscale = "
         "math.sqrt(self.d_model); extend_pe casts pe to x's dtype and device; forward: x = x * self.xscale + "
         "self.pe[:, : x.size(1)]; return self.dropout(x) (here with dropout_rate 0, the table kept as a buffer "
         "and a ValueError where ESPnet would grow the table)", "SinusoidalPositions", '''
class SinusoidalPositions(nn.Module):
    """Positional encoding."""

    def __init__(self, max_len, d_model, dropout_rate=0.0):
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.xscale = math.sqrt(self.d_model)
        self.dropout = torch.nn.Dropout(p=dropout_rate)
        self.register_buffer("pe", sinusoidal_positions(max_len, d_model).unsqueeze(0), persistent=False)

    def forward(self, x):
        """Add positional encoding. x (torch.Tensor): Input tensor (batch, time, `*`)."""
        if x.size(1) > self.max_len:
            raise ValueError(f"sequence length {x.size(1)} is longer than max_len {self.max_len}")
        pe = self.pe.to(dtype=x.dtype, device=x.device)
        x = x * self.xscale + pe[:, : x.size(1)]
        return self.dropout(x)
''', breach="multiplies the input by sqrt(d_model) before adding the table (ESPnet scales the embeddings inside "
            "its positional encoding): returns sqrt(d_model) * x + PE[:T] instead of x + PE[:T]",
         names=("sqrt(d_model)", "scale", "xscale", "multipl")),

    # --- LearnedPositions -----------------------------------------------------------------------------
    Port("fairseq2 LearnedPositionEncoder (Parameter, normal_ init, embedding(steps, weight))",
         "facebookresearch/fairseq2 src/fairseq2/nn/position_encoder.py, LearnedPositionEncoder: self.weight = "
         "Parameter(torch.empty((max_seq_len, encoding_dim))); reset_parameters: nn.init.normal_(self.weight); "
         "PositionEncoder.forward raises ValueError when seq_len > max_seq_len; _do_forward: steps = "
         "torch.arange(start_step, start_step + seq_len); return seqs + embedding(steps, self.weight)",
         "LearnedPositions", '''
class LearnedPositions(nn.Module):
    """Encodes sequences with learned positional embeddings."""

    def __init__(self, max_len, d_model):
        super().__init__()
        self.encoding_dim = d_model
        self.max_seq_len = max_len
        self.weight = nn.Parameter(torch.empty((max_len, d_model)))
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.normal_(self.weight)

    def forward(self, seqs):
        if (seq_len := seqs.size(-2)) > self.max_seq_len:
            raise ValueError(
                f"The input sequence length must be less than or equal to the maximum sequence length "
                f"({self.max_seq_len}), but is {seq_len} instead."
            )
        start_step = 0
        steps = torch.arange(start_step, start_step + seq_len, device=seqs.device, dtype=torch.int64)
        return seqs + F.embedding(steps, self.weight)
'''),
    Port("KerasNLP PositionEmbedding (returns the position vectors; the caller adds them)",
         "keras-team/keras-nlp keras_nlp/layers/modeling/position_embedding.py, PositionEmbedding: add_weight("
         "shape=[sequence_length, feature_size], initializer='glorot_uniform'); call(inputs, start_index=0): "
         "ops.slice(position_embeddings, (start_index, 0), (sequence_length, feature_length)); return "
         "ops.broadcast_to(position_embeddings, shape); usage: outputs = token_embeddings + position_embeddings",
         "LearnedPositions", '''
class LearnedPositions(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.sequence_length = int(max_len)
        self.position_embeddings = nn.Parameter(torch.empty(max_len, d_model))
        nn.init.xavier_uniform_(self.position_embeddings)          # keras "glorot_uniform"

    def forward(self, inputs, start_index=0):
        shape = inputs.shape
        feature_length = shape[-1]
        sequence_length = shape[-2]
        if start_index + sequence_length > self.sequence_length:
            raise ValueError(f"sequence length {sequence_length} is longer than sequence_length "
                             f"{self.sequence_length}")
        # trim to match the length of the input sequence, which might be less
        # than the sequence_length of the layer.
        position_embeddings = self.position_embeddings[start_index:start_index + sequence_length, :feature_length]
        return position_embeddings.broadcast_to(shape)
''', breach="returns only the position vectors P[:T] broadcast to x's shape (KerasNLP leaves the addition to the "
            "caller), not x + P[:T]",
         names=("x +", "the input", "only the position", "not added", "without x", "plus x")),
]
