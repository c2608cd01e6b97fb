"""Ninth held-out set, notebook 03: ports of the feed-forward blocks of DETR, a PyTorch translator, XLM and
latent-diffusion, each read at its source."""
from tests.corpus import Port

ASSIGNMENT = "03_feed_forward"

PORTS = [
    Port("detr_ffn", "facebookresearch/detr models/transformer.py TransformerEncoderLayer, its feed-forward part "
         "(self.linear1 = nn.Linear(d_model, dim_feedforward), self.dropout, self.linear2, activation = "
         "_get_activation_fn('relu') = F.relu; linear2(dropout(activation(linear1(src)))))", "FeedForward", r'''
import torch.nn.functional as F


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        # Implementation of Feedforward model
        self.linear1 = nn.Linear(d_model, d_ff)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.activation = F.relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear2(self.dropout(self.activation(self.linear1(x))))
'''),
    Port("devjwsong_ffn", "devjwsong/transformer-translator-pytorch src/layers.py FeedFowardLayer (linear_1, nn.ReLU, "
         "dropout, linear_2, renamed linear1 and linear2; d_model, d_ff and drop_out_rate are globals of its "
         "constants.py, constructor arguments here)", "FeedForward", r'''
class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff, bias=True)
        self.relu = nn.ReLU()
        self.linear2 = nn.Linear(d_ff, d_model, bias=True)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.linear1(x))  # (B, L, d_ff)
        x = self.dropout(x)
        x = self.linear2(x)  # (B, L, d_model)
        return x
'''),
    Port("xlm_ffn", "facebookresearch/XLM xlm/model/transformer.py TransformerFFN(in_dim, dim_hidden, out_dim, dropout, "
         "gelu_activation=False) (lin1, F.relu, lin2, then F.dropout(x, p=self.dropout, training=self.training) on the "
         "output; lin1 and lin2 renamed linear1 and linear2)", "FeedForward", r'''
import torch.nn.functional as F


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.dropout = dropout
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.act = F.relu

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        x = self.linear1(input)
        x = self.act(x)
        x = self.linear2(x)
        x = F.dropout(x, p=self.dropout, training=self.training)
        return x
''', breach="dropout on the output of linear2 instead of on the hidden units after the ReLU: in train mode whole "
            "output features are zeroed and rescaled, the hidden layer is never dropped",
         names=("hidden", "dropout", "after the relu", "output of linear2", "linear2")),
    Port("ldm_ffn", "CompVis/latent-diffusion ldm/modules/attention.py FeedForward(dim, dim_out=None, mult, glu=False, "
         "dropout) (net = Sequential(Sequential(Linear(dim, inner_dim), nn.GELU()), Dropout, Linear(inner_dim, "
         "dim_out)); inner_dim = d_ff instead of int(dim * mult))", "FeedForward", r'''
class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        inner_dim = d_ff
        dim_out = d_model
        project_in = nn.Sequential(
            nn.Linear(d_model, inner_dim),
            nn.GELU()
        )
        self.net = nn.Sequential(
            project_in,
            nn.Dropout(dropout),
            nn.Linear(inner_dim, dim_out)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)
''', breach="GELU instead of ReLU between the two layers (and the layers live in an nn.Sequential `net`, with no "
            "linear1 / linear2 attributes)",
         names=("gelu", "relu", "activation", "linear1")),
]
