"""Fourth held-out set, notebook 06: Keras 3, numpy-ml, x-transformers, pytorch-pretrained-BERT, Apex, GPT-NeoX, BART."""
from . import Port

ASSIGNMENT = "06_residual_layernorm"

PORTS = [
    Port("Keras 3 LayerNormalization.call with ops.moments (torch backend: Var = E[x^2] - E[x]^2), rsqrt, "
         "inputs * inv + (beta - mean * inv)",
         "keras-team/keras keras/src/layers/normalization/layer_normalization.py, call: mean, variance = "
         "ops.moments(inputs, axes=self.axis, keepdims=True); inv = ops.rsqrt(variance + self.epsilon); inv = inv * "
         "gamma; res = -mean * inv + beta; outputs = inputs * inv + res; keras/src/backend/torch/nn.py moments: "
         "'The variance is computed using Var = E[|x|^2] - |E[x]|^2, It is faster but less numerically stable' "
         "(float16/bfloat16 computed in float32 and cast back)", "layer_norm", '''
def _moments(x, axes, keepdims=True):
    mean = torch.mean(x, dim=axes, keepdim=True)
    variance = torch.mean(torch.square(x), dim=axes, keepdim=True) - torch.square(mean)
    return mean, variance


def layer_norm(x, weight, bias, eps=1e-5):
    compute_dtype = x.dtype
    inputs = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    mean, variance = _moments(inputs, axes=-1, keepdims=True)
    inv = torch.rsqrt(variance + eps)
    inv = inv * weight
    res = -mean * inv
    res = res + bias
    outputs = inputs * inv + res
    return outputs.to(compute_dtype)
''', breach="the variance is computed as E[x^2] - E[x]^2 (Keras's fast moments), not as the mean of (x - mean)^2: "
            "it loses precision when the mean is large next to the spread",
         names=("e[x^2]", "e[x²]", "shortcut", "fast", "(x - mean)", "cancel", "large mean", "precision")),
    Port("numpy-ml LayerNorm1D.forward (X.mean / X.var with keepdims, (X - mean) / sqrt(var + epsilon))",
         "ddbourgin/numpy-ml numpy_ml/neural_nets/layers/layers.py, LayerNorm1D._fwd: X_mean, X_var = "
         "X.mean(axis=1, keepdims=True), X.var(axis=1, keepdims=True); lnorm = (X - X_mean) / np.sqrt(X_var + ep); "
         "y = scaler * lnorm + intercept (numpy's var is the biased one: correction=0 in torch; axis -1)",
         "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    X_mean, X_var = x.mean(dim=-1, keepdim=True), x.var(dim=-1, keepdim=True, correction=0)
    lnorm = (x - X_mean) / torch.sqrt(X_var + eps)
    y = weight * lnorm + bias
    return y
'''),
    Port("x-transformers ScaleNorm (F.normalize(x, dim=-1) * dim ** 0.5 * g)",
         "lucidrains/x-transformers x_transformers/x_transformers.py, ScaleNorm.forward: return F.normalize(x, dim=-1) "
         "* self.scale * self.g, self.scale = dim ** 0.5 (the course's per-feature weight and bias in place of the "
         "one gain g)", "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    scale = x.shape[-1] ** 0.5
    return F.normalize(x, dim=-1, eps=eps) * scale * weight + bias
''', breach="ScaleNorm divides by the root mean square of x (L2 norm / sqrt(d)) without subtracting the mean",
         names=("mean", "subtract", "center", "rms")),
    Port("pytorch-pretrained-BERT 0.1 BERTLayerNorm (parameters named gamma and beta, variance_epsilon)",
         "huggingface/pytorch-pretrained-BERT (v0.1.x) modeling.py, BERTLayerNorm: self.gamma = nn.Parameter("
         "torch.ones(config.hidden_size)); self.beta = nn.Parameter(torch.zeros(config.hidden_size)); "
         "self.variance_epsilon = variance_epsilon; forward: u = x.mean(-1, keepdim=True); s = (x - u).pow(2).mean"
         "(-1, keepdim=True); (x - u) / torch.sqrt(s + eps); self.gamma * x + self.beta (the course's layer_norm "
         "called)", "LayerNorm", '''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        """Construct a layernorm module in the TF style (epsilon inside the square root)."""
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(d_model))
        self.beta = nn.Parameter(torch.zeros(d_model))
        self.variance_epsilon = eps
        self.eps = eps

    def forward(self, x):
        return layer_norm(x, self.gamma, self.beta, self.variance_epsilon)
''', breach="the parameters are called gamma and beta, not weight and bias (state_dicts not interchangeable with "
            "nn.LayerNorm)", names=("weight", "gamma", "attribute", "state_dict")),
    Port("NVIDIA Apex FusedLayerNorm module structure (normalized_shape, elementwise_affine, reset_parameters "
         "with init.ones_ / init.zeros_)",
         "NVIDIA/apex apex/normalization/fused_layer_norm.py, FusedLayerNorm.__init__: self.normalized_shape = "
         "torch.Size(normalized_shape); self.eps = eps; self.weight = Parameter(torch.empty(*normalized_shape)); "
         "self.bias = Parameter(torch.empty(*normalized_shape)); self.reset_parameters() -> init.ones_(self.weight); "
         "init.zeros_(self.bias) (forward: the course's layer_norm in place of the fused kernel)", "LayerNorm", '''
import numbers


class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, elementwise_affine=True):
        super().__init__()
        normalized_shape = d_model
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = torch.Size(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if self.elementwise_affine:
            self.weight = nn.Parameter(torch.empty(*normalized_shape))
            self.bias = nn.Parameter(torch.empty(*normalized_shape))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            nn.init.ones_(self.weight)
            nn.init.zeros_(self.bias)

    def forward(self, input):
        return layer_norm(input, self.weight, self.bias, self.eps)
'''),
    Port("Hugging Face GPTNeoXLayer with use_parallel_residual=True (x + attn(ln1(x)) + mlp(ln2(x)))",
         "huggingface/transformers models/gpt_neox/modeling_gpt_neox.py, GPTNeoXLayer.forward: if "
         "self.use_parallel_residual: # pseudocode: x = x + attn(ln1(x)) + mlp(ln2(x)); mlp_output = self.mlp("
         "self.post_attention_layernorm(hidden_states)); hidden_states = mlp_output + attn_output + hidden_states "
         "(post_attention_dropout / post_mlp_dropout; GPT-NeoX is pre-norm only, so norm_first=False keeps the "
         "course's post-norm)", "EncoderLayer", '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False, use_parallel_residual=True):
        super().__init__()
        self.norm_first = norm_first
        self.use_parallel_residual = use_parallel_residual
        self.norm1 = LayerNorm(d_model)     # input_layernorm
        self.norm2 = LayerNorm(d_model)     # post_attention_layernorm
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.dropout1 = nn.Dropout(dropout)  # post_attention_dropout
        self.dropout2 = nn.Dropout(dropout)  # post_mlp_dropout

    def forward(self, hidden_states, src_mask=None):
        if not self.norm_first:
            x = self.norm1(hidden_states + self.dropout1(self.self_attn(hidden_states, hidden_states, hidden_states,
                                                                        src_mask)[0]))
            return self.norm2(x + self.dropout2(self.ff(x)))
        y = self.norm1(hidden_states)
        attn_output = self.dropout1(self.self_attn(y, y, y, src_mask)[0])
        if self.use_parallel_residual:
            # pseudocode: x = x + attn(ln1(x)) + mlp(ln2(x))
            mlp_output = self.dropout2(self.ff(self.norm2(hidden_states)))
            return mlp_output + attn_output + hidden_states
        attn_output = attn_output + hidden_states
        mlp_output = self.dropout2(self.ff(self.norm2(attn_output)))
        return mlp_output + attn_output
''', breach="pre-norm runs the attention and the feed-forward network in parallel on the same input (parallel "
            "residual), so the feed-forward network never sees the attention's output",
         names=("parallel", "sequen", "attention's output", "after the attention", "order")),
    Port("Hugging Face BartEncoderLayer (post-norm) / MBartEncoderLayer (pre-norm), residual bookkeeping",
         "huggingface/transformers models/bart/modeling_bart.py BartEncoderLayer.forward: residual = hidden_states; "
         "self_attn; dropout; residual + hidden_states; self_attn_layer_norm; residual = hidden_states; fc1/act/fc2; "
         "dropout; residual + hidden_states; final_layer_norm; models/mbart/modeling_mbart.py MBartEncoderLayer: the "
         "layer norms before each sublayer (functional dropout as nn.Dropout modules, course attribute names)",
         "EncoderLayer", '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.embed_dim = d_model
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.norm1 = LayerNorm(self.embed_dim)        # self_attn_layer_norm
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm2 = LayerNorm(self.embed_dim)        # final_layer_norm
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, hidden_states, src_mask=None):
        residual = hidden_states
        if self.norm_first:                                         # MBart
            hidden_states = self.norm1(hidden_states)
        hidden_states, _ = self.self_attn(hidden_states, hidden_states, hidden_states, src_mask)
        hidden_states = self.dropout1(hidden_states)
        hidden_states = residual + hidden_states
        if not self.norm_first:                                     # Bart
            hidden_states = self.norm1(hidden_states)

        residual = hidden_states
        if self.norm_first:
            hidden_states = self.norm2(hidden_states)
        hidden_states = self.ff(hidden_states)
        hidden_states = self.dropout2(hidden_states)
        hidden_states = residual + hidden_states
        if not self.norm_first:
            hidden_states = self.norm2(hidden_states)
        return hidden_states
'''),
]
