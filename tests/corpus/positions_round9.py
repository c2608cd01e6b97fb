"""Ninth held-out set, notebook 02: ports of a PyTorch tutorial's, XLM's and a translator's sinusoidal tables,
SpeechBrain's PositionalEncoding, and the learned positions of a from-scratch Transformer and of XLM, each read at its
source."""
from tests.corpus import Port

ASSIGNMENT = "02_positions"

PORTS = [
    Port("sgrvinod_sinusoidal", "sgrvinod/a-PyTorch-Tutorial-to-Transformers utils.py get_positional_encoding(d_model, "
         "max_length) (two Python loops: even j gets sin(i / 10000^(j / d)), odd j gets cos(i / 10000^((j - 1) / d)); "
         "its unsqueeze(0) to (1, max_length, d_model), made for broadcasting in its Encoder, is left out and the "
         "course's ValueError for an odd d_model is added)", "sinusoidal_positions", r'''
def sinusoidal_positions(max_len: int, d_model: int) -> torch.Tensor:
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    positional_encoding = torch.zeros((max_len, d_model))  # (max_length, d_model)
    for i in range(max_len):
        for j in range(d_model):
            if j % 2 == 0:
                positional_encoding[i, j] = math.sin(i / math.pow(10000, j / d_model))
            else:
                positional_encoding[i, j] = math.cos(i / math.pow(10000, (j - 1) / d_model))
    return positional_encoding
'''),
    Port("xlm_sinusoidal", "facebookresearch/XLM xlm/model/transformer.py create_sinusoidal_embeddings(n_pos, dim, out) "
         "(position_enc[pos, j] = pos / 10000^(2 * (j // 2) / dim) in NumPy float64, sin into out[:, 0::2], cos into "
         "out[:, 1::2] through torch.FloatTensor; out is a fresh (max_len, d_model) tensor here, not an embedding's "
         "weight; the course's ValueError for an odd d_model is added)", "sinusoidal_positions", r'''
import numpy as np


def sinusoidal_positions(max_len: int, d_model: int) -> torch.Tensor:
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    n_pos, dim = max_len, d_model
    out = torch.empty(n_pos, dim)
    position_enc = np.array([
        [pos / np.power(10000, 2 * (j // 2) / dim) for j in range(dim)]
        for pos in range(n_pos)
    ])
    out[:, 0::2] = torch.FloatTensor(np.sin(position_enc[:, 0::2]))
    out[:, 1::2] = torch.FloatTensor(np.cos(position_enc[:, 1::2]))
    out.detach_()
    out.requires_grad = False
    return out
'''),
    Port("devjwsong_sinusoidal", "devjwsong/transformer-translator-pytorch src/layers.py PositionalEncoder.__init__ "
         "(pe_matrix[pos, i] = sin(pos / (10000 ** (2 * i / d_model))) for even i, cos(pos / (10000 ** (2 * i / "
         "d_model))) for odd i, with i the feature index itself; the table only, without the x * sqrt(d_model) of its "
         "forward; the course's ValueError for an odd d_model is added)", "sinusoidal_positions", r'''
def sinusoidal_positions(max_len: int, d_model: int) -> torch.Tensor:
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    pe_matrix = torch.zeros(max_len, d_model)  # (L, d_model)
    for pos in range(max_len):
        for i in range(d_model):
            if i % 2 == 0:
                pe_matrix[pos, i] = math.sin(pos / (10000 ** (2 * i / d_model)))
            elif i % 2 == 1:
                pe_matrix[pos, i] = math.cos(pos / (10000 ** (2 * i / d_model)))
    return pe_matrix
''', breach="wrong frequencies: the exponent is 2 * i / d_model with i the feature index (not the pair index), so "
            "feature i turns at 10000^(-2i/d) instead of 10000^(-2*floor(i/2)/d), and the cos of a pair does not share "
            "the frequency of its sin",
         names=("frequenc", "exponent", "2i", "wavelength", "formula")),
    Port("speechbrain_positions", "speechbrain/speechbrain speechbrain/lobes/models/transformer/Transformer.py "
         "PositionalEncoding (denominator = exp(arange(0, d, 2) * -(log(10000) / d)), pe[:, 0::2] = sin, "
         "pe[:, 1::2] = cos, registered as a (1, max_len, d) buffer; forward returns "
         "self.pe[:, :x.size(1)].clone().detach(), the caller adds it; the course's ValueError for T > max_len is "
         "added)", "SinusoidalPositions", r'''
class SinusoidalPositions(nn.Module):
    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        input_size = d_model
        self.max_len = max_len
        pe = torch.zeros(self.max_len, input_size, requires_grad=False)
        positions = torch.arange(0, self.max_len).unsqueeze(1).float()
        denominator = torch.exp(
            torch.arange(0, input_size, 2).float()
            * -(math.log(10000.0) / input_size)
        )
        pe[:, 0::2] = torch.sin(positions * denominator)
        pe[:, 1::2] = torch.cos(positions * denominator)
        pe = pe.unsqueeze(0)
        self.register_buffer("pe", pe)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.size(1) > self.max_len:
            raise ValueError(f"sequence length {x.size(1)} is longer than max_len {self.max_len}")
        return self.pe[:, : x.size(1)].clone().detach()
''', breach="returns the position vectors alone, (1, T, d_model), as SpeechBrain's encoders add them themselves: x is "
            "not added (and the output is float32 whatever x's dtype)",
         names=("alone", "x +", "add", "without x", "only the position")),
    Port("aladdin_learned", "aladdinpersson/Machine-Learning-Collection ML/Pytorch/more_advanced/"
         "transformer_from_scratch/transformer_from_scratch.py Encoder (self.position_embedding = "
         "nn.Embedding(max_length, embed_size); positions = torch.arange(0, seq_length).expand(N, seq_length)"
         ".to(self.device); word embedding + self.position_embedding(positions); x.device for self.device, and the "
         "course's ValueError for T > max_len, where nn.Embedding would raise an IndexError)", "LearnedPositions", r'''
class LearnedPositions(nn.Module):
    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.max_len = max_len
        self.position_embedding = nn.Embedding(max_len, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        N, seq_length = x.shape[0], x.shape[1]
        if seq_length > self.max_len:
            raise ValueError(f"sequence length {seq_length} is longer than max_len {self.max_len}")
        positions = torch.arange(0, seq_length).expand(N, seq_length).to(x.device)
        return x + self.position_embedding(positions)
'''),
    Port("xlm_learned", "facebookresearch/XLM xlm/model/transformer.py TransformerModel (self.position_embeddings = "
         "Embedding(N_MAX_POSITIONS, self.dim), its helper initialising nn.Embedding with normal_(std=dim ** -0.5); "
         "fwd: positions = torch.arange(slen).unsqueeze(0); tensor = tensor + self.position_embeddings(positions)"
         ".expand_as(tensor); max_len for N_MAX_POSITIONS, the arange made on x.device rather than from the token "
         "tensor, and the course's ValueError for T > max_len)", "LearnedPositions", r'''
class LearnedPositions(nn.Module):
    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.max_len = max_len
        self.dim = d_model
        m = nn.Embedding(max_len, self.dim)
        nn.init.normal_(m.weight, mean=0, std=self.dim ** -0.5)
        self.position_embeddings = m

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        slen = x.size(1)
        if slen > self.max_len:
            raise ValueError(f"sequence length {slen} is longer than max_len {self.max_len}")
        positions = torch.arange(slen, device=x.device).unsqueeze(0)
        tensor = x + self.position_embeddings(positions).expand_as(x)
        return tensor
'''),
]
