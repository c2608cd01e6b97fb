"""Fifth held-out set, notebook 06: OpenAI finetune-transformer-lm, SamLynnEvans/Transformer, Lingvo, TorchScale,
OpenNMT-tf, Swin Transformer (V1/V2)."""
from tests.corpus import Port

ASSIGNMENT = "06_residual_layernorm"

PORTS = [
    Port(
        "OpenAI GPT _norm: reduce_mean of squares, rsqrt(s + e)",
        "openai/finetune-transformer-lm, train.py: _norm(x, g, b, e=1e-5, axis=[-1]) as called by norm()",
        "layer_norm",
        r'''
def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    u = x.mean(dim=-1, keepdim=True)
    s = (x - u).square().mean(dim=-1, keepdim=True)
    x = (x - u) * torch.rsqrt(s + eps)
    if weight is not None and bias is not None:
        x = x * weight + bias
    return x
''',
    ),
    Port(
        "SamLynnEvans Transformer Norm: x.std() + eps",
        "SamLynnEvans/Transformer, Sublayers.py: Norm.forward (alpha * (x - mean) / (x.std(dim=-1) + eps) + bias, "
        "eps=1e-6)",
        "layer_norm",
        r'''
def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    norm = weight * (x - x.mean(dim=-1, keepdim=True)) / (x.std(dim=-1, keepdim=True) + eps) + bias
    return norm
''',
        breach="divides by the unbiased standard deviation (d - 1, torch.std's default) with eps added outside "
               "the square root (default 1e-6), instead of sqrt(biased variance + eps)",
        names=("unbiased", "bessel", "d - 1", "n - 1", "d-1", "n-1", "std", "standard deviation", "outside",
               "correction"),
    ),
    Port(
        "Lingvo LayerNorm: scale initialised to 0, applied as 1 + scale",
        "tensorflow/lingvo, lingvo/core/layers.py: LayerNorm (direct_scale=False: 'scale' variable "
        "WeightInit.Constant(0.0), FProp uses 1.0 + scale); eps left at the course's 1e-5",
        "LayerNorm",
        r'''
class LayerNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(d_model))   # 'scale', init 0.0 (direct_scale=False)
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, 1.0 + self.weight, self.bias, self.eps)
''',
        breach="the learned scale is stored as an offset from 1 (weight starts at zeros and the layer multiplies "
               "by 1 + weight): the parameter is not the gamma the notebook asks for, so weights loaded from "
               "nn.LayerNorm (ones) double the output",
        names=("1 + weight", "1 +", "1.0 +", "zeros", "ones", "weight", "gamma", "scale", "init", "offset",
               "state_dict"),
    ),
    Port(
        "TorchScale EncoderLayer (normalize_before, alpha = 1)",
        "microsoft/torchscale, torchscale/architecture/encoder.py: EncoderLayer.forward (residual_connection = "
        "residual * alpha + x, LayerNorm before or after per normalize_before; deepnorm off so alpha = 1)",
        "EncoderLayer",
        r'''
class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False):
        super().__init__()
        self.norm_first = norm_first
        self.normalize_before = norm_first            # args.encoder_normalize_before
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)               # self_attn_layer_norm
        self.norm2 = LayerNorm(d_model)               # final_layer_norm
        self.dropout1 = nn.Dropout(dropout)           # dropout_module
        self.dropout2 = nn.Dropout(dropout)
        self.alpha = 1.0                              # deepnorm disabled

    def residual_connection(self, x, residual):
        return residual * self.alpha + x

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        residual = x
        if self.normalize_before:
            x = self.norm1(x)
        x, _ = self.self_attn(x, x, x, src_mask)
        x = self.dropout1(x)
        x = self.residual_connection(x, residual)
        if not self.normalize_before:
            x = self.norm1(x)

        residual = x
        if self.normalize_before:
            x = self.norm2(x)
        x = self.ff(x)
        x = self.dropout2(x)
        x = self.residual_connection(x, residual)
        if not self.normalize_before:
            x = self.norm2(x)
        return x
''',
    ),
    Port(
        "OpenNMT-tf SelfAttentionEncoderLayer: pre_norm=True by default",
        "OpenNMT/OpenNMT-tf, opennmt/layers/transformer.py: SelfAttentionEncoderLayer(pre_norm=True) with "
        "TransformerLayerWrapper / common.LayerWrapper (normalize_input=pre_norm, normalize_output=not pre_norm)",
        "EncoderLayer",
        r'''
class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = True):
        super().__init__()
        self.norm_first = norm_first                  # pre_norm=True
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def _wrapper(self, layer, norm, drop, inputs):
        x = norm(inputs) if self.norm_first else inputs        # normalize_input
        outputs = drop(layer(x))                               # output_dropout
        outputs = outputs + inputs                             # residual_connection
        return norm(outputs) if not self.norm_first else outputs   # normalize_output

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        y = self._wrapper(lambda t: self.self_attn(t, t, t, src_mask)[0], self.norm1, self.dropout1, x)
        return self._wrapper(self.ff, self.norm2, self.dropout2, y)
''',
        breach="norm_first defaults to True (OpenNMT's pre_norm default): EncoderLayer(d_model, n_heads, d_ff) "
               "builds a pre-norm layer where the notebook's default is post-norm",
        names=("default", "norm_first", "pre-norm", "prenorm", "pre_norm", "post-norm", "postnorm"),
    ),
    Port(
        "Swin Transformer blocks: V1 pre-norm, V2 res-post-norm",
        "microsoft/Swin-Transformer, models/swin_transformer.py (x + drop_path(attn(norm1(x)))) and "
        "models/swin_transformer_v2.py SwinTransformerBlock.forward (x = shortcut + drop_path(norm1(attn(x))), "
        "x = x + drop_path(norm2(mlp(x))))",
        "EncoderLayer",
        r'''
class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)           # drop_path
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.norm_first:                           # Swin V1 block
            shortcut = x
            y = self.norm1(x)
            x = shortcut + self.dropout1(self.self_attn(y, y, y, src_mask)[0])
            return x + self.dropout2(self.ff(self.norm2(x)))
        shortcut = x                                  # Swin V2: res-post-norm
        x = shortcut + self.dropout1(self.norm1(self.self_attn(x, x, x, src_mask)[0]))
        return x + self.dropout2(self.norm2(self.ff(x)))
''',
        breach="the post-norm variant is Swin V2's res-post-norm, x + LN(Sub(x)): the LayerNorm normalizes the "
               "sublayer's output inside the residual branch instead of LN(x + Sub(x)), and the stream itself is "
               "never normalized",
        names=("post-norm", "postnorm", "res-post", "residual", "norm placement", "inside the residual", "branch",
               "ln(x + ", "order", "stream"),
    ),
]
