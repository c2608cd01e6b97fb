"""Eighth held-out set, graded before any change to the judges.

Held-out set 8, notebook 02: ports of Transformer-XL (Hugging Face, deprecated/transfo_xl), Informer
(zhouhaoyi/Informer2020), the PyTorch Lightning transformer demo, the UvA deep-learning notebooks (phlippe,
tutorial 6), Hugging Face ProphetNet and open_clip (mlfoundations), each read at its source.

Where a project has no check for an odd d_model or a too-long sequence, the port adds the ValueError the
course's API asks for; the breach kept is another convention of the project.
"""
from tests.corpus import Port

ASSIGNMENT = "02_positions"

PORTS = [
    Port(
        "transfo_xl_sin_cos_halves",
        "huggingface/transformers src/transformers/models/deprecated/transfo_xl/modeling_transfo_xl.py "
        "PositionalEmbedding (inv_freq buffer, torch.cat([sin, cos]))",
        "sinusoidal_positions",
        r'''
def sinusoidal_positions(max_len: int, d_model: int) -> torch.Tensor:
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    demb = d_model
    inv_freq = 1 / (10000 ** (torch.arange(0.0, demb, 2.0) / demb))
    pos_seq = torch.arange(max_len, dtype=torch.float32)
    sinusoid_inp = torch.outer(pos_seq, inv_freq)
    pos_emb = torch.cat([sinusoid_inp.sin(), sinusoid_inp.cos()], dim=-1)
    return pos_emb
''',
        breach="Transformer-XL concatenates all the sines and then all the cosines (torch.cat([sin, cos])), "
               "the halves layout, instead of interleaving sin on even and cos on odd dimensions",
        names=("halves", "interleav", "concatenat", "first half", "layout", "sines first"),
    ),
    Port(
        "informer_positional_embedding",
        "zhouhaoyi/Informer2020 models/embed.py PositionalEmbedding.__init__ (div_term in log space), "
        "returning the table without the batch axis",
        "sinusoidal_positions",
        r'''
def sinusoidal_positions(max_len: int, d_model: int) -> torch.Tensor:
    if d_model % 2:
        raise ValueError(f"d_model must be even for sin/cos pairs, got {d_model}")
    # Compute the positional encodings once in log space.
    pe = torch.zeros(max_len, d_model).float()
    pe.require_grad = False

    position = torch.arange(0, max_len).float().unsqueeze(1)
    div_term = (torch.arange(0, d_model, 2).float() * -(math.log(10000.0) / d_model)).exp()

    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe
''',
    ),
    Port(
        "lightning_demo_positional_encoding",
        "Lightning-AI/pytorch-lightning src/lightning/pytorch/demos/transformer.py PositionalEncoding "
        "(lazy self.pe, not a buffer; the demo's dropout is left out)",
        "SinusoidalPositions",
        r'''
from typing import Optional
from torch import Tensor


class SinusoidalPositions(nn.Module):
    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.dim = d_model
        self.max_len = max_len
        self.pe: Optional[Tensor] = None

    def forward(self, x: Tensor) -> Tensor:
        if x.shape[-2] > self.max_len:
            raise ValueError(f"sequence length {x.shape[-2]} is longer than max_len {self.max_len}")
        if self.pe is None:
            # 1) can't use buffer, see https://github.com/pytorch/pytorch/issues/68407
            # 2) can't use parameter becauses pe gets sliced and DDP requires all params to participate in forward
            self.pe = self._init_pos_encoding(device=x.device)

        x + self.pe[: x.size(0), :]
        return x

    def _init_pos_encoding(self, device: torch.device) -> Tensor:
        pe = torch.zeros(self.max_len, self.dim, device=device)
        position = torch.arange(0, self.max_len, dtype=torch.float, device=device).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, self.dim, 2, device=device).float() * (-math.log(10000.0) / self.dim))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0).transpose(0, 1)
        return pe
''',
        breach="the demo's forward computes `x + self.pe[: x.size(0), :]` and throws the sum away: it returns x "
               "unchanged, so no position vector is ever added",
        names=("not added", "unchanged", "returns x", "equals x", "discard", "no position"),
    ),
    Port(
        "uva_positional_encoding_no_cast",
        "phlippe/uvadlc_notebooks docs/tutorial_notebooks/tutorial6/Transformers_and_MHAttention.ipynb "
        "PositionalEncoding (register_buffer('pe', pe, persistent=False), x + self.pe[:, :x.size(1)])",
        "SinusoidalPositions",
        r'''
class SinusoidalPositions(nn.Module):

    def __init__(self, max_len: int, d_model: int):
        """
        Inputs
            d_model - Hidden dimensionality of the input.
            max_len - Maximum length of a sequence to expect.
        """
        super().__init__()
        self.max_len = max_len
        # Create matrix of [SeqLen, HiddenDim] representing the positional encoding for max_len inputs
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0)

        # register_buffer => Tensor which is not a parameter, but should be part of the modules state.
        self.register_buffer('pe', pe, persistent=False)

    def forward(self, x):
        if x.size(1) > self.max_len:
            raise ValueError(f"sequence length {x.size(1)} is longer than max_len {self.max_len}")
        x = x + self.pe[:, :x.size(1)]
        return x
''',
        breach="the table is added as it is, float32, without .to(x.dtype): a bfloat16 (or float16) input comes "
               "back promoted to float32",
        names=("dtype", "bfloat16", "float32", "cast", "promot"),
    ),
    Port(
        "prophetnet_positions_padding_offset",
        "huggingface/transformers src/transformers/models/prophetnet/modeling_prophetnet.py "
        "ProphetNetPositionalEmbeddings (nn.Embedding with padding_idx=pad_token_id, position_ids = "
        "cumsum(attention_mask) * attention_mask + padding_idx)",
        "LearnedPositions",
        r'''
class LearnedPositions(nn.Module):
    """ProphetNetPositionalEmbeddings: positions offset by padding_idx (pad_token_id = 0 in ProphetNetConfig)."""

    def __init__(self, max_len: int, d_model: int, pad_token_id: int = 0):
        super().__init__()
        self.max_len = max_len
        self.padding_idx = pad_token_id
        self.embedding = nn.Embedding(max_len, d_model, pad_token_id)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inputs_shape = x.shape[:-1]
        if inputs_shape[-1] > self.max_len:
            raise ValueError(f"sequence length {inputs_shape[-1]} is longer than max_len {self.max_len}")
        attention_mask = torch.ones(inputs_shape, dtype=torch.long, device=x.device)
        # retrieve position_ids from input_ids / attention_mask
        position_ids = (
            torch.cumsum(attention_mask, dim=1).type_as(attention_mask) * attention_mask
        ).long() + self.padding_idx
        return x + self.embedding(position_ids).to(x.dtype)
''',
        breach="ProphetNet counts positions from padding_idx + 1 (cumsum of the attention mask plus padding_idx), "
               "so position p reads row p + 1 of the table, row 0 is the zero padding row, and T = max_len runs "
               "past the end of the table",
        names=("offset", "padding_idx", "shift", "row p + 1", "from 1", "position 1"),
    ),
    Port(
        "open_clip_positional_embedding",
        "mlfoundations/open_clip src/open_clip/transformer.py TextTransformer (positional_embedding = "
        "nn.Parameter(torch.empty(num_pos, width)), init_parameters normal_(std=0.01), forward "
        "x + positional_embedding[:seq_len].to(cast_dtype))",
        "LearnedPositions",
        r'''
class LearnedPositions(nn.Module):
    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.num_pos = max_len
        self.positional_embedding = nn.Parameter(torch.empty(self.num_pos, d_model))
        self.init_parameters()

    def init_parameters(self):
        nn.init.normal_(self.positional_embedding, std=0.01)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq_len = x.shape[1]
        if seq_len > self.num_pos:
            raise ValueError(f"sequence length {seq_len} is longer than max_len {self.num_pos}")
        cast_dtype = x.dtype
        x = x + self.positional_embedding[:seq_len].to(cast_dtype)
        return x
''',
    ),
]
