"""Ported code of notebook 06 (LayerNorm, the encoder layer) in the styles of public projects."""
from . import Port

ASSIGNMENT = "06_residual_layernorm"

PRE_POST = ("post-norm", "pre-norm", "norm_first", "after the addition", "before the sublayer")

PORTS = [
    # --- layer_norm -----------------------------------------------------------------------------------
    Port("nn.LayerNorm documentation formula (var_mean, biased estimator)",
         "PyTorch docs, torch.nn.LayerNorm: y = (x - E[x]) / sqrt(Var[x] + eps) * gamma + beta, "
         "Var by the biased estimator (torch.var(input, unbiased=False))", "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
'''),
    Port("GPT-2 TF norm() with rsqrt",
         "openai/gpt-2 src/model.py, norm(): u = mean, s = mean(square(x - u)), (x - u) * rsqrt(s + eps) * g + b",
         "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    u = x.mean(dim=-1, keepdim=True)
    s = torch.square(x - u).mean(dim=-1, keepdim=True)
    x = (x - u) * torch.rsqrt(s + eps)
    return x * weight + bias
'''),
    Port("BertLayerNorm (TF style, epsilon inside the square root)",
         "huggingface pytorch-pretrained-BERT modeling.py, BertLayerNorm.forward: u, s = mean((x - u)^2), "
         "(x - u) / sqrt(s + variance_epsilon), weight * x + bias", "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    u = x.mean(-1, keepdim=True)
    s = (x - u).pow(2).mean(-1, keepdim=True)
    x = (x - u) / torch.sqrt(s + eps)
    return weight * x + bias
'''),
    Port("Annotated Transformer LayerNorm (x.std, eps added to the std)",
         "harvardnlp/annotated-transformer, class LayerNorm.forward: a_2 * (x - mean) / (std + eps) + b_2 with "
         "std = x.std(-1) (unbiased)", "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    std = x.std(-1, keepdim=True)
    return weight * (x - mean) / (std + eps) + bias
''', breach="unbiased standard deviation (divides by d - 1) and eps added to the std outside the square root",
         names=("unbiased", "n - 1", "d - 1", "outside the square root", "std + eps")),
    Port("T5LayerNorm (RMS norm: no mean subtraction, no bias)",
         "huggingface/transformers models/t5/modeling_t5.py, T5LayerNorm.forward: variance = x.pow(2).mean(-1), "
         "x * rsqrt(variance + eps), weight * x", "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    variance = x.pow(2).mean(-1, keepdim=True)
    x = x * torch.rsqrt(variance + eps)
    return weight * x
''', breach="RMS norm: the mean is not subtracted (and the bias is dropped), so the output is not centred",
         names=("rms", "subtract the mean", "mean is not subtracted", "not centred", "not centered")),
    Port("ConvNeXt LayerNorm, channels_first branch (statistics over dim 1)",
         "facebookresearch/ConvNeXt models/convnext.py, LayerNorm.forward with data_format='channels_first': "
         "u = x.mean(1), s = (x - u).pow(2).mean(1), (x - u) / sqrt(s + eps)", "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    u = x.mean(1, keepdim=True)
    s = (x - u).pow(2).mean(1, keepdim=True)
    x = (x - u) / torch.sqrt(s + eps)
    return weight * x + bias
''', breach="mean and variance taken over dimension 1 (channels first), not over the last dimension",
         names=("last dim", "dimension 1", "dim=1", "wrong dimension", "over the last")),

    # --- LayerNorm ------------------------------------------------------------------------------------
    Port("nanoGPT LayerNorm with optional bias, on the course's layer_norm",
         "karpathy/nanoGPT model.py, class LayerNorm(ndim, bias): weight = ones, bias = zeros if bias else None",
         "LayerNorm", '''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, bias=True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model)) if bias else None

    def forward(self, input):
        bias = self.bias if self.bias is not None else torch.zeros_like(self.weight)
        return layer_norm(input, self.weight, bias, self.eps)
'''),
    Port("nn.LayerNorm structure (normalized_shape, reset_parameters)",
         "pytorch torch/nn/modules/normalization.py, LayerNorm: normalized_shape tuple, elementwise_affine, "
         "reset_parameters() with init.ones_ / init.zeros_", "LayerNorm", '''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, elementwise_affine=True):
        super().__init__()
        self.normalized_shape = (d_model,)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.weight = nn.Parameter(torch.empty(self.normalized_shape))
        self.bias = nn.Parameter(torch.empty(self.normalized_shape))
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.ones_(self.weight)
        nn.init.zeros_(self.bias)

    def forward(self, input):
        return layer_norm(input, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
'''),
    Port("nanoGPT LayerNorm calling F.layer_norm",
         "karpathy/nanoGPT model.py, LayerNorm.forward: F.layer_norm(input, self.weight.shape, self.weight, "
         "self.bias, 1e-5)", "LayerNorm", '''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, input):
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, self.eps)
''', breach="calls PyTorch's built-in F.layer_norm, the function the exercise is about",
         names=("built-in", "f.layer_norm", "not allowed", "banned", "forbidden")),
    Port("Annotated Transformer LayerNorm parameters a_2 and b_2",
         "harvardnlp/annotated-transformer, class LayerNorm.__init__: self.a_2 = ones(features), "
         "self.b_2 = zeros(features)", "LayerNorm", '''
class LayerNorm(nn.Module):
    "Construct a layernorm module (parameters a_2 and b_2)."

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.a_2 = nn.Parameter(torch.ones(d_model))
        self.b_2 = nn.Parameter(torch.zeros(d_model))
        self.eps = eps

    def forward(self, x):
        return layer_norm(x, self.a_2, self.b_2, self.eps)
''', breach="the scale and shift are registered as a_2 and b_2, not as weight and bias",
         names=("a_2", "named weight", "weight and bias", "parameter names")),
    Port("LayerNorm without bias (nanoGPT bias=False)",
         "karpathy/nanoGPT model.py, LayerNorm(ndim, bias=False) as used with GPTConfig(bias=False): "
         "self.bias = None", "LayerNorm", '''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, bias=False):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model)) if bias else None

    def forward(self, input):
        shift = self.bias if self.bias is not None else 0.0
        return layer_norm(input, self.weight, shift, self.eps)
''', breach="no bias parameter (bias=False by default), only weight",
         names=("bias",)),

    # --- EncoderLayer ---------------------------------------------------------------------------------
    Port("nn.TransformerEncoderLayer (_sa_block / _ff_block, norm_first)",
         "pytorch torch/nn/modules/transformer.py, TransformerEncoderLayer.forward with _sa_block and _ff_block",
         "EncoderLayer", '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, x, src_mask=None):
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask):
        x = self.self_attn(x, x, x, attn_mask)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.ff(x))
