"""Held-out set 3 (round 3), notebook 03: FeedForward."""
from . import Port

ASSIGNMENT = "03_feed_forward"

PORTS = [
    Port("Sockeye TransformerFeedForward (ff1, act, drop, ff2)",
         "awslabs/sockeye sockeye/transformer.py, TransformerFeedForward: self.ff1 = pt.nn.Linear(num_model, "
         "num_hidden); self.act = layers.get_activation(act_type) (pt.nn.ReLU() for 'relu'); self.drop = "
         "pt.nn.Dropout(p=dropout); self.ff2 = pt.nn.Linear(num_hidden, num_model); forward: h = act(ff1(x)); "
         "h = drop(h); y = ff2(h) (ff1/ff2 named linear1/linear2 as the course asks; use_glu left out)",
         "FeedForward", '''
import torch
from torch import nn


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(in_features=d_model, out_features=d_ff)
        self.act = nn.ReLU()
        self.drop = nn.Dropout(p=dropout)
        self.linear2 = nn.Linear(in_features=d_ff, out_features=d_model)

    def forward(self, x):
        h = self.linear1(x)
        h = self.act(h)
        h = self.drop(h)
        y = self.linear2(h)
        return y
'''),

    Port("MLX nn.TransformerEncoderLayer feed-forward (linear1, activation=relu, dropout2, linear2)",
         "ml-explore/mlx python/mlx/nn/layers/transformer.py, TransformerEncoderLayer: self.linear1 = "
         "Linear(dims, mlp_dims); self.linear2 = Linear(mlp_dims, dims); self.activation = relu; self.dropout2 = "
         "Dropout(dropout); __call__: y = self.linear1(y); y = self.activation(y); y = self.dropout2(y); y = "
         "self.linear2(y)",
         "FeedForward", '''
import torch
from torch import nn


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation=torch.relu):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout2 = nn.Dropout(dropout)
        self.activation = activation

    def forward(self, y):
        y = self.linear1(y)
        y = self.activation(y)
        y = self.dropout2(y)
        y = self.linear2(y)
        return y
'''),

    Port("x-transformers FeedForward (default activation nn.GELU)",
         "lucidrains/x-transformers x_transformers/x_transformers.py, FeedForward.__init__: activation = "
         "nn.GELU() unless relu_squared / solu / swish / custom_activation; proj_in = Sequential(nn.Linear(dim, "
         "inner_dim, bias=not no_bias), activation); self.ff = Sequential(proj_in, nn.Dropout(dropout), "
         "nn.Linear(inner_dim, dim_out, bias=not no_bias)) (inner_dim = d_ff; the linears named as the course asks)",
         "FeedForward", '''
import torch
from torch import nn


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, no_bias=False):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff, bias=not no_bias)
        self.activation = nn.GELU()
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(d_ff, d_model, bias=not no_bias)

    def forward(self, x):
        return self.linear2(self.dropout(self.activation(self.linear1(x))))
''', breach="GELU (x-transformers' default activation) instead of ReLU between the two linear layers",
         names=("gelu", "relu", "activation")),

    Port("Flax WMT example MlpBlock (dropout on the hidden units and again on the output)",
         "google/flax examples/wmt/models.py, MlpBlock.__call__: x = nn.Dense(mlp_dim)(inputs); x = nn.relu(x); "
         "x = nn.Dropout(rate=dropout_rate)(x); output = nn.Dense(actual_out_dim)(x); output = "
         "nn.Dropout(rate=dropout_rate)(output); return output",
         "FeedForward", '''
import torch
from torch import nn


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, inputs):
        x = self.linear1(inputs)
        x = torch.relu(x)
        x = self.dropout(x)
        output = self.linear2(x)
        output = self.dropout(output)
        return output
''', breach="applies dropout a second time, to the output of linear2 (Flax's MlpBlock), besides the hidden units",
         names=("dropout", "output", "linear2", "twice", "second")),
]
