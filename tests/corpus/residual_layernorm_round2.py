"""Held-out ports of notebook 06 (layer_norm, LayerNorm, EncoderLayer) in the styles of public projects the
course's own corpus does not use (llm.c, PoolFormer, tinygrad, fairseq2, timm)."""
from . import Port

ASSIGNMENT = "06_residual_layernorm"

PRE_POST = ("post-norm", "pre-norm", "norm_first", "after the addition", "before the sublayer")

PORTS = [
    # --- layer_norm -----------------------------------------------------------------------------------
    Port("llm.c reference LayerNorm.forward (sum / C, rstd = (var + eps) ** -0.5)",
         "karpathy/llm.c doc/layernorm/layernorm.py, LayerNorm.forward(x, w, b): mean = x.sum(-1, keepdim=True) / "
         "C; xshift = x - mean; var = (xshift**2).sum(-1, keepdim=True) / C; rstd = (var + eps) ** -0.5; norm = "
         "xshift * rstd; out = norm * w + b (there B, T, C = x.size(), eps = 1e-5 and a cache is returned too; "
         "C read from the last dimension and eps taken from the argument here)", "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    C = x.size(-1)
    mean = x.sum(-1, keepdim=True) / C  # B,T,1
    xshift = x - mean  # B,T,C
    var = (xshift**2).sum(-1, keepdim=True) / C  # B,T,1
    rstd = (var + eps) ** -0.5  # B,T,1
    norm = xshift * rstd  # B,T,C
    out = norm * weight + bias  # B,T,C
    return out
'''),
    Port("PoolFormer GroupNorm with 1 group used as its 'LayerNorm' (statistics over every non-batch dimension)",
         "sail-sg/poolformer models/poolformer.py, class GroupNorm(nn.GroupNorm): 'Group Normalization with 1 group. "
         "Input: tensor in shape [B, C, H, W]'; super().__init__(1, num_channels) (also timm GroupNorm1): the mean "
         "and variance of a sample are taken over all its dimensions but the batch", "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    # one group: the statistics of a sample run over every dimension except the batch (dim 0)
    dims = tuple(range(1, x.dim()))
    mean = x.mean(dim=dims, keepdim=True)
    var = (x - mean).pow(2).mean(dim=dims, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
''', breach="normalises each sample over all its non-batch dimensions (GroupNorm with one group, PoolFormer's "
            "'LayerNorm'), so a token's statistics mix the whole sequence, instead of over the last dimension only",
         names=("last dim", "per token", "each token", "whole sequence", "other tokens", "other positions",
                "dim=-1")),

    # --- LayerNorm ------------------------------------------------------------------------------------
    Port("tinygrad nn.LayerNorm (Tensor.layernorm, then x * weight + bias)",
         "tinygrad/tinygrad tinygrad/nn/__init__.py, LayerNorm: self.weight, self.bias = (Tensor.ones(*shape), "
         "Tensor.zeros(*shape)) if elementwise_affine; __call__: assert on the last dimensions; x = "
         "x.layernorm(eps=self.eps, axis=self.axis); return x * self.weight + self.bias; Tensor.layernorm: y = "
         "self - self.mean(axis, keepdim=True); y.mul((y*y).mean(axis, keepdim=True).add(eps).rsqrt())",
         "LayerNorm", '''
def _layernorm(x, axis=-1, eps=1e-5):
    y = (x - x.mean(axis, keepdim=True))
    return y.mul((y * y).mean(axis, keepdim=True).add(eps).rsqrt())


class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, elementwise_affine=True):
        super().__init__()
        self.normalized_shape = (d_model,)
        self.axis, self.eps, self.elementwise_affine = \\
            tuple(-1 - i for i in range(len(self.normalized_shape))), eps, elementwise_affine
        self.weight, self.bias = (nn.Parameter(torch.ones(*self.normalized_shape)),
                                  nn.Parameter(torch.zeros(*self.normalized_shape))) if elementwise_affine \\
            else (None, None)

    def forward(self, x):
        assert self.normalized_shape == tuple(x.shape[-len(self.normalized_shape):]), \\
            f"last dimensions of {tuple(x.shape)} must match {self.normalized_shape}"
        x = _layernorm(x, axis=self.axis, eps=self.eps)
        if not self.elementwise_affine:
            return x
        return x * self.weight + self.bias
'''),

    # --- EncoderLayer ---------------------------------------------------------------------------------
    Port("fairseq2 StandardTransformerEncoderLayer (norm_order POST / PRE, residual bookkeeping)",
         "facebookresearch/fairseq2 src/fairseq2/nn/transformer/encoder_layer.py, StandardTransformerEncoderLayer: "
         "_forward_self_attn: residual = seqs; if norm_order != POST: seqs = self_attn_layer_norm(seqs); "
         "self_attn; self_attn_dropout (None when dropout_p is 0); seqs = seqs + residual; if POST: "
         "self_attn_layer_norm(seqs); _forward_ffn the same with ffn_layer_norm and ffn_dropout",
         "EncoderLayer", '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.model_dim = d_model
        self.norm_order = "PRE" if norm_first else "POST"
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.norm1 = LayerNorm(d_model)                       # self_attn_layer_norm
        if dropout > 0.0:
            self.self_attn_dropout = nn.Dropout(dropout)
        else:
            self.register_module("self_attn_dropout", None)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm2 = LayerNorm(d_model)                       # ffn_layer_norm
        if dropout > 0.0:
            self.ffn_dropout = nn.Dropout(dropout)
        else:
            self.register_module("ffn_dropout", None)
        self.register_parameter("residual_scale", None)

    def forward(self, x, src_mask=None):
        seqs = self._forward_self_attn(x, src_mask)
        seqs = self._forward_ffn(seqs)
        return seqs

    def _forward_self_attn(self, seqs, padding_mask):
        residual = seqs
        if self.norm_order != "POST":
            seqs = self.norm1(seqs)
        seqs = self.self_attn(seqs, seqs, seqs, padding_mask)[0]
        if self.self_attn_dropout is not None:
            seqs = self.self_attn_dropout(seqs)
        seqs = seqs + residual
        if self.norm_order == "POST":
            seqs = self.norm1(seqs)
        return seqs

    def _forward_ffn(self, seqs):
        residual = seqs
        if self.norm_order != "POST":
            seqs = self.norm2(seqs)
        seqs = self.ff(seqs)
        if self.ffn_dropout is not None:
            seqs = self.ffn_dropout(seqs)
        if self.residual_scale is not None:
            residual = torch.mul(self.residual_scale, residual)
        seqs = seqs + residual
        if self.norm_order == "POST":
            seqs = self.norm2(seqs)
        return seqs
'''),
    Port("timm Block (pre-norm) and ResPostBlock (norm on the sublayer output, inside the residual branch)",
         "huggingface/pytorch-image-models timm/models/vision_transformer.py, Block.forward: x = x + drop_path1("
         "ls1(attn(norm1(x)))); ResPostBlock.forward: x = x + self.drop_path1(self.norm1(self.attn(x))); x = x + "
         "self.drop_path2(self.norm2(self.mlp(x))) (the dropout sits where timm's proj_drop does, at the end of "
         "each sublayer)", "EncoderLayer", '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first                          # True: timm Block; False: timm ResPostBlock
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.norm1 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)                   # attn.proj_drop
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm2 = LayerNorm(d_model)
        self.dropout2 = nn.Dropout(dropout)                   # mlp's final drop

    def attn(self, x, attn_mask=None):
        return self.dropout1(self.self_attn(x, x, x, attn_mask)[0])

    def mlp(self, x):
        return self.dropout2(self.ff(x))

    def forward(self, x, src_mask=None):
        if self.norm_first:
            x = x + self.attn(self.norm1(x), attn_mask=src_mask)
            x = x + self.mlp(self.norm2(x))
            return x
        x = x + self.norm1(self.attn(x, attn_mask=src_mask))
        x = x + self.norm2(self.mlp(x))
        return x
''', breach="for norm_first=False it is timm's res-post-norm x + LN(Sub(x)) (the LayerNorm inside the residual "
            "branch, the stream never normalised) instead of the post-norm LN(x + Sub(x))",
         names=PRE_POST + ("res-post", "sublayer output", "inside the residual", "stream")),
]
