"""Held-out set 3 (round 3), notebook 06: layer_norm, LayerNorm, EncoderLayer."""
from . import Port

ASSIGNMENT = "06_residual_layernorm"

PORTS = [
    # --- layer_norm ----------------------------------------------------------------------------------------
    Port("Haiku hk.LayerNorm (create_scale=False, create_offset=False; scale and offset given at call time)",
         "google-deepmind/dm-haiku haiku/_src/layer_norm.py, LayerNorm.__call__(inputs, scale, offset): mean = "
         "jnp.mean(inputs, axis, keepdims=True); variance = jnp.var(inputs, axis, keepdims=True) "
         "(use_fast_variance=False, the default); inv = scale * jax.lax.rsqrt(variance + eps); return inv * "
         "(inputs - mean) + offset",
         "layer_norm", '''
import torch


def layer_norm(x, weight, bias, eps=1e-5):
    inputs, scale, offset = x, weight, bias
    mean = torch.mean(inputs, dim=-1, keepdim=True)
    variance = torch.var(inputs, dim=-1, keepdim=True, unbiased=False)
    inv = scale * torch.rsqrt(variance + eps)
    return inv * (inputs - mean) + offset
'''),

    Port("Flax nn.LayerNorm statistics (use_fast_variance=True: var = max(0, E[x^2] - E[x]^2), float32 reductions)",
         "google/flax flax/linen/normalization.py, _compute_stats: dtype promoted to at least float32 "
         "(force_float32_reductions); with use_fast_variance (LayerNorm's default True) mu, mu2 = mean(x), "
         "mean(_abs_sq(x)); var = jnp.maximum(0.0, mu2 - _abs_sq(mu)); _normalize: y = x - mean; mul = "
         "lax.rsqrt(var + epsilon) * scale; y = y * mul + bias, cast back to the input dtype",
         "layer_norm", '''
import torch


def layer_norm(x, weight, bias, eps=1e-5):
    dtype = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(dtype)
    mu = xf.mean(dim=-1, keepdim=True)
    mu2 = (xf * xf).mean(dim=-1, keepdim=True)
    var = torch.clamp(mu2 - mu * mu, min=0.0)
    y = xf - mu
    mul = torch.rsqrt(var + eps)
    mul = mul * weight
    y = y * mul + bias
    return y.to(x.dtype)
''', breach="computes the variance as E[x^2] - E[x]^2 (Flax's default fast variance), which loses its digits in "
            "float32 when the mean is large next to the spread; the notebook asks for the mean of (x - mean)^2 "
            "(classed faithful when the set was written: the notebook said so only after it was graded)",
         names=("fast", "e[x^2] - e[x]^2", "(x - mean)^2")),

    Port("SamLynnEvans/Transformer Norm (x.std(), eps added to the standard deviation)",
         "SamLynnEvans/Transformer Sublayers.py, class Norm: norm = self.alpha * (x - x.mean(dim=-1, "
         "keepdim=True)) / (x.std(dim=-1, keepdim=True) + self.eps) + self.bias (alpha, bias given as weight, "
         "bias)",
         "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    alpha = weight
    norm = alpha * (x - x.mean(dim=-1, keepdim=True)) \\
        / (x.std(dim=-1, keepdim=True) + eps) + bias
    return norm
''', breach="divides by the unbiased standard deviation (torch.std, 1/(d-1)) plus eps, instead of "
            "sqrt(biased variance + eps)",
         names=("unbiased", "d - 1", "d-1", "biased", "std", "eps", "inside the square root")),

    # --- LayerNorm -----------------------------------------------------------------------------------------
    Port("Megatron-LM FusedLayerNorm with layernorm_zero_centered_gamma (weight starts at 0, weight + 1 used)",
         "NVIDIA/Megatron-LM megatron/core/fusions/fused_layer_norm.py, FusedLayerNorm: reset_parameters: if "
         "self.zero_centered_gamma: init.zeros_(self.weight); init.zeros_(self.bias); forward: weight = "
         "self.weight + 1 if self.zero_centered_gamma else self.weight (with config.layernorm_zero_centered_gamma "
         "= True, as Nemotron-style configs set it; the fused kernel replaced by the course's layer_norm)",
         "LayerNorm", '''
import torch
from torch import nn
from torch.nn import init


class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, zero_centered_gamma=True):
        super().__init__()
        self.eps = eps
        self.zero_centered_gamma = zero_centered_gamma
        self.weight = nn.Parameter(torch.empty(d_model))
        self.bias = nn.Parameter(torch.empty(d_model))
        self.reset_parameters()

    def reset_parameters(self):
        if self.zero_centered_gamma:
            init.zeros_(self.weight)
            init.zeros_(self.bias)
        else:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def forward(self, x):
        weight = self.weight + 1 if self.zero_centered_gamma else self.weight
        return layer_norm(x, weight, self.bias, self.eps)
''', breach="zero-centred gamma: the weight parameter starts at zeros and the layer scales by weight + 1, so the "
            "parameter is not nn.LayerNorm's weight (ones at the start, used as it is)",
         names=("ones", "1 +", "+ 1", "zeros", "start", "zero-centred", "zero-centered")),

    # --- EncoderLayer --------------------------------------------------------------------------------------
    Port("Sockeye TransformerEncoderBlock with TransformerProcessBlock sequences ('n'/'dr' pre, ''/'drn' post)",
         "awslabs/sockeye sockeye/transformer.py, TransformerEncoderBlock.forward: data_self_att = "
         "self_attention(pre_self_attention(data)); data = post_self_attention(data_self_att, data); data_ff = "
         "ff(pre_ff(data)); data = post_ff(data_ff, data); TransformerProcessBlock applies its sequence, "
         "'r' = residual, 'n' = layer norm, 'd' = dropout, in order (preprocess 'n' / postprocess 'dr' is "
         "pre-norm, '' / 'drn' post-norm); the course's LayerNorm (Sockeye's own uses eps=1e-6)",
         "EncoderLayer", '''
import torch
from torch import nn


class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.preprocess_sequence = "n" if norm_first else ""
        self.postprocess_sequence = "dr" if norm_first else "drn"
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)      # the 'n' of the attention's pre- or post-process block
        self.norm2 = LayerNorm(d_model)      # the 'n' of the feed-forward's
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    @staticmethod
    def _process(sequence, layer_norm, drop, data, prev=None):
        if not sequence:
            return data
        for step in sequence:
            if step == "r":
                data = data + prev
            elif step == "n":
                data = layer_norm(data)
            elif step == "d":
                data = drop(data)
            else:
                raise ValueError("Unknown step in sequence: %s" % step)
        return data

    def forward(self, x, src_mask=None):
        data = x
        # self-attention
        inputs = self._process(self.preprocess_sequence, self.norm1, self.dropout1, data)
        data_self_att = self.self_attn(inputs, inputs, inputs, src_mask)[0]
        data = self._process(self.postprocess_sequence, self.norm1, self.dropout1, data_self_att, data)
        # feed-forward
        data_ff = self.ff(self._process(self.preprocess_sequence, self.norm2, self.dropout2, data))
        data = self._process(self.postprocess_sequence, self.norm2, self.dropout2, data_ff, data)
        return data
