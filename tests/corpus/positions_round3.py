"""Held-out set 3 (round 3), notebook 02: sinusoidal_positions, SinusoidalPositions, LearnedPositions."""
from . import Port

ASSIGNMENT = "02_positions"

PORTS = [
    # --- sinusoidal_positions ------------------------------------------------------------------------------
    Port("OpenNMT-py PositionalEncoding, enc_type='SinusoidalInterleaved' (div_term in log space)",
         "OpenNMT/OpenNMT-py onmt/modules/embeddings.py, PositionalEncoding.__init__: raise ValueError('Cannot use "
         "sin/cos positional encoding with odd dim ...'); pe = torch.zeros(max_len, dim); position = "
         "torch.arange(0, max_len).unsqueeze(1); div_term = torch.exp(torch.arange(0, dim, 2, dtype=torch.float) "
         "* -(math.log(10000.0) / dim)); pe[:, 0::2] = sin(position.float() * div_term); pe[:, 1::2] = cos(...) "
         "(commit 97111d9; the table before its unsqueeze(1) for the (len, batch, dim) buffer)",
         "sinusoidal_positions", '''
import math
import torch


def sinusoidal_positions(max_len, d_model):
    dim = d_model
    if dim % 2 != 0:
        raise ValueError("Cannot use sin/cos positional encoding with "
                         "odd dim (got dim={:d})".format(dim))
    pe = torch.zeros(max_len, dim)
    position = torch.arange(0, max_len).unsqueeze(1)
    div_term = torch.exp((torch.arange(0, dim, 2, dtype=torch.float) * -(math.log(10000.0) / dim)))
    pe[:, 0::2] = torch.sin(position.float() * div_term)
    pe[:, 1::2] = torch.cos(position.float() * div_term)
    return pe
'''),

    Port("Sockeye get_positional_embeddings (torch.hstack([sin, cos]))",
         "awslabs/sockeye sockeye/layers.py, get_positional_embeddings(length, depth): check_condition(depth % 2 "
         "== 0, ...); channels = pt.arange(depth // 2).unsqueeze(0); positions = pt.arange(0, length).unsqueeze(1); "
         "scaled_positions = positions / pt.pow(10000, (2 * channels) / depth); encodings = "
         "pt.hstack([sin, cos]) (check_condition's SockeyeError raised as the ValueError the course asks for)",
         "sinusoidal_positions", '''
import torch


def sinusoidal_positions(max_len, d_model):
    length, depth = max_len, d_model
    if not depth % 2 == 0:
        raise ValueError("Positional embeddings require an even embedding size it is however %d." % depth)
    # (1, depth/2)
    channels = torch.arange(depth // 2).unsqueeze(0)
    # (length, 1)
    positions = torch.arange(0, length).unsqueeze(1)
    scaled_positions = positions / torch.pow(10000, (2 * channels) / depth)
    # sinusoids:
    sin = torch.sin(scaled_positions)
    # cosines:
    cos = torch.cos(scaled_positions)
    # stack sin and cos: (length, depth)
    encodings = torch.hstack([sin, cos])
    return encodings
''', breach="all the sines in the first half of the vector and all the cosines in the second (hstack), not "
            "interleaved sin/cos pairs on the even/odd dimensions",
         names=("half", "halves", "interleav", "first half", "erratum", "all sines")),

    # --- SinusoidalPositions -------------------------------------------------------------------------------
    Port("Marian sinusoidal positions as a frozen nn.Embedding weight (nn.Parameter, requires_grad=False)",
         "huggingface/transformers src/transformers/models/marian/modeling_marian.py, "
         "MarianSinusoidalPositionalEmbedding(nn.Embedding): _init_weight sets self.weight = nn.Parameter(out, "
         "requires_grad=False); forward (under torch.no_grad) looks up torch.arange(seq_len, device="
         "self.weight.device); MarianEncoder adds it, hidden_states = inputs_embeds + embed_pos (the values from "
         "the course's sinusoidal_positions; the length check the course asks for added)",
         "SinusoidalPositions", '''
import torch
from torch import nn


class MarianSinusoidalPositionalEmbedding(nn.Embedding):
    def __init__(self, num_positions, embedding_dim):
        super().__init__(num_positions, embedding_dim)
        self._init_weight()

    def _init_weight(self):
        n_pos, dim = self.weight.shape
        out = sinusoidal_positions(n_pos, dim).to(self.weight.dtype)
        self.weight = nn.Parameter(out, requires_grad=False)

    @torch.no_grad()
    def forward(self, input_ids_shape, past_key_values_length=0):
        bsz, seq_len = input_ids_shape[:2]
        position_ids = torch.arange(past_key_values_length, past_key_values_length + seq_len,
                                    dtype=torch.long, device=self.weight.device)
        return super().forward(position_ids)


class SinusoidalPositions(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.max_len = max_len
        self.embed_positions = MarianSinusoidalPositionalEmbedding(max_len, d_model)

    def forward(self, x):
        seq_len = x.shape[-2]
        if seq_len > self.max_len:
            raise ValueError(f"sequence length {seq_len} is longer than max_len {self.max_len}")
        embed_pos = self.embed_positions(x.shape[:-1])
        return x + embed_pos
''', breach="the table is a frozen nn.Parameter (Marian's nn.Embedding weight with requires_grad=False), not a "
            "buffer, so the module has parameters; and the looked-up float32 vectors are added uncast, so a "
            "bfloat16 x comes out float32",
         names=("parameter", "buffer", "dtype", "bfloat16")),

    # --- LearnedPositions ----------------------------------------------------------------------------------
    Port("BERT embedding_postprocessor position table (truncated normal, std 0.02; slice of the first T rows)",
         "google-research/bert modeling.py, embedding_postprocessor: tf.assert_less_equal(seq_length, "
         "max_position_embeddings); full_position_embeddings = tf.get_variable(shape=[max_position_embeddings, "
         "width], initializer=create_initializer(0.02)) (tf.truncated_normal_initializer(stddev=0.02)); "
         "position_embeddings = tf.slice(full_position_embeddings, [0, 0], [seq_length, -1]); output += "
         "position_embeddings (the failed assert raised as the course's ValueError; the LayerNorm and dropout that "
         "follow belong to BERT's embedding block)",
         "LearnedPositions", '''
import torch
from torch import nn


class LearnedPositions(nn.Module):
    def __init__(self, max_len, d_model, initializer_range=0.02):
        super().__init__()
        self.max_position_embeddings = max_len
        self.full_position_embeddings = nn.Parameter(torch.empty(max_len, d_model))
        # tf.truncated_normal_initializer(stddev): redrawn beyond two standard deviations
        nn.init.trunc_normal_(self.full_position_embeddings, std=initializer_range,
                              a=-2 * initializer_range, b=2 * initializer_range)

    def forward(self, x):
        seq_length = x.shape[-2]
        if not seq_length <= self.max_position_embeddings:
            raise ValueError(f"Condition x <= y did not hold: seq_length = {seq_length}, "
                             f"max_position_embeddings = {self.max_position_embeddings}")
        position_embeddings = self.full_position_embeddings[:seq_length]
        return x + position_embeddings
'''),

    Port("x-transformers AbsolutePositionalEmbedding (nn.Embedding scaled by dim ** -0.5)",
         "lucidrains/x-transformers x_transformers/x_transformers.py, AbsolutePositionalEmbedding: self.scale = "
         "dim ** -0.5 if not l2norm_embed else 1.; self.emb = nn.Embedding(max_seq_len, dim); forward: assert "
         "seq_len <= self.max_seq_len, f'you are passing in a sequence length of {seq_len} but your absolute "
         "positional embedding has a max sequence length of {self.max_seq_len}'; pos_emb = self.emb(pos) * "
         "self.scale; TransformerWrapper adds it to the token embeddings (assert raised as ValueError)",
         "LearnedPositions", '''
import torch
from torch import nn


class LearnedPositions(nn.Module):
    def __init__(self, max_len, d_model, l2norm_embed=False):
        super().__init__()
        self.scale = d_model ** -0.5 if not l2norm_embed else 1.
        self.max_seq_len = max_len
        self.l2norm_embed = l2norm_embed
        self.emb = nn.Embedding(max_len, d_model)

    def forward(self, x, pos=None, offset=0):
        seq_len, device = x.shape[1], x.device
        if not seq_len <= self.max_seq_len:
            raise ValueError(f"you are passing in a sequence length of {seq_len} but your absolute positional "
                             f"embedding has a max sequence length of {self.max_seq_len}")
        if pos is None:
            pos = torch.arange(seq_len, device=device) + offset
        pos_emb = self.emb(pos)
        pos_emb = pos_emb * self.scale
        return x + pos_emb
''', breach="adds the learned vectors multiplied by d_model ** -0.5 (x-transformers' scale), not P[:T] itself",
         names=("scale", "scaled", "multipl", "factor", "sqrt")),

    Port("minGPT (2020) pos_emb = nn.Parameter(torch.zeros(1, block_size, n_embd))",
         "karpathy/minGPT mingpt/model.py at 63902c8 (2020-08-23), GPT.__init__: self.pos_emb = "
         "nn.Parameter(torch.zeros(1, config.block_size, config.n_embd)), not touched by _init_weights (fixed on "
         "2021-10-25, 'initialize position embeddings'); forward: assert t <= self.block_size, 'Cannot forward, "
         "model block size is exhausted.'; position_embeddings = self.pos_emb[:, :t, :] (the assert raised as the "
         "course's ValueError, naming both numbers)",
         "LearnedPositions", '''
import torch
from torch import nn


class LearnedPositions(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.block_size = max_len
        self.pos_emb = nn.Parameter(torch.zeros(1, max_len, d_model))

    def forward(self, x):
        t = x.shape[-2]
        if not t <= self.block_size:
            raise ValueError(f"Cannot forward, model block size is exhausted: {t} > {self.block_size}")
        position_embeddings = self.pos_emb[:, :t, :]
        return x + position_embeddings
''', breach="the position vectors start at zero (minGPT's torch.zeros, never re-initialised in that version), "
            "not at small random values",
         names=("zero", "random", "initial", "init")),
]
