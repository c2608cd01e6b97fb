"""Tenth held-out set, notebook 03: ports of hyunwoongko/transformer's PositionwiseFeedForward, the TensorFlow
Model Garden's legacy FeedForwardNetwork, NeMo's PositionWiseFF, xformers' MLP and jsbaan/transformer-from-scratch's
encoder feed-forward, each read at its source."""
from tests.corpus import Port

ASSIGNMENT = "03_feed_forward"

PORTS = [
    Port("hyunwoongko_ffn", "hyunwoongko/transformer models/layers/position_wise_feed_forward.py "
         "PositionwiseFeedForward(d_model, hidden, drop_prob) (linear1, nn.ReLU, nn.Dropout, linear2, in that order)",
         "FeedForward", r'''
class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        hidden, drop_prob = d_ff, dropout
        self.linear1 = nn.Linear(d_model, hidden)
        self.linear2 = nn.Linear(hidden, d_model)
        self.relu = nn.ReLU()
        self.dropout = nn.Dropout(p=drop_prob)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear1(x)
        x = self.relu(x)
        x = self.dropout(x)
        x = self.linear2(x)
        return x
'''),
    Port("tfmodels_ffn", "tensorflow/models official/legacy/transformer/ffn_layer.py FeedForwardNetwork(hidden_size, "
         "filter_size, relu_dropout) (filter_dense_layer = Dense(filter_size, use_bias=True, activation=relu), "
         "if training: tf.nn.dropout(output, rate=relu_dropout), output_dense_layer = Dense(hidden_size, "
         "use_bias=True); the Dense layers renamed linear1 and linear2, training is self.training)", "FeedForward", r'''
class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.hidden_size = d_model
        self.filter_size = d_ff
        self.relu_dropout = dropout
        self.linear1 = nn.Linear(d_model, d_ff, bias=True)     # filter_dense_layer (activation=tf.nn.relu)
        self.linear2 = nn.Linear(d_ff, d_model, bias=True)     # output_dense_layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        output = torch.relu(self.linear1(x))
        if self.training:
            output = nn.functional.dropout(output, p=self.relu_dropout, training=True)
        output = self.linear2(output)
        return output
'''),
    Port("nemo_ffn", "NVIDIA/NeMo nemo/collections/nlp/modules/common/transformer/transformer_modules.py "
         "PositionWiseFF(hidden_size, inner_size, ffn_dropout, hidden_act='relu') (dense_in, act_fn, dense_out, "
         "layer_dropout, then layer_norm(hidden_states + output_states) with nn.LayerNorm(hidden_size, eps=1e-5); "
         "dense_in/dense_out renamed linear1/linear2)", "FeedForward", r'''
class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, hidden_act: str = "relu"):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)          # dense_in
        self.linear2 = nn.Linear(d_ff, d_model)          # dense_out
        self.layer_dropout = nn.Dropout(dropout)
        self.layer_norm = nn.LayerNorm(d_model, eps=1e-5)
        ACT2FN = {"gelu": nn.functional.gelu, "relu": torch.relu}
        self.act_fn = ACT2FN[hidden_act]

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        output_states = self.linear1(hidden_states)
        output_states = self.act_fn(output_states)
        output_states = self.linear2(output_states)
        output_states = self.layer_dropout(output_states)
        output_states = self.layer_norm(hidden_states + output_states)
        return output_states
''', breach="the block includes the residual connection and a LayerNorm: it returns LayerNorm(x + FFN(x)) (with an "
            "extra LayerNorm's parameters), and its dropout acts on the output of linear2, not on the hidden units",
         names=("residual", "layernorm", "layer norm", "x +", "normali")),
    Port("xformers_mlp", "facebookresearch/xformers xformers/components/feedforward/mlp.py (before the components "
         "were deleted) MLP(dim_model, dropout, activation, hidden_layer_multiplier, bias=True) (nn.Sequential("
         "Linear(dim_model, dim_mlp), activation, Dropout(dropout), Linear(dim_mlp, dim_model), Dropout(dropout)); "
         "the Sequential unrolled into linear1/linear2 for the course's names, activation relu, dim_mlp = d_ff)",
         "FeedForward", r'''
class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        dim_mlp = d_ff                                   # hidden_layer_multiplier * dim_model
        self.linear1 = nn.Linear(in_features=d_model, out_features=dim_mlp, bias=bias)
        self.activation = nn.ReLU()                      # build_activation(activation)
        self.dropout1 = nn.Dropout(dropout)
        self.linear2 = nn.Linear(in_features=dim_mlp, out_features=d_model, bias=bias)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.dropout2(self.linear2(self.dropout1(self.activation(self.linear1(inputs)))))
''', breach="applies dropout twice: on the hidden units and again on the output of linear2, so in training mode "
            "whole output features are zeroed and the rest rescaled",
         names=("dropout", "output", "twice", "after linear2", "second")),
    Port("jsbaan_ffn", "jsbaan/transformer-from-scratch encoder.py EncoderBlock.feed_forward (nn.Sequential("
         "nn.Linear(hidden_dim, ff_dim), nn.ReLU(), nn.Linear(ff_dim, hidden_dim)); the block's dropout1/dropout2 "
         "act on the sub-layer outputs, outside the feed-forward; unrolled into linear1/linear2, the dropout argument "
         "accepted and not used)", "FeedForward", r'''
class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        hidden_dim, ff_dim = d_model, d_ff
        self.linear1 = nn.Linear(hidden_dim, ff_dim)
        self.relu = nn.ReLU()
        self.linear2 = nn.Linear(ff_dim, hidden_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear2(self.relu(self.linear1(x)))
''', breach="no dropout inside the feed-forward network: the dropout probability is ignored, so training mode gives "
            "the same deterministic output as eval mode",
         names=("dropout", "missing", "no dropout", "ignored", "training mode")),
]
