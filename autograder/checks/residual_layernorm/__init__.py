"""Hidden tests of notebook 06 (residual connections, LayerNorm, the encoder layer), one module per exercise.

References: PyTorch's built-ins (``F.layer_norm``, ``nn.TransformerEncoderLayer``),
computed here in the grader, and the course's ``lib.layer_norm``, run trusted in
the kernel for the earlier exercises. Graded code may not call PyTorch's
normalization operators (nor GroupNorm or BatchNorm, the same normalization in
disguise), PyTorch's fused encoder layer, nor the course's references.
"""
import torch.nn.functional as F

from ..kernel import Bans

REFERENCES = {  # exercise -> its references in lib.layer_norm and lib.encoder, in the notebook's order
    "layer_norm": ("layer_norm",),
    "LayerNorm": ("LayerNorm",),
    "EncoderLayer": ("EncoderLayer",),
}
BANS = Bans(ops=("layer_norm", "group_norm", "batch_norm", "transformer_encoder"),
            references=tuple(n for v in REFERENCES.values() for n in v),
            modules=("nn.LayerNorm", "nn.TransformerEncoderLayer"))


def expected_layer_norm(x, weight=None, bias=None, eps=1e-5):
    """The contract of layer_norm, from PyTorch: normalize over the last dimension."""
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def trusted_layer_norm(k):
    """The course's layer_norm, for the tests of the exercises after it."""
    return {"layer_norm": k.reference("lib.layer_norm.layer_norm")}


def trusted_norms(k):
    """The course's layer_norm and LayerNorm, for the tests of EncoderLayer."""
    return {**trusted_layer_norm(k), "LayerNorm": k.reference("lib.layer_norm.LayerNorm")}
