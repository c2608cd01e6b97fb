"""Ninth held-out set, notebook 06: ports of picoGPT's and ONNX's layer normalization, DeepSeek-V3's RMSNorm and
DETR's encoder layer, each read at its source."""
from tests.corpus import Port

ASSIGNMENT = "06_residual_layernorm"

PORTS = [
    Port("picogpt_layer_norm", "jaymody/picoGPT gpt2.py layer_norm(x, g, b, eps=1e-5) (mean = np.mean(x, axis=-1, "
         "keepdims=True); variance = np.var(x, axis=-1, keepdims=True), ddof 0; (x - mean) / np.sqrt(variance + eps); "
         "g * x + b)", "layer_norm", r'''
def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    g, b = weight, bias
    mean = torch.mean(x, dim=-1, keepdim=True)
    variance = torch.var(x, dim=-1, keepdim=True, correction=0)   # np.var: ddof=0
    x = (x - mean) / torch.sqrt(variance + eps)  # normalize x to have mean=0 and var=1 over last axis
    return g * x + b  # scale and offset with gamma/beta params
'''),
    Port("onnx_layer_norm", "onnx/onnx onnx/reference/ops/op_layer_normalization.py _layer_normalization(X, W, B, "
         "axis=-1, epsilon) (the reference for stash_type=1: X reshaped to a (rows, cols) matrix and cast to "
         "float32, x_mean = sum / cols, variance = sum((x - mean)^2) / cols, 1 / sqrt(variance + epsilon), the "
         "result cast back to X's dtype; torch for NumPy)", "layer_norm", r'''
def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    X, W, B, axis, epsilon = x, weight, bias, -1, eps
    X_shape = X.shape
    X_rank = len(X_shape)
    if axis < 0:
        axis = axis + X_rank
    row_number = 1
    col_number = 1
    for i in range(X_rank):
        if i < axis:
            row_number *= X_shape[i]
        else:
            col_number *= X_shape[i]
    x_mat = torch.reshape(X.to(torch.float32), (row_number, col_number))
    x_mean = torch.sum(x_mat, dim=1, keepdim=True) / col_number
    x_diff = x_mat - x_mean
    x_squared_diff = x_diff * x_diff
    variance = torch.sum(x_squared_diff, dim=1, keepdim=True) / col_number
    variance_eps = variance + epsilon
    std_dev = torch.sqrt(variance_eps)
    inv_std_dev = torch.reciprocal(std_dev)
    y_mat = x_diff * inv_std_dev
    Y = torch.reshape(y_mat, X_shape).to(X.dtype) * W
    if B is not None:
        Y = Y + B
    return Y.to(X.dtype)
''', breach="computes in float32 whatever x's dtype (ONNX's stash_type=1): a float64 input keeps its dtype but only "
            "float32 precision, which shows on rows whose spread is tiny next to their mean",
         names=("float64", "float32", "precision", "dtype")),
    Port("deepseek_rmsnorm", "deepseek-ai/DeepSeek-V3 inference/model.py RMSNorm(dim, eps) (self.weight = "
         "nn.Parameter(torch.ones(dim)), no bias; forward F.rms_norm(x, (self.dim,), self.weight, self.eps), written "
         "out as x * rsqrt(mean(x^2) + eps) * weight since the fused normalization layers are off while grading)",
         "LayerNorm", r'''
class LayerNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.dim = d_model
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # F.rms_norm(x, (self.dim,), self.weight, self.eps)
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight
''', breach="RMSNorm, not LayerNorm: the mean is not subtracted (x is divided by its root mean square) and there is "
            "no bias parameter",
         names=("rms", "mean", "bias", "subtract")),
    Port("detr_encoder_layer", "facebookresearch/detr models/transformer.py TransformerEncoderLayer(d_model, nhead, "
         "dim_feedforward, dropout, activation='relu', normalize_before) (forward_post: q = k = with_pos_embed(src, "
         "pos); src = norm1(src + dropout1(self_attn(q, k, src)[0])); src = norm2(src + dropout2(linear2(dropout("
         "activation(linear1(src)))))); forward_pre the same with norm1 / norm2 first; nn.MultiheadAttention, "
         "nn.LayerNorm and the linear1 / linear2 pair become the course's MultiHeadAttention, LayerNorm and "
         "FeedForward, src_mask with True = may attend stands for attn_mask and key_padding_mask; pos stays None)",
         "EncoderLayer", r'''
class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        # Implementation of Feedforward model
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.normalize_before = norm_first

    def with_pos_embed(self, tensor, pos=None):
        return tensor if pos is None else tensor + pos

    def forward_post(self, src, src_mask=None, pos=None):
        q = k = self.with_pos_embed(src, pos)
        src2 = self.self_attn(q, k, src, src_mask)[0]
        src = src + self.dropout1(src2)
        src = self.norm1(src)
        src2 = self.ff(src)
        src = src + self.dropout2(src2)
        src = self.norm2(src)
        return src

    def forward_pre(self, src, src_mask=None, pos=None):
        src2 = self.norm1(src)
        q = k = self.with_pos_embed(src2, pos)
        src2 = self.self_attn(q, k, src2, src_mask)[0]
        src = src + self.dropout1(src2)
        src2 = self.norm2(src)
        src2 = self.ff(src2)
        src = src + self.dropout2(src2)
        return src

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.normalize_before:
            return self.forward_pre(x, src_mask)
        return self.forward_post(x, src_mask)
'''),
]
