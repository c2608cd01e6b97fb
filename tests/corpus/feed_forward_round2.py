"""Held-out ports of notebook 03 (stacked attention, the position-wise feed-forward network) in the styles of
public projects the course's own corpus does not use (Transformer-MM-Explainability, ESPnet, fairseq2,
KerasNLP)."""
from . import Port

ASSIGNMENT = "03_feed_forward"

PORTS = [
    # --- stack_attention ------------------------------------------------------------------------------
    Port("Chefer et al. compute_rollout_attention (identity added, rows renormalised, matmul chain)",
         "hila-chefer/Transformer-MM-Explainability, compute_rollout_attention(all_layer_matrices, start_layer=0): "
         "eye = torch.eye(num_tokens); all_layer_matrices = [m + eye ...]; [m / m.sum(dim=-1, keepdim=True) ...]; "
         "joint_attention = matrices_aug[i].matmul(joint_attention) for the later layers",
         "stack_attention", '''
def compute_rollout_attention(all_layer_matrices, start_layer=0):
    num_tokens = all_layer_matrices[0].shape[-1]
    eye = torch.eye(num_tokens).to(all_layer_matrices[0].device)
    all_layer_matrices = [all_layer_matrices[i] + eye for i in range(len(all_layer_matrices))]
    all_layer_matrices = [all_layer_matrices[i] / all_layer_matrices[i].sum(dim=-1, keepdim=True)
                          for i in range(len(all_layer_matrices))]
    matrices_aug = all_layer_matrices
    joint_attention = matrices_aug[start_layer]
    for i in range(start_layer + 1, len(matrices_aug)):
        joint_attention = matrices_aug[i].matmul(joint_attention)
    return joint_attention


def stack_attention(x, n_layers):
    T = x.shape[-2]
    h = x
    all_layer_matrices = []
    for _ in range(n_layers):
        h, weights = scaled_dot_product_attention(h, h, h)
        all_layer_matrices.append(weights)
    if not all_layer_matrices:
        return h, torch.eye(T, dtype=x.dtype, device=x.device).expand(*x.shape[:-2], T, T)
    return h, compute_rollout_attention(all_layer_matrices)
''', breach="attention rollout: each layer's weights get the identity added (the residual) and are renormalised "
            "before the product, so combined is not A_L ... A_1 and out != combined @ x",
         names=("identity", "residual", "rollout", "renormalis", "renormaliz", "eye", "out == combined")),

    # --- FeedForward ----------------------------------------------------------------------------------
    Port("ESPnet PositionwiseFeedForward (w_2(dropout(relu(w_1(x)))))",
         "espnet/espnet espnet/nets/pytorch_backend/transformer/positionwise_feed_forward.py, "
         "PositionwiseFeedForward: w_1 = Linear(d_model, d_ff), w_2 = Linear(d_ff, d_model), dropout; forward: "
         "self.w_2(self.dropout(torch.relu(self.w_1(x)))) (w_1, w_2 renamed linear1, linear2)", "FeedForward", '''
class FeedForward(torch.nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super(FeedForward, self).__init__()
        self.linear1 = torch.nn.Linear(d_model, d_ff)
        self.linear2 = torch.nn.Linear(d_ff, d_model)
        self.dropout = torch.nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.dropout(torch.relu(self.linear1(x))))
'''),
    Port("fairseq2 StandardFeedForwardNetwork (inner_proj, inner_activation, optional inner_dropout, output_proj)",
         "facebookresearch/fairseq2 src/fairseq2/nn/transformer/ffn.py, StandardFeedForwardNetwork: inner_proj; "
         "inner_activation = ReLU() when None; inner_dropout = Dropout(p) if p > 0.0 else "
         "register_module('inner_dropout', None); forward: inner_proj, inner_activation, inner_layer_norm (None "
         "unless NormFormer), inner_dropout, output_proj (inner_proj / output_proj renamed linear1 / linear2)",
         "FeedForward", '''
class FeedForward(nn.Module):
    """Represents a Transformer feed-forward network as described in Vaswani et al. (2017)."""

    def __init__(self, d_model, d_ff, dropout=0.0, inner_activation=None, bias=True):
        super().__init__()
        self.model_dim = d_model
        self.linear1 = nn.Linear(d_model, d_ff, bias)
        if inner_activation is None:
            self.inner_activation = nn.ReLU()
        else:
            self.inner_activation = inner_activation
        if dropout > 0.0:
            self.inner_dropout = nn.Dropout(dropout)
        else:
            self.register_module("inner_dropout", None)
        self.register_module("inner_layer_norm", None)
        self.linear2 = nn.Linear(d_ff, d_model, bias)

    def forward(self, seqs):
        seqs = self.linear1(seqs)
        seqs = self.inner_activation(seqs)
        if self.inner_layer_norm is not None:
            seqs = self.inner_layer_norm(seqs)
        if self.inner_dropout is not None:
            seqs = self.inner_dropout(seqs)
        seqs = self.linear2(seqs)
        return seqs
'''),
    Port("KerasNLP TransformerEncoder feed-forward block (dropout after the output dense)",
         "keras-team/keras-nlp keras_nlp/layers/modeling/transformer_encoder.py, TransformerEncoder.call: "
         "x = self._feedforward_intermediate_dense(x) (Dense(intermediate_dim, activation='relu')); "
         "x = self._feedforward_output_dense(x); x = self._feedforward_dropout(x)", "FeedForward", '''
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation=torch.relu):
        super().__init__()
        self.activation = activation
        self.linear1 = nn.Linear(d_model, d_ff)          # _feedforward_intermediate_dense
        self.linear2 = nn.Linear(d_ff, d_model)          # _feedforward_output_dense
        self.dropout = nn.Dropout(dropout)               # _feedforward_dropout

    def forward(self, x):
        x = self.activation(self.linear1(x))
        x = self.linear2(x)
        x = self.dropout(x)
        return x
''', breach="dropout acts on the FFN's output (after linear2, KerasNLP's feedforward_dropout) instead of on the "
            "hidden units after the ReLU",
         names=("hidden", "after the relu", "after linear2", "on the output", "output of linear2", "before linear2")),
]
