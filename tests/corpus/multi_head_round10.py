"""Tenth held-out set, notebook 05: ports of Kyubyong/transformer's head split, Whisper's head merge and the
TensorFlow Model Garden's legacy Attention layer, each read at its source."""
from tests.corpus import Port

ASSIGNMENT = "05_multi_head"

PORTS = [
    Port("kyubyong_split_heads", "Kyubyong/transformer modules.py multihead_attention: Q_ = tf.concat(tf.split(Q, "
         "num_heads, axis=2), axis=0) '(h*N, T_q, d_model/h)' (tf.split into num_heads equal pieces along axis 2, "
         "stacked along the batch axis)", "split_heads", r'''
def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    num_heads = n_heads
    pieces = torch.split(x, x.shape[2] // num_heads, dim=2)      # tf.split(Q, num_heads, axis=2)
    return torch.cat(pieces, dim=0)                               # tf.concat(..., axis=0): (h*N, T, d/h)
''', breach="stacks the heads along the batch axis, returning (h*B, T, d/h) (head-major) instead of (B, h, T, d/h); "
            "axis 2 is hard-coded, so with extra leading dims it splits the positions",
         names=("batch", "(h*b", "h * b", "concat", "shape", "head axis")),
    Port("whisper_merge_heads", "openai/whisper whisper/model.py MultiHeadAttention.qkv_attention: out = (w @ v)"
         ".permute(0, 2, 1, 3).flatten(start_dim=2)", "merge_heads", r'''
def merge_heads(x: torch.Tensor) -> torch.Tensor:
    return x.permute(0, 2, 1, 3).flatten(start_dim=2)
''', breach="works only for 4-D (B, h, T, d_k) input: permute(0, 2, 1, 3) names exactly four dims, so any extra "
            "leading dimension raises an error instead of being kept",
         names=("4-d", "leading", "permute", "dimensions", "any number")),
    Port("tfmodels_attention", "tensorflow/models official/legacy/transformer/attention_layer.py Attention("
         "hidden_size, num_heads, attention_dropout) (ValueError when hidden_size % num_heads; query/key/value/"
         "output_transform are EinsumDense with bias_axes=None, ported as bias-free nn.Linear named w_q/w_k/w_v/w_o; "
         "query *= depth**-0.5; logits = einsum('BTNH,BFNH->BNFT', key, query); logits += bias, the additive "
         "attention bias [batch, 1, length_query, length_source]; softmax; dropout on the weights if training; "
         "returns (output, weights) to fit the course, the layer returns the output)", "MultiHeadAttention", r'''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        hidden_size, num_heads = d_model, n_heads
        if hidden_size % num_heads:
            raise ValueError(
                "Hidden size ({}) must be divisible by the number of heads ({})."
                .format(hidden_size, num_heads))
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.attention_dropout = dropout
        # EinsumDense(..., bias_axes=None): no bias terms, whatever `bias` says
        self.w_q = nn.Linear(hidden_size, hidden_size, bias=False)     # "query"  BTE,ENH->BTNH
        self.w_k = nn.Linear(hidden_size, hidden_size, bias=False)     # "key"
        self.w_v = nn.Linear(hidden_size, hidden_size, bias=False)     # "value"
        self.w_o = nn.Linear(hidden_size, hidden_size, bias=False)     # "output_transform" BTNH,NHE->BTE

    def forward(self, query, key, value, mask=None):
        size_per_head = self.hidden_size // self.num_heads
        q = self.w_q(query).unflatten(-1, (self.num_heads, size_per_head))    # [B, T, N, H]
        k = self.w_k(key).unflatten(-1, (self.num_heads, size_per_head))
        v = self.w_v(value).unflatten(-1, (self.num_heads, size_per_head))

        depth = (self.hidden_size // self.num_heads)
        q = q * depth ** -0.5

        logits = torch.einsum("BTNH,BFNH->BNFT", k, q)
        if mask is not None:
            logits = logits + mask        # logits += bias
        weights = torch.softmax(logits, dim=-1)
        dropped = weights
        if self.training:
            dropped = nn.functional.dropout(weights, p=self.attention_dropout, training=True)
        attention_output = torch.einsum("BNFT,BTNH->BFNH", dropped, v)
        attention_output = self.w_o(attention_output.flatten(-2))
        return attention_output, weights
''', breach="the projections never have biases (bias=True is ignored), and the mask is an additive attention bias "
            "added to the logits: a boolean True = may attend mask just adds 1 to the allowed scores and hides nothing",
         names=("bias", "additive", "added", "mask")),
]
