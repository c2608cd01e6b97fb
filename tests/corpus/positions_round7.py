"""Seventh held-out set, graded before any change to the judges.

Ports for notebook 02 (positions), from projects no earlier set used: ParlAI
(parlai/agents/transformer/modules: create_position_codes and the encoder's position_embeddings), Burn (Rust,
burn-nn pos_encoding.rs generate_sinusoids), PaddleNLP (Pegasus PegasusSinusoidalPositionalEmbedding), Hugging Face
transformers OPT (OPTLearnedPositionalEmbedding) and ELECTRA (ElectraEmbeddings' position part).
"""
from tests.corpus import Port

ASSIGNMENT = "02_positions"

PORTS = [
    Port(
        name="parlai_create_position_codes",
        style="facebookresearch/ParlAI parlai/agents/transformer/modules/functions.py, create_position_codes "
              "(numpy table pos / 10000^(2j/dim), sin into out[:, 0::2], cos into out[:, 1::2]); the ValueError for "
              "an odd d_model added, as the exercise asks (ParlAI's slice assignment would fail with a shape error)",
        cell="sinusoidal_positions",
        code=r'''
import numpy as np


def sinusoidal_positions(max_len: int, d_model: int) -> torch.Tensor:
    if d_model % 2:
        raise ValueError(f"d_model must be even for sin/cos pairs, got {d_model}")
    n_pos, dim = max_len, d_model
    out = torch.empty(n_pos, dim)
    position_enc = np.array(
        [
            [pos / np.power(10000, 2 * j / dim) for j in range(dim // 2)]
            for pos in range(n_pos)
        ]
    )
    out.detach_()
    out.requires_grad = False
    out[:, 0::2] = torch.FloatTensor(np.sin(position_enc)).type_as(out)
    out[:, 1::2] = torch.FloatTensor(np.cos(position_enc)).type_as(out)
    return out
''',
    ),
    Port(
        name="burn_generate_sinusoids",
        style="tracel-ai/burn crates/burn-nn/src/modules/pos_encoding.rs, generate_sinusoids (assert! that d_model "
              "is even and max_timescale >= length, div_term = exp(k * -ln(max_timescale) / d_model), sin and cos "
              "pushed in turn)",
        cell="sinusoidal_positions",
        code=r'''
def sinusoidal_positions(max_len: int, d_model: int, max_timescale: int = 10_000) -> torch.Tensor:
    assert d_model % 2 == 0, "d_model must be even"
    assert max_timescale >= max_len, "max_timescale must be greater than or equal to length"

    # Calculate the increment for the logarithmic timescale
    log_timescale_increment = -math.log(max_timescale) / d_model

    scaled_time_sin_cos = []
    for i in range(max_len):                   # each position in the sequence
        row = []
        for k in range(0, d_model, 2):         # each pair of dimensions
            div_term = math.exp(k * log_timescale_increment)
            row.append(math.sin(div_term * i))
            row.append(math.cos(div_term * i))
        scaled_time_sin_cos.append(row)

    return torch.tensor(scaled_time_sin_cos, dtype=torch.float32).reshape(max_len, d_model)
''',
        breach="Burn checks an odd d_model with assert!, which becomes an AssertionError, not the ValueError the "
               "exercise asks for (the table itself is right)",
        names=("ValueError", "odd", "AssertionError", "assert", "exception"),
    ),
    Port(
        name="paddlenlp_pegasus_sinusoidal",
        style="PaddlePaddle/PaddleNLP paddlenlp/transformers/pegasus/modeling.py, "
              "PegasusSinusoidalPositionalEmbedding._init_weight (features not interleaved: sines in out[:, :dim//2], "
              "cosines in out[:, dim//2:]); paddle tensors for torch ones",
        cell="sinusoidal_positions",
        code=r'''
import numpy as np


def sinusoidal_positions(max_len: int, d_model: int) -> torch.Tensor:
    """Identical to the XLM create_sinusoidal_embeddings except features are not interleaved. The cos features are
    in the 2nd half of the vector. [dim // 2:]"""
    out = torch.empty(max_len, d_model)
    n_pos, dim = out.shape
    position_enc = np.array(
        [[pos / np.power(10000, 2 * (j // 2) / dim) for j in range(dim)] for pos in range(n_pos)]
    )
    out.requires_grad = False
    sentinel = dim // 2 if dim % 2 == 0 else (dim // 2) + 1
    out[:, 0:sentinel] = torch.tensor(np.sin(position_enc[:, 0::2]), dtype=torch.float32)
    out[:, sentinel:] = torch.tensor(np.cos(position_enc[:, 1::2]), dtype=torch.float32)
    return out
''',
        breach="Pegasus's table is not interleaved: all the sines in the first half of the vector, all the cosines "
               "in the second (the layout the notebook calls an erratum); it also accepts an odd d_model without a "
               "ValueError",
        names=("interleav", "halves", "half", "layout", "sines first", "cos", "order"),
    ),
    Port(
        name="parlai_position_embeddings_module",
        style="facebookresearch/ParlAI parlai/agents/transformer/modules/encoder.py, TransformerEncoder: "
              "self.position_embeddings = nn.Embedding(n_positions, dim) filled by create_position_codes, and "
              "forward_embedding (positions = arange, warn_once when too long, position_embeddings(positions)"
              ".expand_as(tensor))",
        cell="SinusoidalPositions",
        code=r'''
import warnings

import numpy as np


def create_position_codes(n_pos, dim, out):
    """Create positional codes and store them in ``out``."""
    position_enc = np.array(
        [
            [pos / np.power(10000, 2 * j / dim) for j in range(dim // 2)]
            for pos in range(n_pos)
        ]
    )
    out.detach_()
    out.requires_grad = False
    out[:, 0::2] = torch.FloatTensor(np.sin(position_enc)).type_as(out)
    out[:, 1::2] = torch.FloatTensor(np.cos(position_enc)).type_as(out)


class SinusoidalPositions(nn.Module):
    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.n_positions = max_len
        self.embedding_size = d_model
        # create the positional embeddings
        self.position_embeddings = nn.Embedding(self.n_positions, self.embedding_size)
        create_position_codes(self.n_positions, self.embedding_size, out=self.position_embeddings.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(x.size(1), dtype=torch.long, device=x.device).unsqueeze(0)
        if positions.max().item() > self.n_positions:
            warnings.warn(
                'You are inputting a sequence of {x} length, but only have '
                '--n-positions {y}. Set --truncate or increase --n-positions'.format(
                    x=positions.max().item(), y=self.n_positions
                )
            )
        position_embs = self.position_embeddings(positions).expand_as(x)
        return x + position_embs
''',
        breach="ParlAI keeps the table in an nn.Embedding whose weight is a Parameter (requires_grad=False), not a "
               "buffer, so the module has parameters; a sequence longer than the table only warns (off by one) and "
               "then fails inside nn.Embedding instead of raising a ValueError naming both numbers; the float32 "
               "table promotes a bfloat16 x to float32",
        names=("parameter", "buffer", "ValueError", "too long", "max_len", "dtype", "bfloat16"),
    ),
    Port(
        name="opt_learned_positional_embedding",
        style="huggingface/transformers src/transformers/models/opt/modeling_opt.py, OPTLearnedPositionalEmbedding "
              "(nn.Embedding(num_embeddings + 2, dim), position_ids = cumsum(attention_mask) * attention_mask - 1, "
              "looked up at position_ids + offset), with an all-ones attention mask",
        cell="LearnedPositions",
        code=r'''
class LearnedPositions(nn.Module):
    """This module learns positional embeddings up to a fixed maximum size."""

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        # OPT is set up so that if padding_idx is specified then offset the embedding ids by 2
        # and adjust num_embeddings appropriately. Other models don't have this hack
        self.offset = 2
        self.embed_positions = nn.Embedding(max_len + self.offset, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        attention_mask = torch.ones(x.shape[:2], dtype=torch.long, device=x.device)
        position_ids = torch.cumsum(attention_mask, dim=1)
        position_ids = (position_ids * attention_mask - 1).long()
        return x + self.embed_positions(position_ids + self.offset)
''',
        breach="OPT's offset of 2: the table has (max_len + 2) * d_model trainable numbers and positions 0..T-1 read "
               "rows 2..T+1 (rows 0 and 1 are never used); a sequence longer than max_len fails inside nn.Embedding "
               "(IndexError), with no ValueError",
        names=("offset", "max_len * d_model", "trainable numbers", "parameters", "rows", "ValueError", "too long"),
    ),
    Port(
        name="electra_position_embeddings",
        style="huggingface/transformers src/transformers/models/electra/modeling_electra.py, ElectraEmbeddings "
              "(position_embeddings = nn.Embedding(max_position_embeddings, size), a position_ids buffer of "
              "arange(max_position_embeddings).expand((1, -1)) sliced to the length, embeddings += "
              "position_embeddings), without the word/type embeddings, LayerNorm and dropout; the ValueError added "
              "as the exercise asks",
        cell="LearnedPositions",
        code=r'''
class LearnedPositions(nn.Module):
    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.max_position_embeddings = max_len
        self.position_embeddings = nn.Embedding(max_len, d_model)
        # position_ids (1, len position emb) is contiguous in memory and exported when serialized
        self.register_buffer("position_ids", torch.arange(max_len).expand((1, -1)), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq_length = x.size(1)
        if seq_length > self.max_position_embeddings:
            raise ValueError(
                f"sequence length {seq_length} is longer than max_len {self.max_position_embeddings}"
            )
        position_ids = self.position_ids[:, :seq_length]
        position_embeddings = self.position_embeddings(position_ids)
        embeddings = x.clone()            # inputs_embeds (+ token_type_embeddings): a fresh tensor
        embeddings += position_embeddings
        return embeddings
''',
    ),
]
