"""Fifth held-out set, notebook 01: Mesh TensorFlow, OpenAI finetune-transformer-lm, AllenNLP, OpenNMT-tf,
microsoft/mup, Google BERT (TF)."""
from tests.corpus import Port

ASSIGNMENT = "01_self_attention"

PORTS = [
    Port(
        "Mesh TensorFlow softmax: exp(x - reduce_logsumexp(x))",
        "tensorflow/mesh, mesh_tensorflow/ops.py: softmax = exp(log_softmax), log_softmax = x - reduce_logsumexp "
        "(max taken on stop_gradient(x))",
        "softmax",
        r'''
def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    # mtf.softmax(x, reduced_dim) = exp(log_softmax(x, reduced_dim))
    # mtf.log_softmax(x) = x - reduce_logsumexp(x); reduce_logsumexp subtracts the max of stop_gradient(x)
    max_logit = x.detach().amax(dim=dim, keepdim=True)
    exp_x = (x - max_logit).exp()
    sum_exp_x = exp_x.sum(dim=dim, keepdim=True)
    logsumexp = sum_exp_x.log() + max_logit
    return (x - logsumexp).exp()
''',
    ),
    Port(
        "OpenAI GPT np_softmax: always over the last axis",
        "openai/finetune-transformer-lm, utils.py: np_softmax(x, t=1) (axis=-1 hard-coded)",
        "softmax",
        r'''
def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    # np_softmax(x, t=1): x = x/t; x = x - max(x, axis=-1); ex = exp(x); ex / sum(ex, axis=-1)
    t = 1
    x = x / t
    x = x - x.amax(dim=-1, keepdim=True)
    ex = x.exp()
    return ex / ex.sum(dim=-1, keepdim=True)
''',
        breach="the dim argument is ignored: the normalization is always over the last axis, so softmax(x, dim=0) "
               "(or any other dim) is wrong",
        names=("dim", "dimension", "axis", "last axis", "ignored", "ignores"),
    ),
    Port(
        "AllenNLP DotProductMatrixAttention + weighted_sum",
        "allenai/allennlp, modules/matrix_attention/dot_product_matrix_attention.py and nn/util.py: weighted_sum "
        "(batch-first (batch, rows, dim) matrices)",
        "simple_self_attention",
        r'''
def _weighted_sum(matrix: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
    # allennlp.nn.util.weighted_sum: `matrix` is (batch_size, num_rows, embedding_dim)
    if attention.dim() == 2 and matrix.dim() == 3:
        return attention.unsqueeze(1).bmm(matrix).squeeze(1)
    if attention.dim() == 3 and matrix.dim() == 3:
        return attention.bmm(matrix)
    if matrix.dim() - 1 < attention.dim():
        expanded_size = list(matrix.size())
        for i in range(attention.dim() - matrix.dim() + 1):
            matrix = matrix.unsqueeze(1)
            expanded_size.insert(i + 1, attention.size(i + 1))
        matrix = matrix.expand(*expanded_size)
    intermediate = attention.unsqueeze(-1).expand_as(matrix) * matrix
    return intermediate.sum(dim=-2)


def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    similarities = x.matmul(x.transpose(-1, -2))          # DotProductMatrixAttention
    attention = softmax(similarities, dim=-1)             # masked_softmax(..., mask=None)
    return _weighted_sum(x, attention)
''',
        breach="weighted_sum assumes a batch-first (batch, rows, dim) matrix: an unbatched (T, d) input is treated as "
               "a batch of single rows and comes back unchanged (x instead of the weighted average), and inputs "
               "with more leading dimensions fail",
        names=("unbatched", "(t, d)", "2-d", "2d input", "two-dimensional", "leading dim", "any number of",
               "extra dim", "4-d", "batch dim", "weighted_sum", "bmm"),
    ),
    Port(
        "OpenNMT-tf dot-product attention: scaled queries, float mask times scores",
        "OpenNMT/OpenNMT-tf, opennmt/layers/transformer.py: MultiHeadAttention.call (queries *= depth**-0.5; "
        "dot * mask + (1 - mask) * float32.min; softmax in float32)",
        "scaled_dot_product_attention",
        r'''
def scaled_dot_product_attention(q, k, v, mask=None):
    queries = q * q.shape[-1] ** -0.5                       # queries *= num_units_per_head ** -0.5
    dot = queries @ k.transpose(-2, -1)
    orig_dtype = dot.dtype
    if orig_dtype in (torch.float16, torch.bfloat16):       # logits computed in float32
        dot = dot.float()
    if mask is not None:
        m = mask.to(dot.dtype)
        dot = dot * m + (1.0 - m) * torch.finfo(dot.dtype).min
    attn = softmax(dot, dim=-1).to(orig_dtype)
    return attn @ v, attn
''',
    ),
    Port(
        "muP attention: scores scaled by 1/d",
        "microsoft/mup, examples/Transformer/model.py: multi_head_attention_forward "
        "(scaling = head_dim ** -1 * sqrt(attn_mult) instead of head_dim ** -0.5)",
        "scaled_dot_product_attention",
        r'''
def scaled_dot_product_attention(q, k, v, mask=None, attn_mult=1.0):
    head_dim = q.shape[-1]
    scaling = float(head_dim) ** -1 * math.sqrt(attn_mult)   # muP: 1/d instead of 1/sqrt(d)
    q = q * scaling
    attn_output_weights = q @ k.transpose(-2, -1)
    if mask is not None:
        attn_output_weights = attn_output_weights.masked_fill(~mask, float("-inf"))
    attn_output_weights = softmax(attn_output_weights, dim=-1)
    return attn_output_weights @ v, attn_output_weights
''',
        breach="scores are divided by d_k (muP's 1/d) instead of sqrt(d_k), so the weights are too flat whenever "
               "d_k > 1",
        names=("1/d", "1 / d", "sqrt", "scale", "scaling", "scaled", "temperature", "divided by d_k"),
    ),
    Port(
        "Google BERT attention_layer projections: dense layers with bias",
        "google-research/bert, modeling.py: attention_layer (tf.layers.dense 'query'/'key'/'value', use_bias "
        "default True, truncated-normal 0.02 init)",
        "SelfAttention",
        r'''
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        d_k = d_model if d_k is None else d_k
        # tf.layers.dense(from_tensor, num_heads * size_per_head, name="query"/"key"/"value"): bias on
        self.w_q = nn.Linear(d_model, d_k)
        self.w_k = nn.Linear(d_model, d_k)
        self.w_v = nn.Linear(d_model, d_k)
        for layer in (self.w_q, self.w_k, self.w_v):       # create_initializer(initializer_range=0.02)
            nn.init.trunc_normal_(layer.weight, std=0.02, a=-0.04, b=0.04)
            nn.init.zeros_(layer.bias)

    def forward(self, x, mask=None):
        return scaled_dot_product_attention(self.w_q(x), self.w_k(x), self.w_v(x), mask=mask)
''',
        breach="the query/key/value projections carry a bias (BERT's dense layers), the notebook asks for "
               "bias-free nn.Linear layers",
        names=("bias",),
    ),
]
