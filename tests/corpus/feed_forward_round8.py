"""Eighth held-out set, graded before any change to the judges.

Held-out set 8, notebook 03: ports of the keras.io example "Investigating Vision Transformer representations"
(attention rollout), the rank-collapse code of Dong, Cordonnier and Loukas (twistedcubic/attention-rank-collapse),
ESM (facebookresearch/esm), Informer (zhouhaoyi/Informer2020) and the UvA deep-learning notebooks (phlippe,
tutorial 6), each read at its source.
"""
from tests.corpus import Port

ASSIGNMENT = "03_feed_forward"

PORTS = [
    Port(
        "keras_io_attention_rollout",
        "keras-team/keras-io examples/vision/probing_vits.py attention_rollout_map (identity added for the "
        "residual connections, rows re-normalised, joint_attentions[n] = aug[n] @ joint_attentions[n - 1])",
        "stack_attention",
        r'''
def stack_attention(x: torch.Tensor, n_layers: int):
    h = x
    T = x.shape[-2]
    joint_attentions = torch.eye(T, dtype=x.dtype, device=x.device)
    for n in range(n_layers):
        h, attn_mat = scaled_dot_product_attention(h, h, h)
        # To account for residual connections, we add an identity matrix to the
        # attention matrix and re-normalize the weights.
        residual_attn = torch.eye(T, dtype=x.dtype, device=x.device)
        aug_attn_mat = attn_mat + residual_attn
        aug_attn_mat = aug_attn_mat / aug_attn_mat.sum(dim=-1)[..., None]
        # Recursively multiply the weight matrices.
        joint_attentions = aug_attn_mat @ joint_attentions
    return h, joint_attentions
''',
        breach="attention rollout adds the identity to every layer's weights (for the residual connections) and "
               "re-normalises, (A + I) / 2, before multiplying: combined is not the product of the layers' "
               "weights, and out != combined @ x",
        names=("identity", "residual", "rollout", "eye", "a + i", "(a + i)"),
    ),
    Port(
        "rank_collapse_sample_P_matrix",
        "twistedcubic/attention-rank-collapse paper-plotting/utils.py sample_P_matrix (P = torch.eye(t); "
        "for layer in selected_layers (ascending): P = P @ attentions[layer])",
        "stack_attention",
        r'''
def stack_attention(x: torch.Tensor, n_layers: int):
    h = x
    t = x.shape[-2]
    P = torch.eye(t, dtype=x.dtype, device=x.device)
    for layer in range(n_layers):
        h, attentions = scaled_dot_product_attention(h, h, h)
        P = P @ attentions
    return h, P
''',
        breach="the path matrix is built as P = P @ A for the layers in increasing order, A_1 @ A_2 @ ... @ A_L: "
               "the later layers multiply from the right, the reverse of combined = A_L ... A_1",
        names=("order", "reverse", "from the left", "from the right", "a1 @ a2", "weights @ combined"),
    ),
    Port(
        "rank_collapse_san_paths",
        "twistedcubic/attention-rank-collapse modeling_san.py BertEncoder.forward path check (left_mx_l.insert"
        "(0, att_probs) for each layer, then mult_mx: cur_mx = torch.matmul(cur_mx, mx) starting from torch.eye)",
        "stack_attention",
        r'''
def stack_attention(x: torch.Tensor, n_layers: int):
    hid_states = x
    left_mx_l = []
    for _ in range(n_layers):
        hid_states, att_probs = scaled_dot_product_attention(hid_states, hid_states, hid_states)
        left_mx_l.insert(0, att_probs)

    init_left = torch.eye(x.shape[-2], dtype=x.dtype, device=x.device)

    def mult_mx(mx_l, pos, cur_mx):
        # multiply matrices, the last layer's first
        if pos == len(mx_l):
            return cur_mx
        return mult_mx(mx_l, pos + 1, torch.matmul(cur_mx, mx_l[pos]))

    return hid_states, mult_mx(left_mx_l, 0, init_left)
''',
    ),
    Port(
        "esm_feed_forward_gelu",
        "facebookresearch/esm esm/modules.py FeedForwardNetwork (fc1, nn.GELU(), activation_dropout_module, fc2)",
        "FeedForward",
        r'''
class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.activation_fn = nn.GELU()
        self.activation_dropout_module = nn.Dropout(dropout)
        self.linear1 = nn.Linear(d_model, d_ff)     # fc1
        self.linear2 = nn.Linear(d_ff, d_model)     # fc2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.activation_fn(self.linear1(x))
        x = self.activation_dropout_module(x)
        x = self.linear2(x)
        return x
''',
        breach="ESM's feed-forward network uses nn.GELU() as its activation, where the course's is a ReLU",
        names=("gelu", "relu", "activation"),
    ),
    Port(
        "informer_conv_ffn_dropout_twice",
        "zhouhaoyi/Informer2020 models/encoder.py EncoderLayer feed-forward part (conv1/conv2 with kernel_size=1, "
        "y = dropout(activation(conv1(y))); y = dropout(conv2(y))), with nn.Linear for the 1x1 convolutions",
        "FeedForward",
        r'''
import torch.nn.functional as F


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu"):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)     # conv1 = nn.Conv1d(d_model, d_ff, kernel_size=1)
        self.linear2 = nn.Linear(d_ff, d_model)     # conv2 = nn.Conv1d(d_ff, d_model, kernel_size=1)
        self.dropout = nn.Dropout(dropout)
        self.activation = F.relu if activation == "relu" else F.gelu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dropout(self.activation(self.linear1(x)))
        y = self.dropout(self.linear2(y))
        return y
''',
        breach="Informer applies its dropout twice, to the hidden units and again to the output of the second "
               "layer; the course's FeedForward drops hidden units only (the output dropout belongs to the "
               "residual connection)",
        names=("on the output", "output dropout", "after linear2", "second dropout", "twice", "extra dropout"),
    ),
    Port(
        "uva_linear_net_dropout_before_relu",
        "phlippe/uvadlc_notebooks docs/tutorial_notebooks/tutorial6/Transformers_and_MHAttention.ipynb "
        "EncoderBlock.linear_net (Linear, Dropout, ReLU(inplace=True), Linear), attributes named for the course",
        "FeedForward",
        r'''
class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        # Two-layer MLP
        self.linear1 = nn.Linear(d_model, d_ff)
        self.dropout = nn.Dropout(dropout)
        self.relu = nn.ReLU(inplace=True)
        self.linear2 = nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear2(self.relu(self.dropout(self.linear1(x))))
''',
    ),
]