'''),

    Port("labml TransformerLayer (always pre-norm: 'We use pre-norm')",
         "labmlai/annotated_deep_learning_paper_implementations labml_nn/transformers/models.py, TransformerLayer "
         "('This can act as an encoder layer or a decoder layer. We use pre-norm.'): z = norm_self_attn(x); x = x + "
         "dropout(self_attn(query=z, key=z, value=z, mask=mask)); z = norm_ff(x); x = x + "
         "dropout(feed_forward(z)) (one nn.Dropout for both; norm_self_attn, norm_ff named norm1, norm2)",
         "EncoderLayer", '''
import torch
from torch import nn


class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.size = d_model
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.dropout = nn.Dropout(dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)

    def forward(self, x, src_mask=None):
        z = self.norm1(x)
        self_attn = self.self_attn(z, z, z, src_mask)[0]
        x = x + self.dropout(self_attn)
        z = self.norm2(x)
        ff = self.ff(z)
        x = x + self.dropout(ff)
        return x
''', breach="always pre-norm (labml's TransformerLayer has no post-norm): norm_first=False still normalises the "
            "sublayers' inputs instead of LN(x + Sub(x))",
         names=("post-norm", "norm_first", "pre-norm", "postnorm")),

    Port("MLX nn.TransformerEncoderLayer (dropout1 on the attention output; dropout2 only inside the MLP)",
         "ml-explore/mlx python/mlx/nn/layers/transformer.py, TransformerEncoderLayer: attention = "
         "MultiHeadAttention(dims, num_heads) (no dropout); norm_first branch y = ln1(x); y = attention(y, y, y, "
         "mask); y = dropout1(y); x = x + y; y = ln2(x); y = linear1(y); y = activation(y); y = dropout2(y); y = "
         "linear2(y); y = x + y; post-norm branch x = ln1(x + dropout1(attention(x, x, x, mask))); y = ln2(x + "
         "linear2(dropout2(activation(linear1(x))))) (linear1 ... linear2 as the course's FeedForward, ln1/ln2 as "
         "norm1/norm2)",
         "EncoderLayer", '''
import torch
from torch import nn


class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.dropout1 = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x, src_mask=None):
        if self.norm_first:
            y = self.norm1(x)
            y = self.self_attn(y, y, y, src_mask)[0]
            y = self.dropout1(y)
            x = x + y
            y = self.norm2(x)
            y = self.ff(y)
            y = x + y
        else:
            y = self.self_attn(x, x, x, src_mask)[0]
            y = self.dropout1(y)
            x = self.norm1(x + y)
            y = self.ff(x)
            y = self.norm2(x + y)
        return y
''', breach="no dropout on the feed-forward sublayer's output before the residual addition (MLX's dropout2 acts "
            "on the hidden units only), and none on the attention weights",
         names=("dropout",)),
]