'''),
    Port("fairseq TransformerEncoderLayer (normalize_before, residual bookkeeping)",
         "facebookresearch/fairseq fairseq/modules/transformer_layer.py, TransformerEncoderLayerBase.forward: "
         "residual = x; if normalize_before: x = ln(x); ...; x = residual + x; if not normalize_before: x = ln(x)",
         "EncoderLayer", '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.normalize_before = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.norm1 = LayerNorm(d_model)          # self_attn_layer_norm
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm2 = LayerNorm(d_model)          # final_layer_norm
        self.dropout_module = nn.Dropout(dropout)

    def forward(self, x, src_mask=None):
        residual = x
        if self.normalize_before:
            x = self.norm1(x)
        x, _ = self.self_attn(query=x, key=x, value=x, mask=src_mask)
        x = self.dropout_module(x)
        x = residual + x
        if not self.normalize_before:
            x = self.norm1(x)

        residual = x
        if self.normalize_before:
            x = self.norm2(x)
        x = self.ff(x)
        x = self.dropout_module(x)
        x = residual + x
        if not self.normalize_before:
            x = self.norm2(x)
        return x
'''),
    Port("tensor2tensor layer_preprocess / layer_postprocess sequences",
         "tensorflow/tensor2tensor layers/common_layers.py, layer_prepostprocess with sequences 'n' / 'da' "
         "(pre-norm) or 'none' / 'dan' (post-norm)", "EncoderLayer", '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.preprocess_sequence = "n" if norm_first else ""
        self.postprocess_sequence = "da" if norm_first else "dan"
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def _prepostprocess(self, previous_value, x, sequence, norm):
        for c in sequence:
            if c == "a":
                x = x + previous_value
            elif c == "n":
                x = norm(x)
            elif c == "d":
                x = self.dropout(x)
        return x

    def forward(self, x, src_mask=None):
        y = self._prepostprocess(None, x, self.preprocess_sequence, self.norm1)
        y = self.self_attn(y, y, y, src_mask)[0]
        x = self._prepostprocess(x, y, self.postprocess_sequence, self.norm1)
        y = self._prepostprocess(None, x, self.preprocess_sequence, self.norm2)
        y = self.ff(y)
        return self._prepostprocess(x, y, self.postprocess_sequence, self.norm2)
'''),
    Port("Annotated Transformer EncoderLayer with SublayerConnection",
         "harvardnlp/annotated-transformer, SublayerConnection.forward: x + dropout(sublayer(norm(x))); "
         "EncoderLayer uses two of them", "EncoderLayer", '''
class SublayerConnection(nn.Module):
    "A residual connection followed by a layer norm (the norm first, for code simplicity)."

    def __init__(self, norm, dropout):
        super().__init__()
        self.norm = norm
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, sublayer):
        return x + self.dropout(sublayer(self.norm(x)))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.sublayer = nn.ModuleList([SublayerConnection(self.norm1, dropout),
                                       SublayerConnection(self.norm2, dropout)])

    def forward(self, x, src_mask=None):
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, src_mask)[0])
        return self.sublayer[1](x, self.ff)
