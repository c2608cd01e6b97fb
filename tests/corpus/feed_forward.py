"""Ported code of notebook 03 (stacked attention, the position-wise feed-forward network) in the styles of public
projects."""
from . import Port

ASSIGNMENT = "03_feed_forward"

PORTS = [
    # --- stack_attention ------------------------------------------------------------------------------
    Port("Abnar & Zuidema compute_joint_attention without the residual (add_residual=False)",
         "samiraabnar/attention_flow attention_graph_util.py, compute_joint_attention(att_mat, add_residual=False): "
         "joint_attentions[0] = att_mat[0]; joint_attentions[i] = att_mat[i].dot(joint_attentions[i-1])",
         "stack_attention", '''
def stack_attention(x, n_layers):
    T = x.shape[-2]
    h = x
    joint_attention = torch.eye(T, dtype=x.dtype, device=x.device).expand(*x.shape[:-2], T, T)
    for i in range(n_layers):
        h, att_mat = scaled_dot_product_attention(h, h, h)
        joint_attention = att_mat @ joint_attention
    return h, joint_attention
'''),
    Port("vit-explain attention rollout (identity added for the residual, rows renormalised)",
         "jacobgil/vit-explain vit_rollout.py, rollout(): I = torch.eye(n); a = (attention_heads_fused + 1.0*I) / 2; "
         "a = a / a.sum(dim=-1); result = torch.matmul(a, result)", "stack_attention", '''
def stack_attention(x, n_layers):
    T = x.shape[-2]
    h = x
    result = torch.eye(T, dtype=x.dtype, device=x.device).expand(*x.shape[:-2], T, T)
    I = torch.eye(T, dtype=x.dtype, device=x.device)
    for _ in range(n_layers):
        h, attention = scaled_dot_product_attention(h, h, h)
        a = (attention + 1.0 * I) / 2
        a = a / a.sum(dim=-1, keepdim=True)
        result = torch.matmul(a, result)
    return h, result
''', breach="rollout adds the identity (the residual) to each layer's weights and renormalises, so combined is not "
            "the product A_L ... A_1 of the weights and out != combined @ x",
         names=("identity", "residual", "rollout", "product of", "out == combined")),

    # --- FeedForward ----------------------------------------------------------------------------------
    Port("Annotated Transformer PositionwiseFeedForward",
         "harvardnlp/annotated-transformer, PositionwiseFeedForward: w_1 = Linear(d_model, d_ff), w_2 = "
         "Linear(d_ff, d_model); forward: self.w_2(self.dropout(self.w_1(x).relu()))", "FeedForward", '''
class FeedForward(nn.Module):
    "Implements FFN equation."

    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.dropout(self.linear1(x).relu()))
'''),
    Port("nn.TransformerEncoderLayer feed-forward block (_ff_block)",
         "pytorch torch/nn/modules/transformer.py TransformerEncoderLayer: linear1, dropout, linear2, "
         "activation=F.relu; _ff_block: self.linear2(self.dropout(self.activation(self.linear1(x))))", "FeedForward", '''
import torch.nn.functional as F


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation=F.relu):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.activation = activation

    def forward(self, x):
        return self.linear2(self.dropout(self.activation(self.linear1(x))))
'''),
    Port("TensorFlow tutorial point_wise_feed_forward_network (Sequential of two dense layers)",
         "tensorflow/docs site/en/tutorials/text/transformer.ipynb, point_wise_feed_forward_network(d_model, dff): "
         "Sequential([Dense(dff, activation='relu'), Dense(d_model)])", "FeedForward", '''
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)   # (batch_size, seq_len, dff)
        self.relu = nn.ReLU()
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(d_ff, d_model)   # (batch_size, seq_len, d_model)

    def forward(self, x):
        return self.linear2(self.dropout(self.relu(self.linear1(x))))
'''),
    Port("nanoGPT MLP (GELU, dropout after c_proj)",
         "karpathy/nanoGPT model.py class MLP: c_fc = Linear(n_embd, 4 * n_embd), gelu = nn.GELU(), c_proj, "
         "dropout; forward: dropout(c_proj(gelu(c_fc(x))))", "FeedForward", '''
class FeedForward(nn.Module):

    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.gelu = nn.GELU()
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        x = self.linear1(x)
        x = self.gelu(x)
        x = self.linear2(x)
        x = self.dropout(x)
        return x
''', breach="GELU between the layers instead of ReLU (and the dropout on the output instead of the hidden units)",
         names=("gelu", "relu", "activation")),
    Port("d2l PositionWiseFFN with nn.LazyLinear",
         "d2l-ai/d2l-en chapter_attention-mechanisms-and-transformers/transformer: PositionWiseFFN(ffn_num_hiddens, "
         "ffn_num_outputs): dense1 = nn.LazyLinear(ffn_num_hiddens), relu, dense2 = nn.LazyLinear(ffn_num_outputs)",
         "FeedForward", '''
class FeedForward(nn.Module):
    """The positionwise feed-forward network."""

    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.LazyLinear(d_ff)
        self.relu = nn.ReLU()
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.LazyLinear(d_model)

    def forward(self, X):
        return self.linear2(self.dropout(self.relu(self.linear1(X))))
''', breach="LazyLinear layers: linear1's input size is not d_model until the first call (its weight is "
            "uninitialized, in_features 0), so linear1 is not a d_model -> d_ff layer when built",
         names=("lazy", "uninitialized", "in_features", "d_model -> d_ff", "before the first call")),
    Port("T5 DenseReluDense (bias-free wi and wo)",
         "huggingface/transformers models/t5/modeling_t5.py T5DenseActDense: wi = nn.Linear(d_model, d_ff, "
         "bias=False), wo = nn.Linear(d_ff, d_model, bias=False), act = ReLU, dropout between", "FeedForward", '''
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff, bias=False)
        self.linear2 = nn.Linear(d_ff, d_model, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.act = nn.ReLU()

    def forward(self, hidden_states):
        hidden_states = self.linear1(hidden_states)
        hidden_states = self.act(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.linear2(hidden_states)
        return hidden_states
''', breach="both layers without biases, where the FFN is max(0, x W1 + b1) W2 + b2 with nn.Linear's biases",
         names=("bias", "b1", "b2")),
    Port("attention-is-all-you-need-pytorch PositionwiseFeedForward (residual and LayerNorm inside)",
         "jadore801120/attention-is-all-you-need-pytorch transformer/SubLayers.py PositionwiseFeedForward: "
         "residual = x; x = w_2(relu(w_1(x))); x = dropout(x); x += residual; x = layer_norm(x)", "FeedForward", '''
class FeedForward(nn.Module):
    """ A two-feed-forward-layer module """

    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)  # position-wise
        self.linear2 = nn.Linear(d_ff, d_model)  # position-wise
        self.layer_norm = nn.LayerNorm(d_model, eps=1e-6)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        residual = x
        x = self.linear2(torch.relu(self.linear1(x)))
        x = self.dropout(x)
        x += residual
        x = self.layer_norm(x)
        return x
''', breach="adds the residual connection and applies a LayerNorm inside the feed-forward block, so the output "
            "is LayerNorm(x + FFN(x)), not FFN(x)",
         names=("residual", "layernorm", "layer norm", "x +", "normaliz")),
    Port("attention-is-all-you-need-pytorch, early version: two Conv1d of kernel size 1",
         "jadore801120/attention-is-all-you-need-pytorch (2017) transformer/SubLayers.py: w_1 = nn.Conv1d(d_in, "
         "d_hid, 1), w_2 = nn.Conv1d(d_hid, d_in, 1); output = w_2(relu(w_1(x.transpose(1, 2)))).transpose(2, 1) "
         "(the paper: 'two convolutions with kernel size 1')", "FeedForward", '''
class FeedForward(nn.Module):
    """ A two-feed-forward-layer module """

    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Conv1d(d_model, d_ff, 1)  # position-wise
        self.linear2 = nn.Conv1d(d_ff, d_model, 1)  # position-wise
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        output = x.transpose(1, 2)
        output = self.linear2(self.dropout(torch.relu(self.linear1(output))))
        return output.transpose(2, 1)
''', breach="linear1 and linear2 are nn.Conv1d (weights (d_ff, d_model, 1)), not nn.Linear, and the transpose(1, 2) "
            "only works for a 3-D (B, T, d) input",
         names=("conv1d", "nn.linear", "not a linear", "3-d", "leading dim")),
]
