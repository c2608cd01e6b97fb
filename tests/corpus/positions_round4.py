"""Fourth held-out set, notebook 02: DistilBERT, fairseq, HF CTRL, JoeyNMT, HF GPT-2, XLM."""
from . import Port

ASSIGNMENT = "02_positions"

PORTS = [
    Port("Hugging Face DistilBERT create_sinusoidal_embeddings (numpy table, out[:, 0::2] = sin, out[:, 1::2] = cos)",
         "huggingface/transformers models/distilbert/modeling_distilbert.py, create_sinusoidal_embeddings(n_pos, dim, "
         "out): position_enc = np.array([[pos / np.power(10000, 2 * (j // 2) / dim) for j in range(dim)] for pos in "
         "range(n_pos)]); out[:, 0::2] = torch.FloatTensor(np.sin(position_enc[:, 0::2])); out[:, 1::2] = "
         "torch.FloatTensor(np.cos(position_enc[:, 1::2])) (the odd-d ValueError of the course added)",
         "sinusoidal_positions", '''
import numpy as np


def sinusoidal_positions(max_len, d_model):
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    n_pos, dim = max_len, d_model
    out = torch.empty(n_pos, dim)
    position_enc = np.array([[pos / np.power(10000, 2 * (j // 2) / dim) for j in range(dim)] for pos in range(n_pos)])
    out[:, 0::2] = torch.FloatTensor(np.sin(position_enc[:, 0::2]))
    out[:, 1::2] = torch.FloatTensor(np.cos(position_enc[:, 1::2]))
    out.detach_()
    return out
'''),
    Port("fairseq SinusoidalPositionalEmbedding.get_embedding (log(10000) / (half_dim - 1), cat([sin, cos]))",
         "facebookresearch/fairseq fairseq/modules/sinusoidal_positional_embedding.py, get_embedding: half_dim = "
         "embedding_dim // 2; emb = math.log(10000) / (half_dim - 1); emb = torch.exp(torch.arange(half_dim, "
         "dtype=torch.float) * -emb); emb = torch.arange(num_embeddings).unsqueeze(1) * emb.unsqueeze(0); emb = "
         "torch.cat([torch.sin(emb), torch.cos(emb)], dim=1) (padding_idx None; ValueError for odd d added)",
         "sinusoidal_positions", '''
def sinusoidal_positions(max_len, d_model):
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    half_dim = d_model // 2
    emb = math.log(10000) / (half_dim - 1)
    emb = torch.exp(torch.arange(half_dim, dtype=torch.float) * -emb)
    emb = torch.arange(max_len, dtype=torch.float).unsqueeze(1) * emb.unsqueeze(0)
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=1).view(max_len, -1)
    return emb
''', breach="all sines in the first half and all cosines in the second (not interleaved), with frequencies "
            "10000^(-i/(d/2 - 1)) instead of 10000^(-2i/d)",
         names=("half", "interleav", "layout", "even", "concatenat")),
    Port("Hugging Face CTRL positional_encoding (angle_defn, then torch.cat([sines, cosines], dim=-1))",
         "huggingface/transformers models/ctrl/modeling_ctrl.py, angle_defn(pos, i, d_model_size) = pos * 1 / "
         "torch.pow(10000, (2 * (i // 2)) / d_model_size); positional_encoding: sines = torch.sin(angle_rads[:, "
         "0::2]); cosines = torch.cos(angle_rads[:, 1::2]); pos_encoding = torch.cat([sines, cosines], dim=-1)",
         "sinusoidal_positions", '''
def angle_defn(pos, i, d_model_size):
    angle_rates = 1 / torch.pow(10000, (2 * (i // 2)) / d_model_size)
    return pos * angle_rates


def sinusoidal_positions(max_len, d_model):
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    angle_rads = angle_defn(torch.arange(max_len, dtype=torch.float).unsqueeze(1),
                            torch.arange(d_model, dtype=torch.float).unsqueeze(0), d_model)
    sines = torch.sin(angle_rads[:, 0::2])
    cosines = torch.cos(angle_rads[:, 1::2])
    return torch.cat([sines, cosines], dim=-1)
''', breach="the sines fill the first half of the vector and the cosines the second half instead of alternating "
            "on even and odd dimensions", names=("half", "interleav", "layout", "even", "concatenat")),
    Port("fairseq SinusoidalPositionalEmbedding module (table kept in a plain attribute self.weights, moved in "
         "forward with .to(self._float_tensor))",
         "facebookresearch/fairseq fairseq/modules/sinusoidal_positional_embedding.py, __init__: self.weights = "
         "SinusoidalPositionalEmbedding.get_embedding(init_size, ...); self.register_buffer('_float_tensor', "
         "torch.FloatTensor(1)); forward: self.weights = self.weights.to(self._float_tensor) (course table, "
         "positions 0..T-1 added to x, the course's length check)", "SinusoidalPositions", '''
class SinusoidalPositions(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.max_len = max_len
        self.weights = sinusoidal_positions(max_len, d_model)
        self.register_buffer("_float_tensor", torch.FloatTensor(1))

    def forward(self, x):
        seq_len = x.shape[-2]
        if seq_len > self.max_len:
            raise ValueError(f"sequence length {seq_len} is longer than max_len {self.max_len}")
        self.weights = self.weights.to(self._float_tensor)
        return x + self.weights[:seq_len].to(x.dtype)
''', breach="the table is a plain attribute, not a registered buffer (fairseq moves it lazily in forward via a "
            "dummy buffer)", names=("buffer",)),
    Port("JoeyNMT PositionalEncoding (div_term in log space, pe.unsqueeze(0) registered as buffer 'pe')",
         "joeynmt/joeynmt joeynmt/embeddings.py? / transformer_layers.py, PositionalEncoding: div_term = "
         "torch.exp(torch.arange(0, size, 2, dtype=torch.float) * -(math.log(10000.0) / size)); pe[:, 0::2] = "
         "sin(position * div_term); pe[:, 1::2] = cos(...); pe = pe.unsqueeze(0); self.register_buffer('pe', pe); "
         "forward: emb + self.pe[:, :emb.size(1)] (the course's length check and dtype cast added)",
         "SinusoidalPositions", '''
class SinusoidalPositions(nn.Module):
    def __init__(self, max_len, d_model):
        if d_model % 2 != 0:
            raise ValueError(f"Cannot use sin/cos positional encoding with odd dim (got dim={d_model})")
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp((torch.arange(0, d_model, 2, dtype=torch.float) * -(math.log(10000.0) / d_model)))
        pe[:, 0::2] = torch.sin(position.float() * div_term)
        pe[:, 1::2] = torch.cos(position.float() * div_term)
        pe = pe.unsqueeze(0)  # shape: (1, max_len, size)
        super().__init__()
        self.register_buffer("pe", pe)
        self.dim = d_model
        self.max_len = max_len

    def forward(self, emb):
        if emb.size(1) > self.max_len:
            raise ValueError(f"sequence length {emb.size(1)} is longer than max_len {self.max_len}")
        return emb + self.pe[:, :emb.size(1)].to(emb.dtype)
'''),
    Port("Hugging Face GPT2Model wpe (nn.Embedding(max_position_embeddings, embed_dim), wpe(position_ids))",
         "huggingface/transformers models/gpt2/modeling_gpt2.py, GPT2Model: self.wpe = nn.Embedding("
         "config.max_position_embeddings, self.embed_dim); position_ids = torch.arange(past_length, input_shape[-1] "
         "+ past_length, dtype=torch.long, device=device); hidden_states = inputs_embeds + position_embeds "
         "(past_length = 0; the course's length check and dtype cast added)", "LearnedPositions", '''
class LearnedPositions(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.max_len = max_len
        self.wpe = nn.Embedding(max_len, d_model)

    def forward(self, x):
        past_length = 0
        seq_len = x.shape[-2]
        if seq_len > self.max_len:
            raise ValueError(f"sequence length {seq_len} is longer than max_len {self.max_len}")
        position_ids = torch.arange(past_length, seq_len + past_length, dtype=torch.long, device=x.device)
        position_embeds = self.wpe(position_ids)
        return x + position_embeds.to(x.dtype)
'''),
    Port("Hugging Face XLM with sinusoidal_embeddings=True (create_sinusoidal_embeddings into the position "
         "embedding, out.requires_grad = False)",
         "huggingface/transformers models/xlm/modeling_xlm.py, XLMModel.__init__: self.position_embeddings = "
         "nn.Embedding(config.max_position_embeddings, self.dim); if config.sinusoidal_embeddings: "
         "create_sinusoidal_embeddings(config.max_position_embeddings, self.dim, out=self.position_embeddings."
         "weight), which ends with out.requires_grad = False", "LearnedPositions", '''
class LearnedPositions(nn.Module):
    def __init__(self, max_len, d_model, sinusoidal_embeddings=True):
        super().__init__()
        self.max_len = max_len
        self.position_embeddings = nn.Embedding(max_len, d_model)
        if sinusoidal_embeddings:
            with torch.no_grad():
                self.position_embeddings.weight.copy_(sinusoidal_positions(max_len, d_model))
            self.position_embeddings.weight.requires_grad = False

    def forward(self, x):
        seq_len = x.shape[-2]
        if seq_len > self.max_len:
            raise ValueError(f"sequence length {seq_len} is longer than max_len {self.max_len}")
        positions = torch.arange(seq_len, device=x.device)
        return x + self.position_embeddings(positions).to(x.dtype)
''', breach="the position table is frozen (requires_grad = False, filled with the sinusoidal table): nothing is "
            "learned", names=("train", "requires_grad", "frozen", "learn", "gradient")),
]
