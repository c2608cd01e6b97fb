"""Eighth held-out set, graded before any change to the judges.

Held-out set 8, notebook 06: ports of ggml (ggml-org/ggml, src/ggml-cpu), kveps/motion_prediction, Hugging
Face Cohere and Nemotron, ESM (facebookresearch/esm), the TensorFlow Model Garden (tensorflow/models,
official/nlp/modeling/layers) and tunz/transformer-pytorch, each read at its source.
"""
from tests.corpus import Port

ASSIGNMENT = "06_residual_layernorm"

PORTS = [
    Port(
        "ggml_norm_rows",
        "ggml-org/ggml src/ggml-cpu/ops.cpp ggml_compute_forward_norm_f32 (mean, ggml_vec_cvar_f32, "
        "scale = 1/sqrtf(variance + eps)); weight and bias applied afterwards as llama.cpp does "
        "(ggml_mul, ggml_add)",
        "layer_norm",
        r'''
def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    ne00 = x.shape[-1]
    sum = x.sum(dim=-1, keepdim=True)
    mean = sum / ne00
    # ggml_vec_cvar_f32: y = x - mean, returns sum((x - mean)^2) / n
    yf = x - mean
    variance = (yf * yf).sum(dim=-1, keepdim=True) / ne00
    scale = 1.0 / torch.sqrt(variance + eps)
    yf = yf * scale                   # ggml_vec_scale_f32(ne00, yf, scale)
    return yf * weight + bias         # ggml_mul(cur, w), ggml_add(cur, b)
''',
    ),
    Port(
        "kveps_unbiased_var",
        "kveps/motion_prediction models/transformer/layer_norm.py LayerNorm.forward (var = torch.var(x, dim=-1, "
        "keepdim=True), (x - mean) / torch.sqrt(var + eps)); weight and bias applied for the course's API",
        "layer_norm",
        r'''
def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    mean = torch.mean(x, dim=-1, keepdim=True)
    var = torch.var(x, dim=-1, keepdim=True)
    x_norm = (x - mean) / torch.sqrt(var + eps)
    return x_norm * weight + bias
''',
        breach="torch.var with its default correction is the unbiased variance (divides by d - 1); LayerNorm uses "
               "the biased one, the mean of (x - mean)^2",
        names=("unbiased", "biased", "d - 1", "n - 1", "correction", "torch.var"),
    ),
    Port(
        "cohere_layernorm_no_bias",
        "huggingface/transformers src/transformers/models/cohere/modeling_cohere.py CohereLayerNorm (weight only, "
        "bias=False ignored, computed in float32)",
        "LayerNorm",
        r'''
class LayerNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5, bias: bool = False):
        """The hidden size can be a tuple or an int. The tuple is used for QKNorm to normalize across head_dim"""
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.variance_epsilon = eps
        self.eps = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        mean = hidden_states.mean(-1, keepdim=True)
        variance = (hidden_states - mean).pow(2).mean(-1, keepdim=True)
        hidden_states = (hidden_states - mean) * torch.rsqrt(variance + self.variance_epsilon)
        hidden_states = self.weight.to(torch.float32) * hidden_states
        return hidden_states.to(input_dtype)
''',
        breach="CohereLayerNorm has a scale but no shift: there is no bias parameter (its bias argument is "
               "ignored), so the module cannot learn an offset per feature",
        names=("bias", "shift", "beta"),
    ),
    Port(
        "nemotron_layernorm1p",
        "huggingface/transformers src/transformers/models/nemotron/modeling_nemotron.py LayerNorm1P "
        "(nn.LayerNorm whose forward uses self.weight + 1), F.layer_norm replaced by the notebook's layer_norm",
        "LayerNorm",
        r'''
class LayerNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        # nn.LayerNorm(normalized_shape, eps, elementwise_affine=True, bias=True): weight ones, bias zeros
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return layer_norm(input, self.weight + 1, self.bias, self.eps)
''',
        breach="LayerNorm1P scales by weight + 1 (a zero-centred gamma) while keeping nn.LayerNorm's weight "
               "initialised to ones, so the output is scaled by 2 at the start and by weight + 1 afterwards",
        names=("weight + 1", "+ 1", "1p", "doubled", "twice", "scale"),
    ),
    Port(
        "esm1_layernorm_eps",
        "facebookresearch/esm esm/modules.py ESM1LayerNorm (eps=1e-12 default, TF style, eps inside the sqrt)",
        "LayerNorm",
        r'''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-12, affine=True):
        """Construct a layernorm layer in the TF style (eps inside the sqrt)."""
        super().__init__()
        self.hidden_size = (d_model,) if isinstance(d_model, int) else tuple(d_model)
        self.eps = eps
        self.affine = bool(affine)
        if self.affine:
            self.weight = nn.Parameter(torch.ones(d_model))
            self.bias = nn.Parameter(torch.zeros(d_model))
        else:
            self.weight, self.bias = None, None

    def forward(self, x):
        dims = tuple(-(i + 1) for i in range(len(self.hidden_size)))
        means = x.mean(dims, keepdim=True)
        x_zeromean = x - means
        variances = x_zeromean.pow(2).mean(dims, keepdim=True)
        x = x_zeromean / torch.sqrt(variances + self.eps)
        if self.affine:
            x = (self.weight * x) + self.bias
        return x
''',
        breach="ESM1LayerNorm defaults to eps=1e-12 (the TF/BERT value) where the course's LayerNorm defaults to "
               "1e-5: rows with a tiny spread are blown up instead of faded out",
        names=("eps", "1e-12", "epsilon", "default"),
    ),
    Port(
        "model_garden_encoder_block",
        "tensorflow/models official/nlp/modeling/layers/transformer_encoder_block.py TransformerEncoderBlock.call "
        "(norm_first and post-norm paths, _attention_dropout and _output_dropout on the sublayer outputs), "
        "with the course's MultiHeadAttention, FeedForward and LayerNorm",
        "EncoderLayer",
        r'''
class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False):
        super().__init__()
        self._norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)   # _attention_layer
        self.ff = FeedForward(d_model, d_ff, dropout)                   # _intermediate_dense ... _output_dense
        self.norm1 = LayerNorm(d_model)                                 # _attention_layer_norm
        self.norm2 = LayerNorm(d_model)                                 # _output_layer_norm
        self.dropout1 = nn.Dropout(dropout)                             # _attention_dropout
        self.dropout2 = nn.Dropout(dropout)                             # _output_dropout

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        input_tensor, attention_mask = x, src_mask
        if self._norm_first:
            source_tensor = input_tensor
            input_tensor = self.norm1(input_tensor)
        target_tensor = input_tensor
        key_value = input_tensor

        attention_output = self.self_attn(target_tensor, key_value, key_value, attention_mask)[0]
        attention_output = self.dropout1(attention_output)

        if self._norm_first:
            attention_output = source_tensor + attention_output
        else:
            attention_output = target_tensor + attention_output
            attention_output = self.norm1(attention_output)

        if self._norm_first:
            source_attention_output = attention_output
            attention_output = self.norm2(attention_output)
        layer_output = self.ff(attention_output)
        layer_output = self.dropout2(layer_output)

        if self._norm_first:
            layer_output = source_attention_output + layer_output
        else:
            layer_output = self.norm2(layer_output + attention_output)
        return layer_output
''',
    ),
    Port(
        "tunz_encoder_layer_pre_norm",
        "tunz/transformer-pytorch model/transformer.py EncoderLayer (self_attention_norm, self_attention, "
        "self_attention_dropout, ffn_norm, ffn, ffn_dropout; pre-norm only), with the course's modules",
        "EncoderLayer",
        r'''
class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False):
        super().__init__()
        self.norm1 = LayerNorm(d_model)                    # self_attention_norm
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.self_attention_dropout = nn.Dropout(dropout)

        self.norm2 = LayerNorm(d_model)                    # ffn_norm
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.ffn_dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        mask = src_mask
        y = self.norm1(x)
        y = self.self_attn(y, y, y, mask)[0]
        y = self.self_attention_dropout(y)
        x = x + y

        y = self.norm2(x)
        y = self.ff(y)
        y = self.ffn_dropout(y)
        x = x + y
        return x
''',
        breach="tunz's encoder layer is always pre-norm (x + Drop(Sub(LN(x)))); the norm_first argument is "
               "accepted but ignored, so the default norm_first=False does not give the post-norm layer",
        names=("norm_first", "post-norm", "pre-norm", "ignor"),
    ),
]