''', breach="always pre-norm (the norm before each sublayer), also when norm_first=False asks for post-norm",
         names=PRE_POST),
    Port("d2l TransformerEncoderBlock with AddNorm",
         "d2l-ai/d2l-en chapter_attention-mechanisms-and-transformers/transformer.md, AddNorm: "
         "ln(dropout(Y) + X); TransformerEncoderBlock: Y = addnorm1(X, attention(X, X, X)), addnorm2(Y, ffn(Y))",
         "EncoderLayer", '''
class AddNorm(nn.Module):
    "The residual connection followed by layer normalization."

    def __init__(self, ln, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.ln = ln

    def forward(self, X, Y):
        return self.ln(self.dropout(Y) + X)


class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.addnorm1 = AddNorm(self.norm1, dropout)
        self.addnorm2 = AddNorm(self.norm2, dropout)

    def forward(self, X, src_mask=None):
        Y = self.addnorm1(X, self.self_attn(X, X, X, src_mask)[0])
        return self.addnorm2(Y, self.ff(Y))
''', breach="always post-norm (LN after the addition), also when norm_first=True asks for pre-norm",
         names=PRE_POST),
    Port("Megatron apply_residual_connection_post_layernorm",
         "NVIDIA/Megatron-LM megatron/model/transformer.py, ParallelTransformerLayer.forward with "
         "apply_residual_connection_post_layernorm=True: residual = layernorm_output", "EncoderLayer", '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False,
                 apply_residual_connection_post_layernorm=True):
        super().__init__()
        self.norm_first = norm_first
        self.apply_residual_connection_post_layernorm = apply_residual_connection_post_layernorm
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)   # input_layernorm
        self.norm2 = LayerNorm(d_model)   # post_attention_layernorm
        self.dropout = nn.Dropout(dropout)

    def forward(self, hidden_states, src_mask=None):
        if not self.norm_first:
            x = self.norm1(hidden_states + self.dropout(self.self_attn(hidden_states, hidden_states,
                                                                       hidden_states, src_mask)[0]))
            return self.norm2(x + self.dropout(self.ff(x)))
        layernorm_output = self.norm1(hidden_states)
        attention_output = self.self_attn(layernorm_output, layernorm_output, layernorm_output, src_mask)[0]
        residual = layernorm_output if self.apply_residual_connection_post_layernorm else hidden_states
        layernorm_input = residual + self.dropout(attention_output)
        layernorm_output = self.norm2(layernorm_input)
        residual = layernorm_output if self.apply_residual_connection_post_layernorm else layernorm_input
        return residual + self.dropout(self.ff(layernorm_output))
''', breach="pre-norm residual adds the normalized LN(x) instead of the un-normalized x",
         names=("residual", "ln(x) +", "normalized input", "un-normalized", "skip connection")),
]
