"""Fifth held-out set, notebook 03: samiraabnar/attention_flow, OpenNMT-tf, jadore801120/attention-is-all-you-need-
pytorch, OpenAI finetune-transformer-lm, AllenNLP."""
from tests.corpus import Port

ASSIGNMENT = "03_feed_forward"

PORTS = [
    Port(
        "attention_flow compute_joint_attention without residual",
        "samiraabnar/attention_flow, attention_graph_util.py: compute_joint_attention(att_mat, add_residual=False) "
        "(joint[i] = att[i].dot(joint[i-1])); identity for zero layers added for the course API",
        "stack_attention",
        r'''
def stack_attention(x: torch.Tensor, n_layers: int):
    T = x.shape[-2]
    h = x
    att_mat = []
    for _ in range(n_layers):
        h, weights = scaled_dot_product_attention(h, h, h)
        att_mat.append(weights)
    if not att_mat:
        return h, torch.eye(T, dtype=x.dtype, device=x.device).expand(*x.shape[:-2], T, T)
    # compute_joint_attention(att_mat, add_residual=False)
    aug_att_mat = att_mat
    joint_attention = aug_att_mat[0]
    for i in range(1, len(aug_att_mat)):
        joint_attention = aug_att_mat[i] @ joint_attention
    return h, joint_attention
''',
    ),
    Port(
        "attention_flow attention rollout with the residual identity (default add_residual=True)",
        "samiraabnar/attention_flow, attention_graph_util.py: compute_joint_attention(att_mat, add_residual=True) "
        "(aug = (att + I) / row sums, then the same product)",
        "stack_attention",
        r'''
def stack_attention(x: torch.Tensor, n_layers: int):
    T = x.shape[-2]
    h = x
    att_mat = []
    for _ in range(n_layers):
        h, weights = scaled_dot_product_attention(h, h, h)
        att_mat.append(weights)
    residual_att = torch.eye(T, dtype=x.dtype, device=x.device)
    if not att_mat:
        return h, residual_att.expand(*x.shape[:-2], T, T)
    # add_residual=True: account for the skip connection
    aug_att_mat = [a + residual_att for a in att_mat]
    aug_att_mat = [a / a.sum(dim=-1, keepdim=True) for a in aug_att_mat]
    joint_attention = aug_att_mat[0]
    for i in range(1, len(aug_att_mat)):
        joint_attention = aug_att_mat[i] @ joint_attention
    return h, joint_attention
''',
        breach="each layer's weights are mixed with the identity ((A + I) / 2, attention rollout's residual), so "
               "`combined` is not the product of the layers' weights and out != combined @ x",
        names=("residual", "identity", "eye", "rollout", "(a + i)", "0.5", "augment"),
    ),
    Port(
        "OpenNMT-tf FeedForwardNetwork",
        "OpenNMT/OpenNMT-tf, opennmt/layers/transformer.py: FeedForwardNetwork (inner Dense with relu, dropout on "
        "the inner activations, outer Dense)",
        "FeedForward",
        r'''
class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation=torch.relu):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)     # self.inner = Dense(inner_dim, activation=activation)
        self.linear2 = nn.Linear(d_ff, d_model)     # self.outer = Dense(output_dim)
        self.dropout = nn.Dropout(dropout)
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inner = self.activation(self.linear1(x))
        inner = self.dropout(inner)
        return self.linear2(inner)
''',
    ),
    Port(
        "attention-is-all-you-need-pytorch PositionwiseFeedForward (residual and LayerNorm inside)",
        "jadore801120/attention-is-all-you-need-pytorch, transformer/SubLayers.py: PositionwiseFeedForward "
        "(w_2(relu(w_1(x))), dropout, x += residual, layer_norm)",
        "FeedForward",
        r'''
class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)   # w_1, position-wise
        self.linear2 = nn.Linear(d_ff, d_model)   # w_2, position-wise
        self.layer_norm = nn.LayerNorm(d_model, eps=1e-6)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        residual = x
        x = self.linear2(torch.relu(self.linear1(x)))
        x = self.dropout(x)
        x = x + residual
        x = self.layer_norm(x)
        return x
''',
        breach="the block adds its input back and applies a LayerNorm (Add & Norm built into the FFN), and its "
               "dropout acts on the output, not on the hidden units: it is not linear2(dropout(relu(linear1(x))))",
        names=("residual", "layer norm", "layernorm", "layer_norm", "normaliz", "skip", "add & norm", "input back"),
    ),
    Port(
        "OpenAI GPT mlp: gelu and dropout on the output",
        "openai/finetune-transformer-lm, train.py: mlp (c_fc, act_fns[afn] with default afn='gelu' (tanh "
        "approximation), c_proj, dropout(h2, resid_pdrop))",
        "FeedForward",
        r'''
import math


def gelu(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * torch.pow(x, 3))))


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)    # c_fc
        self.linear2 = nn.Linear(d_ff, d_model)    # c_proj
        self.dropout = nn.Dropout(dropout)         # resid_pdrop

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = gelu(self.linear1(x))
        h2 = self.linear2(h)
        return self.dropout(h2)
''',
        breach="GELU (tanh approximation) instead of ReLU, and dropout applied to the block's output instead of "
               "the hidden units",
        names=("gelu", "relu", "activation", "tanh", "dropout"),
    ),
    Port(
        "AllenNLP FeedForward([relu, linear]) with dropout after every layer",
        "allenai/allennlp, modules/feedforward.py: FeedForward.forward (output = dropout(activation(layer(output))) "
        "for each layer), as built by StackedSelfAttentionEncoder (activations relu, linear)",
        "FeedForward",
        r'''
class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self._activations = [torch.relu, lambda t: t]              # Activation "relu", "linear"
        self._dropout = nn.ModuleList([nn.Dropout(dropout), nn.Dropout(dropout)])
        self.dropout = self._dropout[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        output = x
        for layer, activation, dropout in zip((self.linear1, self.linear2), self._activations, self._dropout):
            output = dropout(activation(layer(output)))
        return output
''',
        breach="a second dropout is applied to the output of linear2 (AllenNLP drops after every layer), so in "
               "training mode the block's output is also dropped and rescaled",
        names=("dropout",),
    ),
]
