"""Ported code of notebook 02 (sinusoidal and learned positions) in the styles of public projects."""
from . import Port

ASSIGNMENT = "02_positions"

PORTS = [
    # --- sinusoidal_positions -------------------------------------------------------------------------
    Port("Annotated Transformer PositionalEncoding table (div_term in log space)",
         "harvardnlp/annotated-transformer, PositionalEncoding.__init__: div_term = exp(arange(0, d_model, 2) * "
         "-(log(10000.0) / d_model)); pe[:, 0::2] = sin(position * div_term); pe[:, 1::2] = cos(...)",
         "sinusoidal_positions", '''
def sinusoidal_positions(max_len, d_model):
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even, got {d_model}")
    # Compute the positional encodings once in log space.
    pe = torch.zeros(max_len, d_model)
    position = torch.arange(0, max_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe
'''),
    Port("Machine Learning Mastery getPositionEncoding (loops over positions and pairs)",
         "machinelearningmastery.com 'A Gentle Introduction to Positional Encoding in Transformer Models', "
         "getPositionEncoding(seq_len, d, n=10000): for k in range(seq_len): for i in range(d/2): "
         "denominator = n ** (2i/d); P[k, 2i] = sin(k/denominator); P[k, 2i+1] = cos(k/denominator)",
         "sinusoidal_positions", '''
def sinusoidal_positions(max_len, d_model):
    if d_model % 2:
        raise ValueError(f"d_model={d_model} is odd: the sin/cos pairs need an even size")
    n = 10000
    P = torch.zeros((max_len, d_model))
    for k in range(max_len):
        for i in range(d_model // 2):
            denominator = n ** (2 * i / d_model)
            P[k, 2 * i] = math.sin(k / denominator)
            P[k, 2 * i + 1] = math.cos(k / denominator)
    return P
'''),
    Port("tensor2tensor get_timing_signal_1d (sin half, then cos half)",
         "tensorflow/tensor2tensor layers/common_attention.py, get_timing_signal_1d: log_timescale_increment = "
         "log(max_timescale / min_timescale) / max(num_timescales - 1, 1); signal = concat([sin(scaled_time), "
         "cos(scaled_time)], axis=1)", "sinusoidal_positions", '''
def sinusoidal_positions(max_len, d_model, min_timescale=1.0, max_timescale=1.0e4):
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    position = torch.arange(max_len, dtype=torch.float32)
    num_timescales = d_model // 2
    log_timescale_increment = math.log(float(max_timescale) / float(min_timescale)) / max(num_timescales - 1, 1)
    inv_timescales = min_timescale * torch.exp(
        torch.arange(num_timescales, dtype=torch.float32) * -log_timescale_increment)
    scaled_time = position[:, None] * inv_timescales[None, :]
    return torch.cat([torch.sin(scaled_time), torch.cos(scaled_time)], dim=1)
''', breach="sines fill the first half of the features and cosines the second half (concatenated, not "
            "interleaved at 2i and 2i+1), with timescales spaced by num_timescales - 1",
         names=("interleav", "concatenat", "first half", "2i+1", "odd columns")),

    # --- SinusoidalPositions --------------------------------------------------------------------------
    Port("Annotated Transformer PositionalEncoding (buffer (1, max_len, d), dropout 0)",
         "harvardnlp/annotated-transformer, PositionalEncoding: pe = pe.unsqueeze(0); register_buffer('pe', pe); "
         "forward: x + self.pe[:, : x.size(1)].requires_grad_(False), then self.dropout", "SinusoidalPositions", '''
class SinusoidalPositions(nn.Module):
    "Implement the PE function."

    def __init__(self, max_len, d_model, dropout=0.0):
        super().__init__()
        self.max_len = max_len
        self.dropout = nn.Dropout(p=dropout)
        pe = sinusoidal_positions(max_len, d_model)
        pe = pe.unsqueeze(0)
        self.register_buffer("pe", pe)

    def forward(self, x):
        if x.size(1) > self.max_len:
            raise ValueError(f"sequence of length {x.size(1)} is longer than max_len={self.max_len}")
        x = x + self.pe[:, : x.size(1)].requires_grad_(False)
        return self.dropout(x)
''', breach="adds its float32 table to x as it is, so a bfloat16 or float64 x gives a float32 output; the "
         "notebook asks for x's dtype (reclassified by the maintainer from the notebook's text)",
         names=("dtype", "bfloat16", "float64")),
    Port("Annotated Transformer PositionalEncoding keeping its dropout of 0.1",
         "harvardnlp/annotated-transformer make_model: PositionalEncoding(d_model, dropout=0.1); forward returns "
         "self.dropout(x + pe) ('we apply dropout to the sums of the embeddings and the positional encodings')",
         "SinusoidalPositions", '''
class SinusoidalPositions(nn.Module):
    "Implement the PE function."

    def __init__(self, max_len, d_model, dropout=0.1):
        super().__init__()
        self.max_len = max_len
        self.dropout = nn.Dropout(p=dropout)
        self.register_buffer("pe", sinusoidal_positions(max_len, d_model).unsqueeze(0))

    def forward(self, x):
        if x.size(1) > self.max_len:
            raise ValueError(f"sequence of length {x.size(1)} is longer than max_len={self.max_len}")
        x = x + self.pe[:, : x.size(1)].requires_grad_(False)
        return self.dropout(x)
''', breach="applies dropout (p=0.1) to x + PE, so in training mode the output is randomly zeroed and rescaled "
            "instead of x + PE[:T]",
         names=("dropout", "training mode", "train mode", "random", "deterministic")),
    Port("d2l PositionalEncoding (table as a plain attribute self.P)",
         "d2l-ai/d2l-en chapter_attention-mechanisms-and-transformers/self-attention-and-positional-encoding: "
         "self.P = torch.zeros((1, max_len, num_hiddens)); forward: X + self.P[:, :X.shape[1], :].to(X.device)",
         "SinusoidalPositions", '''
class SinusoidalPositions(nn.Module):
    """Positional encoding."""

    def __init__(self, max_len, d_model):
        super().__init__()
        self.max_len = max_len
        # Create a long enough P
        self.P = torch.zeros((1, max_len, d_model))
        X = torch.arange(max_len, dtype=torch.float32).reshape(-1, 1) / torch.pow(
            10000, torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
        self.P[:, :, 0::2] = torch.sin(X)
        self.P[:, :, 1::2] = torch.cos(X)

    def forward(self, X):
        if X.shape[1] > self.max_len:
            raise ValueError(f"sequence of length {X.shape[1]} is longer than max_len={self.max_len}")
        return X + self.P[:, :X.shape[1], :].to(X.device)
''', breach="the table is a plain tensor attribute (self.P), not a registered buffer: module.to(device) does "
            "not move it and it is not in the module's buffers or state_dict",
         names=("buffer", "register_buffer", "plain attribute", "state_dict", ".to(")),
    Port("PyTorch tutorial PositionalEncoding (sequence-first x.size(0))",
         "pytorch/tutorials beginner_source/transformer_tutorial.py, PositionalEncoding: pe = zeros(max_len, 1, "
         "d_model); forward(x) with x [seq_len, batch_size, embedding_dim]: x = x + self.pe[:x.size(0)]",
         "SinusoidalPositions", '''
class SinusoidalPositions(nn.Module):

    def __init__(self, max_len, d_model):
        super().__init__()
        self.max_len = max_len
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        """x: Tensor, shape [seq_len, batch_size, embedding_dim]"""
        if x.size(0) > self.max_len:
            raise ValueError(f"sequence of length {x.size(0)} is longer than max_len={self.max_len}")
        return x + self.pe[:x.size(0)]
''', breach="sequence-first convention: indexes the table by x.size(0), the batch size of a batch-first x, so "
            "every position of sequence b gets PE[b]",
         names=("batch-first", "sequence-first", "seq-first", "size(0)", "batch dimension")),

    # --- LearnedPositions -----------------------------------------------------------------------------
    Port("Hugging Face BertEmbeddings position_embeddings with a position_ids buffer",
         "huggingface/transformers models/bert/modeling_bert.py BertEmbeddings: position_embeddings = "
         "nn.Embedding(max_position_embeddings, hidden_size); register_buffer('position_ids', "
         "arange(max_position_embeddings).expand((1, -1)), persistent=False); position_ids[:, :seq_length]",
         "LearnedPositions", '''
class LearnedPositions(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.max_position_embeddings = max_len
        self.position_embeddings = nn.Embedding(max_len, d_model)
        self.register_buffer("position_ids", torch.arange(max_len).expand((1, -1)), persistent=False)

    def forward(self, inputs_embeds):
        seq_length = inputs_embeds.size(1)
        if seq_length > self.max_position_embeddings:
            raise ValueError(f"Sequence length {seq_length} exceeds max_position_embeddings "
                             f"{self.max_position_embeddings}")
        position_ids = self.position_ids[:, :seq_length]
        return inputs_embeds + self.position_embeddings(position_ids)
'''),
    Port("lucidrains vit-pytorch pos_embedding nn.Parameter of shape (1, n, dim)",
         "lucidrains/vit-pytorch vit.py ViT: self.pos_embedding = nn.Parameter(torch.randn(1, num_patches + 1, dim)); "
         "forward: x += self.pos_embedding[:, :(n + 1)]", "LearnedPositions", '''
class LearnedPositions(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.max_len = max_len
        self.pos_embedding = nn.Parameter(torch.randn(1, max_len, d_model))

    def forward(self, x):
        b, n, _ = x.shape
        if n > self.max_len:
            raise ValueError(f"sequence length {n} is longer than the {self.max_len} position embeddings")
        x = x + self.pos_embedding[:, :n]
        return x
'''),
    Port("nanoGPT wpe with an assert on the block size",
         "karpathy/nanoGPT model.py GPT.forward: assert t <= self.config.block_size, f'Cannot forward sequence of "
         "length {t}, block size is only {self.config.block_size}'; pos = arange(0, t, device=device); "
         "pos_emb = self.transformer.wpe(pos)", "LearnedPositions", '''
class LearnedPositions(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.block_size = max_len
        self.wpe = nn.Embedding(max_len, d_model)

    def forward(self, x):
        device = x.device
        b, t, _ = x.size()
        assert t <= self.block_size, f"Cannot forward sequence of length {t}, block size is only {self.block_size}"
        pos = torch.arange(0, t, dtype=torch.long, device=device)  # shape (t)
        pos_emb = self.wpe(pos)  # position embeddings of shape (t, n_embd)
        return x + pos_emb
''', breach="a too-long sequence fails an assert (AssertionError, gone under python -O) instead of raising "
            "ValueError",
         names=("valueerror", "assert", "assertionerror")),
    Port("fairseq LearnedPositionalEmbedding (positions start at padding_idx + 1)",
         "facebookresearch/fairseq fairseq/modules/learned_positional_embedding.py and utils.make_positions: "
         "num_embeddings = max_positions + padding_idx + 1; positions = cumsum(mask) + padding_idx",
         "LearnedPositions", '''
class LearnedPositions(nn.Module):
    def __init__(self, max_len, d_model, padding_idx=1):
        super().__init__()
        self.padding_idx = padding_idx
        self.max_positions = max_len
        self.embed_positions = nn.Embedding(max_len + padding_idx + 1, d_model, padding_idx=padding_idx)

    def forward(self, x):
        T = x.size(1)
        if T > self.max_positions:
            raise ValueError(f"sequence of length {T} is longer than max_positions={self.max_positions}")
        # make_positions: numbering starts at padding_idx + 1, the pad slot keeps position padding_idx
        positions = torch.arange(T, device=x.device) + self.padding_idx + 1
        return x + self.embed_positions(positions)
''', breach="positions are numbered from padding_idx + 1 (= 2), not 0: the table has max_len + 2 rows and x "
            "gets rows 2..T+1",
         names=("from 0", "start at 0", "offset", "position 0", "padding_idx")),
]
