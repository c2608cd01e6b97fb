"""Tenth held-out set, notebook 01: ports of numpy-ml's Softmax layer, Deep Learning from Scratch 2's softmax,
jsbaan/transformer-from-scratch's scaled_dot_product, hyunwoongko/transformer's ScaleDotProductAttention and
xformers' scaled_dot_product_attention, each read at its source. One port its writer marked as a breach (the finite
-10000 fill) is allowed by the notebook's contract and is counted as faithful."""
from tests.corpus import Port

ASSIGNMENT = "01_self_attention"

PORTS = [
    Port("numpy_ml_softmax", "ddbourgin/numpy-ml numpy_ml/neural_nets/layers/layers.py Softmax(dim=-1)._fwd "
         "(e_X = np.exp(X - np.max(X, axis=self.dim, keepdims=True)); e_X / e_X.sum(axis=self.dim, keepdims=True); "
         "the layer's dim is the course's dim)", "softmax", r'''
def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    # numpy_ml Softmax(dim)._fwd: "center data to avoid overflow"
    e_X = torch.exp(x - torch.amax(x, dim=dim, keepdim=True))
    return e_X / e_X.sum(dim=dim, keepdim=True)
'''),
    Port("dlfs2_softmax", "oreilly-japan/deep-learning-from-scratch-2 common/functions.py softmax(x) (no axis "
         "argument: if x.ndim == 2 normalise along axis 1, elif x.ndim == 1 along the whole vector, any other rank "
         "is returned as it came in; x /= ... written out of place for autograd)", "softmax", r'''
def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    # common/functions.py softmax(x): there is no axis parameter, dim is never read
    if x.ndim == 2:
        x = x - x.amax(dim=1, keepdim=True)
        x = torch.exp(x)
        x = x / x.sum(dim=1, keepdim=True)
    elif x.ndim == 1:
        x = x - torch.max(x)
        x = torch.exp(x) / torch.sum(torch.exp(x))

    return x
''', breach="ignores dim and handles only 1-D and 2-D inputs: a 3-D (or higher) tensor is returned unchanged, "
            "not normalised at all, and a 2-D tensor is always normalised over its last axis even for dim=0",
         names=("3-d", "unchanged", "ndim", "dim", "rank", "not normalised")),
    Port("jsbaan_sdpa", "jsbaan/transformer-from-scratch multi_head_attention.py MultiHeadAttention.scaled_dot_product "
         "and mask_logits (attn_logits = q @ k^T / math.sqrt(q.size()[-1]); logits.masked_fill(future_mask == 0, "
         "float('-inf')): True = valid connection; F.softmax replaced by the notebook's softmax; one mask argument "
         "instead of the project's two)", "scaled_dot_product_attention", r'''
def scaled_dot_product_attention(q, k, v, mask=None):
    attn_logits = torch.matmul(q, torch.transpose(k, -2, -1))
    attn_logits = attn_logits / math.sqrt(q.size()[-1])
    if mask is not None:
        # mask_logits: "set all indices with 'False' to -inf"
        attn_logits = attn_logits.masked_fill(mask == 0, float("-inf"))
    attention = softmax(attn_logits, dim=-1)
    values = torch.matmul(attention, v)
    return values, attention
'''),
    Port("hyunwoongko_sdpa", "hyunwoongko/transformer models/layers/scale_dot_product_attention.py "
         "ScaleDotProductAttention.forward (score = (q @ k_t) / math.sqrt(d_tensor); score.masked_fill(mask == 0, "
         "-10000); nn.Softmax(dim=-1) replaced by the notebook's softmax; k.transpose(2, 3) and the 4-D unpacking of "
         "k.size() written with negative dims so that any leading dims work)", "scaled_dot_product_attention", r'''
def scaled_dot_product_attention(q, k, v, mask=None, e=1e-12):
    d_tensor = k.size(-1)                 # batch_size, head, length, d_tensor = k.size()

    # 1. dot product Query with Key^T to compute similarity
    k_t = k.transpose(-2, -1)
    score = (q @ k_t) / math.sqrt(d_tensor)

    # 2. apply masking (opt)
    if mask is not None:
        score = score.masked_fill(mask == 0, -10000)

    # 3. pass them softmax to make [0, 1] range
    score = softmax(score, dim=-1)

    # 4. multiply with Value
    v = score @ v
    return v, score
'''),  # written as a breach (a row with every key masked gets uniform weights, not NaN); notebook 01 asks
    # nothing of such rows and accepts masked_fill(-1e9) (tests/mistakes/self_attention.py): faithful
    Port("xformers_sdpa", "facebookresearch/xformers xformers/components/attention/core.py (before the components "
         "were deleted) scaled_dot_product_attention -> scaled_query_key_softmax -> _matmul_with_mask (q = q / "
         "math.sqrt(k.size(-1)); att = q @ k^T; bool mask: a 2-D mask is unsqueeze(0).expand(att.shape[0], -1, -1), "
         "then att[~mask] = float('-inf'), 'mask is presumed false == ignore'; softmax over the last dim; y = att @ v; "
         "returns (y, att) to fit the course, xformers returns y)", "scaled_dot_product_attention", r'''
def scaled_dot_product_attention(q, k, v, mask=None):
    # scaled_query_key_softmax
    q = q / math.sqrt(k.size(-1))
    att = q @ k.transpose(-2, -1)
    if mask is not None:                      # _matmul_with_mask, non optimized codepath, bool mask
        if mask.ndim == 2:
            mask = mask.unsqueeze(0).expand(att.shape[0], -1, -1)
        # mask is presumed false == ignore
        att[~mask] = float("-inf")
    att = softmax(att, dim=att.ndim - 1)      # _softmax
    y = att @ v
    return y, att
''', breach="the boolean mask is applied by boolean indexing att[~mask], which needs a mask of exactly the scores' "
            "shape: broadcastable masks such as (B, 1, T_k) padding masks, or a (T_q, T_k) mask with 4-D or 2-D "
            "scores, raise an IndexError instead of broadcasting",
         names=("broadcast", "index", "shape", "expand", "(b, 1,")),
]
