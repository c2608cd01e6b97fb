"""Tenth held-out set, notebook 06: ports of apple/ml-ane-transformers, hyunwoongko/transformer, tracel-ai/burn,
lucidrains/PaLM-pytorch and keras-team/keras-hub, each read at its source."""
from tests.corpus import Port

ASSIGNMENT = "06_residual_layernorm"

PORTS = [
    Port("ane_layer_norm", "apple/ml-ane-transformers ane_transformers/reference/layer_norm.py LayerNormANE.forward "
         "(channels_mean, zero_mean, denom = (mean(zero_mean^2) + eps).rsqrt(), out * weight + bias; the BC1S channel "
         "axis becomes the last axis)", "layer_norm", r'''
def layer_norm(x, weight, bias, eps=1e-5):
    # LayerNormANE normalizes over the channel axis of a (B, C, 1, S) tensor; here that axis is the last one
    channels_mean = x.mean(dim=-1, keepdim=True)
    zero_mean = x - channels_mean
    zero_mean_sq = zero_mean * zero_mean
    denom = (zero_mean_sq.mean(dim=-1, keepdim=True) + eps).rsqrt()
    out = zero_mean * denom
    return (out * weight) + bias
'''),
    Port("hyunwoongko_layer_norm_2019", "hyunwoongko/transformer models/layers/layer_norm.py at 10c0a9d (2019) "
         "LayerNorm.forward (std = x.std(-1) (unbiased), out = gamma * (x - mean) / (std + eps) + beta)", "layer_norm", r'''
def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    std = x.std(-1, keepdim=True)

    out = weight * (x - mean)
    out = out / (std + eps)
    out = out + bias
    return out
''', breach="divides by the unbiased standard deviation x.std(-1) (Bessel's n - 1) plus eps, i.e. eps outside the "
            "square root, instead of sqrt(biased variance + eps)",
         names=("unbiased", "n - 1", "bessel", "std", "outside", "sqrt(var")),
    Port("burn_layernorm", "tracel-ai/burn crates/burn-nn/src/modules/norm/layer.rs LayerNormConfig::init "
         "(gamma Initializer::Ones, beta Initializer::Zeros, epsilon default 1e-5) and LayerNorm::forward "
         "(layer_norm(input, gamma, beta, epsilon))", "LayerNorm", r'''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))    # gamma: Initializer::Ones
        self.bias = nn.Parameter(torch.zeros(d_model))     # beta: Initializer::Zeros (bias = true by default)
        self.epsilon = eps

    def forward(self, x):
        return layer_norm(x, self.weight, self.bias, self.epsilon)
'''),
    Port("palm_bias_buffer_layernorm", "lucidrains/PaLM-pytorch palm_pytorch/palm_pytorch.py class LayerNorm "
         "('layernorm without bias': gamma = nn.Parameter(ones), register_buffer('beta', zeros))", "LayerNorm", r'''
class LayerNorm(nn.Module):
    # "they use layernorm without bias, something that pytorch does not offer"
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.register_buffer("bias", torch.zeros(d_model))

    def forward(self, x):
        return layer_norm(x, self.weight, self.bias, self.eps)
''', breach="the shift is a fixed zero buffer (register_buffer), not a learned nn.Parameter: the layer has no "
            "trainable bias, only the scale is learned",
         names=("buffer", "not a parameter", "not learned", "trainable", "parameters", "bias-less")),
    Port("kerashub_encoder", "keras-team/keras-hub keras_hub/src/layers/modeling/transformer_encoder.py "
         "TransformerEncoder.call (residual = x; if normalize_first: LN; attention; dropout; x + residual; "
         "if not normalize_first: LN; the same for the feed-forward block)", "EncoderLayer", r'''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.normalize_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)    # _self_attention_layer
        self.norm1 = LayerNorm(d_model)                                   # _self_attention_layer_norm
        self.dropout1 = nn.Dropout(dropout)                               # _self_attention_dropout
        self.norm2 = LayerNorm(d_model)                                   # _feedforward_layer_norm
        self.ff = FeedForward(d_model, d_ff, dropout)                     # intermediate + output dense
        self.dropout2 = nn.Dropout(dropout)                               # _feedforward_dropout

    def forward(self, x, src_mask=None):
        # Self attention block.
        residual = x
        if self.normalize_first:
            x = self.norm1(x)
        x = self.self_attn(x, x, x, src_mask)[0]
        x = self.dropout1(x)
        x = x + residual
        if not self.normalize_first:
            x = self.norm1(x)

        # Feedforward block.
        residual = x
        if self.normalize_first:
            x = self.norm2(x)
        x = self.ff(x)
        x = self.dropout2(x)
        x = x + residual
        if not self.normalize_first:
            x = self.norm2(x)
        return x
'''),
    Port("burn_encoder_layer", "tracel-ai/burn crates/burn-nn/src/modules/transformer/encoder.rs "
         "TransformerEncoderLayer::forward (norm_first: norm_2 before the attention, norm_1 before the feed-forward; "
         "post-norm: norm_1 after the attention, norm_2 after the feed-forward; one shared dropout)", "EncoderLayer", r'''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)   # mha
        self.ff = FeedForward(d_model, d_ff, dropout)                    # pwff
        self.norm1 = LayerNorm(d_model)                                  # norm_1
        self.norm2 = LayerNorm(d_model)                                  # norm_2
        self.dropout = nn.Dropout(dropout)                               # one dropout on both residual paths

    def forward(self, x, src_mask=None):
        # Multi-head attention residual path.
        residual_path = x
        if self.norm_first:
            residual_path = self.norm2(residual_path)
        residual_path = self.self_attn(residual_path, residual_path, residual_path, src_mask)[0]
        residual_path = self.dropout(residual_path)
        x = x + residual_path

        # Feed forward residual path.
        if self.norm_first:
            residual_path = self.norm1(x)
        else:
            x = self.norm1(x)
            residual_path = x
        residual_path = self.ff(residual_path)
        residual_path = self.dropout(residual_path)
        x = x + residual_path

        # Main path.
        if not self.norm_first:
            x = self.norm2(x)
        return x
''', breach="in pre-norm mode the two norms are swapped: norm2 normalizes the attention input and norm1 the "
            "feed-forward input (burn's norm_2/norm_1 naming), so trained norm1/norm2 weights are applied to the "
            "wrong sublayer (post-norm is right)",
         names=("swap", "norm2 before", "norm1 before the feed", "wrong norm", "norm1 and norm2", "exchanged")),
]
