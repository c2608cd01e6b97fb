"""Fourth held-out set, notebook 03: DistilBERT, Qwen2, tensor2tensor, BART."""
from . import Port

ASSIGNMENT = "03_feed_forward"

PORTS = [
    Port("Hugging Face DistilBERT FFN.ff_chunk (lin1, GELU, lin2, dropout on the output)",
         "huggingface/transformers models/distilbert/modeling_distilbert.py, FFN: self.lin1, self.lin2, "
         "self.activation = get_activation(config.activation) ('gelu'), ff_chunk: x = self.lin1(input); x = "
         "self.activation(x); x = self.lin2(x); x = self.dropout(x) (lin1/lin2 renamed linear1/linear2)",
         "FeedForward", '''
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        self.linear1 = nn.Linear(in_features=d_model, out_features=d_ff)
        self.linear2 = nn.Linear(in_features=d_ff, out_features=d_model)
        self.activation = nn.GELU()

    def forward(self, input):
        x = self.linear1(input)
        x = self.activation(x)
        x = self.linear2(x)
        x = self.dropout(x)
        return x
''', breach="GELU instead of ReLU, and the dropout acts on the output of linear2 instead of the hidden units",
         names=("gelu", "relu", "hidden")),
    Port("Hugging Face Qwen2MLP (gate_proj, up_proj, down_proj, bias=False, SiLU gate)",
         "huggingface/transformers models/qwen2/modeling_qwen2.py, Qwen2MLP: gate_proj / up_proj = "
         "nn.Linear(hidden_size, intermediate_size, bias=False), down_proj = nn.Linear(intermediate_size, "
         "hidden_size, bias=False), act_fn = ACT2FN['silu']; forward: down_proj(act_fn(gate_proj(x)) * up_proj(x)) "
         "(gate_proj / down_proj renamed linear1 / linear2; the dropout argument kept but Qwen2 has none)",
         "FeedForward", '''
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.hidden_size = d_model
        self.intermediate_size = d_ff
        self.linear1 = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)   # gate_proj
        self.up_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
        self.linear2 = nn.Linear(self.intermediate_size, self.hidden_size, bias=False)   # down_proj
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.linear2(self.act_fn(self.linear1(x)) * self.up_proj(x))
''', breach="a gated SiLU unit (SwiGLU) with a third projection, bias-free linears and no dropout, instead of "
            "linear2(dropout(relu(linear1(x)))) with biases",
         names=("gate", "silu", "relu", "bias", "glu")),
    Port("tensor2tensor common_layers.dense_relu_dense (dense + relu, dropout on the hidden units, dense)",
         "tensorflow/tensor2tensor tensor2tensor/layers/common_layers.py, dense_relu_dense(inputs, filter_size, "
         "output_size, dropout): h = dense(inputs, filter_size, use_bias=True, activation=tf.nn.relu, name='conv1'); "
         "if dropout != 0.0: h = dropout_with_broadcast_dims(h, 1.0 - dropout); o = dense(h, output_size, "
         "use_bias=True, name='conv2')", "FeedForward", '''
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff, bias=True)   # conv1
        self.linear2 = nn.Linear(d_ff, d_model, bias=True)   # conv2
        self.dropout = nn.Dropout(dropout)

    def forward(self, inputs):
        h = torch.relu(self.linear1(inputs))
        if self.dropout.p != 0.0:
            h = self.dropout(h)
        o = self.linear2(h)
        return o
'''),
    Port("Hugging Face BART encoder-layer feed-forward (fc1, activation_fn, functional activation_dropout, fc2)",
         "huggingface/transformers models/bart/modeling_bart.py, BartEncoderLayer.forward: hidden_states = "
         "self.activation_fn(self.fc1(hidden_states)); hidden_states = nn.functional.dropout(hidden_states, "
         "p=self.activation_dropout, training=self.training); hidden_states = self.fc2(hidden_states) "
         "(activation_function='relu', as in fairseq's transformer; fc1 / fc2 renamed linear1 / linear2)",
         "FeedForward", '''
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.activation_fn = nn.functional.relu
        self.activation_dropout = dropout
        self.linear1 = nn.Linear(d_model, d_ff)   # fc1
        self.linear2 = nn.Linear(d_ff, d_model)   # fc2

    def forward(self, hidden_states):
        hidden_states = self.activation_fn(self.linear1(hidden_states))
        hidden_states = nn.functional.dropout(hidden_states, p=self.activation_dropout, training=self.training)
        hidden_states = self.linear2(hidden_states)
        return hidden_states
'''),
]
