"""Hidden tests of notebook 08 (the encoder-decoder Transformer), one module per exercise.

References, computed here in the grader: ``torch.nn.TransformerDecoderLayer`` for the
decoder layer, and the course's ``lib.transformer`` for the model and greedy decoding.
The usual mistakes are computed from the same trusted parts, put in on purpose, so that a
failure can name its cause.

Graded code may not call PyTorch's fused Transformer and attention operators, nor its
``nn.Transformer*`` and ``nn.MultiheadAttention`` modules (in training mode they do not
always reach a fused operator). Each exercise is graded on its own: ``Transformer`` with
the course's ``DecoderLayer``, ``greedy_decode`` with models built here (a scripted
stand-in, ``scripted.py``, and a small reference ``Transformer``).
"""
import torch

from ..kernel import Bans

REFERENCES = {  # exercise -> its references in lib.decoder and lib.transformer, in the notebook's order
    "DecoderLayer": ("DecoderLayer",),
    "Transformer": ("Transformer",),
    "greedy_decode": ("greedy_decode", "beam_search"),
}
BANS = Bans(ops=("transformer", "multi_head", "scaled_dot_product"),
            references=tuple(n for v in REFERENCES.values() for n in v),
            modules=("nn.Transformer", "nn.TransformerEncoder", "nn.TransformerDecoder",
                     "nn.TransformerEncoderLayer", "nn.TransformerDecoderLayer", "nn.MultiheadAttention",
                     "F.multi_head_attention_forward"))
FIXTURES = ("autograder.checks.encoder_decoder.scripted",)


def causal(t):
    return torch.ones(t, t, dtype=torch.bool).tril()


def padding(lengths, t):
    """(B, 1, T) bool, True for the first lengths[b] positions."""
    return (torch.arange(t)[None, :] < torch.tensor(lengths)[:, None])[:, None, :]
