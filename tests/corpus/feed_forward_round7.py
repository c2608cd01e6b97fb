"""Seventh held-out set, graded before any change to the judges.

Ports for notebook 03 (feed-forward), from projects no earlier set used: ParlAI
(parlai/agents/transformer/modules/ffn.py TransformerFFN), DeepMind Sonnet (sonnet/src/nets/mlp.py MLP), Burn
(Rust, burn-nn transformer/pwff.rs PositionWiseFeedForward), Hugging Face transformers Mixtral
(MixtralBlockSparseTop2MLP), Reformer (ChunkReformerFeedForward) and XLNet (XLNetFeedForward).
"""
from tests.corpus import Port

ASSIGNMENT = "03_feed_forward"

PORTS = [
    Port(
        name="parlai_transformer_ffn",
        style="facebookresearch/ParlAI parlai/agents/transformer/modules/ffn.py, TransformerFFN (lin1, F.relu, "
              "relu_dropout, lin2, xavier_uniform_ weights), lin1/lin2 renamed linear1/linear2",
        cell="FeedForward",
        code=r'''
import torch.nn.functional as F


class FeedForward(nn.Module):
    """Implements the FFN part of the transformer."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.relu_dropout = nn.Dropout(p=dropout)
        self.nonlinear = F.relu
        self.linear1 = nn.Linear(d_model, d_ff)      # lin1
        self.linear2 = nn.Linear(d_ff, d_model)      # lin2
        nn.init.xavier_uniform_(self.linear1.weight)
        nn.init.xavier_uniform_(self.linear2.weight)
        # TODO: initialize biases to 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.nonlinear(self.linear1(x))
        x = self.relu_dropout(x)  # --relu-dropout
        x = self.linear2(x)
        return x
''',
    ),
    Port(
        name="sonnet_mlp",
        style="google-deepmind/sonnet sonnet/src/nets/mlp.py, snt.nets.MLP([d_ff, d_model]) (Linear layers with "
              "bias, relu between them, dropout applied to a layer's output before its activation when training, "
              "activate_final=False); is_training taken from self.training",
        cell="FeedForward",
        code=r'''
class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self._activation = torch.relu
        self._activate_final = False
        self._dropout_rate = dropout
        self.linear1 = nn.Linear(d_model, d_ff)      # linear_0
        self.linear2 = nn.Linear(d_ff, d_model)      # linear_1
        self._layers = [self.linear1, self.linear2]
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        use_dropout = self._dropout_rate not in (None, 0)
        num_layers = len(self._layers)
        for i, layer in enumerate(self._layers):
            x = layer(x)
            if i < (num_layers - 1) or self._activate_final:
                # Only perform dropout if we are activating the output.
                if use_dropout and self.training:
                    x = self.dropout(x)
                x = self._activation(x)
        return x
''',
    ),
    Port(
        name="burn_position_wise_ff",
        style="tracel-ai/burn crates/burn-nn/src/modules/transformer/pwff.rs, PositionWiseFeedForward "
              "(linear_inner, activation = ActivationConfig::Gelu by default, dropout, linear_outer), "
              "linear_inner/linear_outer renamed linear1/linear2",
        cell="FeedForward",
        code=r'''
class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)      # linear_inner
        self.linear2 = nn.Linear(d_ff, d_model)      # linear_outer
        self.dropout = nn.Dropout(dropout)
        self.activation = nn.GELU()                  # #[config(default = "ActivationConfig::Gelu")]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear1(x)
        x = self.activation(x)
        x = self.dropout(x)
        return self.linear2(x)
''',
        breach="Burn's position-wise feed-forward uses GELU by default, not ReLU: every output differs from "
               "linear2(relu(linear1(x))) (the hand-made |x| - 1 network of the check gives other numbers)",
        names=("relu", "gelu", "activation", "nonlinearity"),
    ),
    Port(
        name="mixtral_swiglu_expert",
        style="huggingface/transformers src/transformers/models/mixtral/modeling_mixtral.py, "
              "MixtralBlockSparseTop2MLP, one expert (w1 gate, w3 up, w2 down, all bias=False, "
              "w2(silu(w1(x)) * w3(x))), w1/w2 renamed linear1/linear2",
        cell="FeedForward",
        code=r'''
class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.ffn_dim = d_ff
        self.hidden_dim = d_model
        self.linear1 = nn.Linear(self.hidden_dim, self.ffn_dim, bias=False)   # w1 (gate)
        self.linear2 = nn.Linear(self.ffn_dim, self.hidden_dim, bias=False)   # w2 (down)
        self.w3 = nn.Linear(self.hidden_dim, self.ffn_dim, bias=False)        # up
        self.act_fn = torch.nn.functional.silu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        current_hidden_states = self.act_fn(self.linear1(x)) * self.w3(x)
        current_hidden_states = self.linear2(current_hidden_states)
        return current_hidden_states
''',
        breach="Mixtral's expert is a gated SwiGLU: silu(w1 x) * (w3 x) with a third matrix w3, no biases, and no "
               "dropout at all (the dropout argument is ignored), instead of linear2(dropout(relu(linear1(x)))) "
               "with biased linear layers",
        names=("bias", "gate", "gated", "silu", "swiglu", "relu", "extra", "other parameters", "dropout"),
    ),
    Port(
        name="reformer_chunk_feed_forward",
        style="huggingface/transformers src/transformers/models/reformer/modeling_reformer.py, "
              "ChunkReformerFeedForward.forward_chunk (layer_norm, then ReformerFeedForwardDense: dense, dropout, "
              "act_fn (relu, the config default), then ReformerFeedForwardOutput: dense, dropout); no chunking",
        cell="FeedForward",
        code=r'''
class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, layer_norm_eps: float = 1e-12):
        super().__init__()
        self.layer_norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = dropout                          # config.hidden_dropout_prob
        self.act_fn = torch.relu                        # ACT2FN[config.hidden_act], "relu" by default
        self.linear1 = nn.Linear(d_model, d_ff)         # ReformerFeedForwardDense.dense
        self.linear2 = nn.Linear(d_ff, d_model)         # ReformerFeedForwardOutput.dense

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden_states = self.layer_norm(x)
        # ReformerFeedForwardDense
        hidden_states = self.linear1(hidden_states)
        hidden_states = nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)
        hidden_states = self.act_fn(hidden_states)
        # ReformerFeedForwardOutput
        hidden_states = self.linear2(hidden_states)
        hidden_states = nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)
        return hidden_states
''',
        breach="Reformer's feed-forward block normalizes its input with its own LayerNorm (extra parameters, and "
               "the output is no longer linear2(relu(linear1(x)))), and applies dropout to the output as well as "
               "to the hidden units",
        names=("layernorm", "layer norm", "normaliz", "extra", "other parameters", "dropout"),
    ),
    Port(
        name="xlnet_feed_forward",
        style="huggingface/transformers src/transformers/models/xlnet/modeling_xlnet.py, XLNetFeedForward (layer_1, "
              "activation_function = ACT2FN[ff_activation] with the default 'gelu', dropout, layer_2, dropout, "
              "layer_norm(output + inp)), layer_1/layer_2 renamed linear1/linear2",
        cell="FeedForward",
        code=r'''
class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, layer_norm_eps: float = 1e-12):
        super().__init__()
        self.layer_norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.linear1 = nn.Linear(d_model, d_ff)      # layer_1
        self.linear2 = nn.Linear(d_ff, d_model)      # layer_2
        self.dropout = nn.Dropout(dropout)
        self.activation_function = nn.GELU()         # ACT2FN["gelu"]

    def forward(self, inp: torch.Tensor) -> torch.Tensor:
        output = inp
        output = self.linear1(output)
        output = self.activation_function(output)
        output = self.dropout(output)
        output = self.linear2(output)
        output = self.dropout(output)
        output = self.layer_norm(output + inp)
        return output
''',
        breach="XLNet's feed-forward block contains the residual connection and its LayerNorm, "
               "layer_norm(inp + FFN(inp)), uses GELU (the config default) and drops out its output too: the "
               "block is not the position-wise linear2(dropout(relu(linear1(x))))",
        names=("residual", "layernorm", "layer norm", "normaliz", "gelu", "relu", "other parameters", "dropout"),
    ),
]
