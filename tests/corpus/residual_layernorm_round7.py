"""Seventh held-out set, graded before any change to the judges.

Ports for notebook 06 (residual connections, LayerNorm, encoder layer), from projects no earlier set
used: candle (Rust, candle-nn layer_norm.rs LayerNorm::forward), MaxText (src/maxtext/layers/normalizations.py
RMSNorm), Hugging Face transformers MobileBERT (NoNorm), ELECTRA (its LayerNorm with config.layer_norm_eps) and
M2M100 (M2M100EncoderLayer), and ParlAI (parlai/agents/transformer/modules/encoder.py TransformerEncoderLayer).
"""
from tests.corpus import Port

ASSIGNMENT = "06_residual_layernorm"

PORTS = [
    Port(
        name="candle_layer_norm",
        style="huggingface/candle candle-nn/src/layer_norm.rs, impl Module for LayerNorm (the non-fused path: "
              "internal f32 for f16/bf16, mean_x = sum_keepdim / hidden_size, x - mean_x, norm_x = "
              "sqr().sum_keepdim / hidden_size, x / sqrt(norm_x + eps), then weight and bias)",
        cell="layer_norm",
        code=r'''
def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    x_dtype = x.dtype
    internal_dtype = torch.float32 if x_dtype in (torch.float16, torch.bfloat16) else x_dtype
    hidden_size = x.shape[-1]
    x = x.to(internal_dtype)
    mean_x = x.sum(dim=-1, keepdim=True) / hidden_size
    x = x - mean_x
    norm_x = x.pow(2).sum(dim=-1, keepdim=True) / hidden_size
    x_normed = x / (norm_x + eps).sqrt()
    x = x_normed.to(x_dtype) * weight
    return x + bias
''',
    ),
    Port(
        name="maxtext_rms_norm",
        style="AI-Hypercomputer/maxtext src/maxtext/layers/normalizations.py, RMSNorm.__call__ (mean2 = "
              "mean(square(x)), y = x * rsqrt(mean2 + epsilon), einsum('...k,k->...k', y, scale)); the float32 "
              "upcast left out, the bias argument accepted and unused (RMSNorm has no offset)",
        cell="layer_norm",
        code=r'''
def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Applies RMS normalization on the input."""
    mean2 = torch.mean(torch.square(x), dim=-1, keepdim=True)
    y = x * torch.rsqrt(mean2 + eps)
    scale = weight
    return torch.einsum("...k,k->...k", y, scale)
''',
        breach="MaxText normalizes with RMSNorm: it divides by the root mean square without subtracting the mean "
               "first (the output does not have mean 0) and has no shift, so the bias is ignored",
        names=("mean", "rms", "center", "subtract", "bias", "shift"),
    ),
    Port(
        name="mobilebert_no_norm",
        style="huggingface/transformers src/transformers/models/mobilebert/modeling_mobilebert.py, NoNorm (the "
              "normalization MobileBertConfig uses by default, normalization_type='no_norm': input * weight + bias)",
        cell="LayerNorm",
        code=r'''
class LayerNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(d_model))
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, input_tensor: torch.Tensor) -> torch.Tensor:
        return input_tensor * self.weight + self.bias
''',
        breach="MobileBERT's default NoNorm only scales and shifts: no mean is subtracted and nothing is divided by "
               "the standard deviation (eps unused), so the module is an affine map, not a LayerNorm",
        names=("normaliz", "mean", "variance", "no norm", "standard deviation", "eps"),
    ),
    Port(
        name="electra_layer_norm_eps",
        style="huggingface/transformers src/transformers/models/electra/modeling_electra.py, "
              "self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) with ElectraConfig's "
              "layer_norm_eps=1e-12 as the default; the notebook's layer_norm for nn.LayerNorm (switched off here)",
        cell="LayerNorm",
        code=r'''
class LayerNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-12):          # ElectraConfig(layer_norm_eps=1e-12)
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.weight, self.bias, self.eps)
''',
        breach="the BERT-family default layer_norm_eps = 1e-12: LayerNorm(d_model) without an eps uses 1e-12 "
               "instead of the exercise's default 1e-5, so rows whose spread is tiny are blown up instead of damped",
        names=("eps", "epsilon", "1e-5", "1e-12", "default"),
    ),
    Port(
        name="parlai_transformer_encoder_layer",
        style="facebookresearch/ParlAI parlai/agents/transformer/modules/encoder.py, TransformerEncoderLayer "
              "(variant 'aiayn' for post-norm, 'prelayernorm' for pre-norm; one self.dropout shared by both "
              "sublayers; attention/ffn/norm1/norm2 renamed self_attn/ff/norm1/norm2); the final "
              "tensor *= mask.unsqueeze(-1), which needs ParlAI's (B, T) token mask, left out",
        cell="EncoderLayer",
        code=r'''
class EncoderLayer(nn.Module):
    """Implements a single Transformer encoder layer."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False):
        super().__init__()
        self.dim = d_model
        self.ffn_dim = d_ff
        self.variant = 'prelayernorm' if norm_first else 'aiayn'
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)   # self.attention
        self.norm1 = LayerNorm(d_model)
        self.ff = FeedForward(d_model, d_ff, dropout)                    # self.ffn
        self.norm2 = LayerNorm(d_model)
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        tensor = x
        residual = tensor
        if self.variant == 'prelayernorm':
            tensor = self.norm1(tensor)
        attended_tensor = self.self_attn(tensor, tensor, tensor, src_mask)[0]
        tensor = residual + self.dropout(attended_tensor)
        if self.variant == 'aiayn' or self.variant == 'xlm' or self.variant == 'bart':
            tensor = self.norm1(tensor)
        residual = tensor
        if self.variant == 'prelayernorm':
            tensor = self.norm2(tensor)
        tensor = residual + self.dropout(self.ff(tensor))
        if self.variant == 'aiayn' or self.variant == 'xlm' or self.variant == 'bart':
            tensor = self.norm2(tensor)
        return tensor
''',
    ),
    Port(
        name="m2m100_encoder_layer",
        style="huggingface/transformers src/transformers/models/m2m_100/modeling_m2m_100.py, M2M100EncoderLayer "
              "(self_attn_layer_norm before the attention, final_layer_norm before fc1/activation/fc2, dropout on "
              "each sublayer's output, residual after: pre-norm only); the course's MultiHeadAttention and "
              "FeedForward for its attention and fc1/fc2, its two LayerNorms named norm1/norm2",
        cell="EncoderLayer",
        code=r'''
class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False):
        super().__init__()
        self.embed_dim = d_model
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.norm1 = LayerNorm(self.embed_dim)                    # self_attn_layer_norm
        self.dropout = dropout
        self.ff = FeedForward(d_model, d_ff, dropout)             # fc1, activation_fn, activation_dropout, fc2
        self.norm2 = LayerNorm(self.embed_dim)                    # final_layer_norm
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        hidden_states = x
        residual = hidden_states
        hidden_states = self.norm1(hidden_states)
        hidden_states, attn_weights = self.self_attn(hidden_states, hidden_states, hidden_states, src_mask)
        hidden_states = self.dropout1(hidden_states)
        hidden_states = residual + hidden_states

        residual = hidden_states
        hidden_states = self.norm2(hidden_states)
        hidden_states = self.ff(hidden_states)
        hidden_states = self.dropout2(hidden_states)
        hidden_states = residual + hidden_states
        return hidden_states
''',
        breach="M2M100's encoder layer is always pre-norm (LayerNorm before each sublayer, residual after): "
               "norm_first=False is ignored, so the default post-norm layer LN(x + Drop(Sub(x))) is never built",
        names=("norm_first", "pre-norm", "post-norm", "ignored", "prenorm", "postnorm"),
    ),
]
