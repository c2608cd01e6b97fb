"""Mistake catalogue of notebook 06 (residual connections, LayerNorm, the encoder layer)."""
from . import Alternative, Mistake

ASSIGNMENT = "06_residual_layernorm"


def _encoder(forward: str, init: str = "") -> str:
    """An EncoderLayer with the standard submodules (plus ``init``) and the given forward body."""
    return f'''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
{init}
    def forward(self, x, src_mask=None):
        attn = lambda y: self.self_attn(y, y, y, src_mask)[0]
{forward}
'''


def _post_pre(post: str, pre: str) -> str:
    return _encoder(f'''        if self.norm_first:
{pre}
{post}''')


CORRECT_PRE = '''            x = x + self.dropout1(attn(self.norm1(x)))
            return x + self.dropout2(self.ff(self.norm2(x)))'''
CORRECT_POST = '''        x = self.norm1(x + self.dropout1(attn(x)))
        return self.norm2(x + self.dropout2(self.ff(x)))'''

MISTAKES = [
    # --- layer_norm -----------------------------------------------------------
    Mistake("unbiased variance (x.var default)", "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
''', ("layer_norm_reference", "layer_norm_tiny_variance"), "unbiased"),
    Mistake("eps outside the square root", "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    std = (x - mean).pow(2).mean(dim=-1, keepdim=True).sqrt()
    return (x - mean) / (std + eps) * weight + bias
''', ("layer_norm_tiny_variance",), "outside the square root", also=('layer_norm_reference',)),
    Mistake("slides' formula sqrt(sigma) + eps", "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    sigma = (x - mean).pow(2).mean(dim=-1, keepdim=True).sqrt()
    return (x - mean) / (torch.sqrt(sigma) + eps) * weight + bias
''', ("layer_norm_reference", "layer_norm_tiny_variance"), "square root of the standard deviation"),
    Mistake("variance without the square root", "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = (x - mean).pow(2).mean(dim=-1, keepdim=True)
    return (x - mean) / (var + eps) * weight + bias
''', ("layer_norm_reference",), "not by its square root", also=('layer_norm_tiny_variance',)),
    Mistake("mean without 1/d (slides' erratum)", "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.sum(dim=-1, keepdim=True)
    var = (x - mean).pow(2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
''', ("layer_norm_reference",), "(1/d) * sum x_j", also=('layer_norm_tiny_variance',)),
    Mistake("normalizing over the batch (dim 0)", "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=0, keepdim=True)
    var = (x - mean).pow(2).mean(dim=0, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
''', ("layer_norm_reference",), "not over the last dimension", also=('layer_norm_tiny_variance',)),
    Mistake("weight and bias ignored", "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = (x - mean).pow(2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps)
''', ("layer_norm_reference", "layer_norm_tiny_variance"), "weight and the bias are ignored"),
    Mistake("no keepdim", "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1)
    var = x.var(dim=-1, unbiased=False)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
''', ("layer_norm_reference",), "keepdim=True", also=('layer_norm_tiny_variance',)),
    Mistake("eps argument ignored", "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = (x - mean).pow(2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + 1e-5) * weight + bias
''', ("layer_norm_tiny_variance",), "eps argument is ignored"),
    Mistake("layer_norm calling F.layer_norm", "layer_norm", '''
import torch.nn.functional as F
def layer_norm(x, weight, bias, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)
''', ("layer_norm_reference", "layer_norm_tiny_variance"), "not allowed"),
    Mistake("layer_norm importing the course reference", "layer_norm", '''
from lib.layer_norm import layer_norm
''', ("layer_norm_reference", "layer_norm_tiny_variance"),
        "not defined"),  # lib.layer_norm is not there while 06 is graded
    Mistake("layer_norm statistics under torch.no_grad()", "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    with torch.no_grad():
        mean = x.mean(dim=-1, keepdim=True)
        var = (x - mean).pow(2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
''', ("layer_norm_reference",), "cut off from the gradient"),
    Mistake("layer_norm computing in float32", "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    x, weight, bias = x.float(), weight.float(), bias.float()
    mean = x.mean(dim=-1, keepdim=True)
    var = (x - mean).pow(2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
''', ("layer_norm_reference", "layer_norm_tiny_variance"), "dtype"),
    # --- LayerNorm --------------------------------------------------------------
    Mistake("LayerNorm weight initialized at random", "LayerNorm", '''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
    def forward(self, x):
        return layer_norm(x, self.weight, self.bias, self.eps)
''', ("LayerNorm_parameters",), "should start as all ones"),
    Mistake("LayerNorm parameters as plain tensors", "LayerNorm", '''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = torch.ones(d_model)
        self.bias = torch.zeros(d_model)
    def forward(self, x):
        return layer_norm(x, self.weight, self.bias, self.eps)
''', ("LayerNorm_parameters", "LayerNorm_forward"), "not an nn.Parameter"),
    Mistake("LayerNorm that only scales and shifts", "LayerNorm", '''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
    def forward(self, x):
        return x * self.weight + self.bias
''', ("LayerNorm_forward",), "x is not normalized, only scaled and shifted"),
    Mistake("LayerNorm scaling by weight + 1 (a zero-centred weight)", "LayerNorm", '''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
    def forward(self, x):
        return layer_norm(x, 1 + self.weight, self.bias, self.eps)
''', ("LayerNorm_forward",), "multiplied by weight + 1"),
    Mistake("LayerNorm ignores its eps", "LayerNorm", '''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
    def forward(self, x):
        return layer_norm(x, self.weight, self.bias)
''', ("LayerNorm_forward",), "eps is not passed on"),
    Mistake("LayerNorm eps defaulting to 1e-12 (BERT's and XLM's)", "LayerNorm", '''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-12):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
    def forward(self, x):
        return layer_norm(x, self.weight, self.bias, self.eps)
''', ("LayerNorm_forward",), "the default eps is 1e-12"),
    Mistake("LayerNorm forward without weight and bias", "LayerNorm", '''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
    def forward(self, x):
        return layer_norm(x, torch.ones_like(self.weight), torch.zeros_like(self.bias), self.eps)
''', ("LayerNorm_forward",), "weight and bias are not used in forward"),
    Mistake("LayerNorm subclassing nn.LayerNorm", "LayerNorm", '''
class LayerNorm(nn.LayerNorm):
    pass
''', ("LayerNorm_forward",), "not allowed"),
    Mistake("LayerNorm forward on the parameters' .data", "LayerNorm", '''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
    def forward(self, x):
        return layer_norm(x, self.weight.data, self.bias.data, self.eps)
''', ("LayerNorm_forward",), "no gradient reaches"),
    Mistake("LayerNorm with one scalar weight and bias", "LayerNorm", '''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(1))
        self.bias = nn.Parameter(torch.zeros(1))
    def forward(self, x):
        return layer_norm(x, self.weight, self.bias, self.eps)
''', ("LayerNorm_parameters", "LayerNorm_forward"), "one value per feature", elsewhere='expected shape (6,)'),
    # --- EncoderLayer -------------------------------------------------------------
    Mistake("EncoderLayer without residual connections", "EncoderLayer", _post_pre(
        '''        x = self.norm1(self.dropout1(attn(x)))
        return self.norm2(self.dropout2(self.ff(x)))''',
        '''            x = self.dropout1(attn(self.norm1(x)))
            return self.dropout2(self.ff(self.norm2(x)))'''),
        ("EncoderLayer_post_norm", "EncoderLayer_pre_norm"), "no residual connection"),
    Mistake("EncoderLayer ignores norm_first (always post-norm)", "EncoderLayer", _encoder(CORRECT_POST),
            ("EncoderLayer_pre_norm",), "pre-norm is computed as post-norm"),
    Mistake("norm_first defaults to True (pre-norm by default)", "EncoderLayer", _post_pre(CORRECT_POST, CORRECT_PRE)
            .replace("dropout=0.1, norm_first=False", "dropout=0.1, norm_first=True"),
            ("EncoderLayer_post_norm",), "built without norm_first, is a pre-norm layer"),
    Mistake("post-norm and pre-norm swapped", "EncoderLayer", _encoder(
        '''        if not self.norm_first:
''' + CORRECT_PRE + "\n" + CORRECT_POST),
        ("EncoderLayer_post_norm", "EncoderLayer_pre_norm"), "post-norm is computed as pre-norm", elsewhere='pre-norm is computed as post-norm'),
    Mistake("LayerNorm on the sublayer output only, x + LN(Sub(x))", "EncoderLayer", _post_pre(
        '''        x = x + self.norm1(self.dropout1(attn(x)))
        return x + self.norm2(self.dropout2(self.ff(x)))''', CORRECT_PRE),
        ("EncoderLayer_post_norm",), "sublayer's output only"),
    Mistake("norm1 and norm2 swapped", "EncoderLayer", _post_pre(
        '''        x = self.norm2(x + self.dropout1(attn(x)))
        return self.norm1(x + self.dropout2(self.ff(x)))''', CORRECT_PRE),
        ("EncoderLayer_post_norm",), "norm1 and norm2 are swapped"),
    Mistake("one LayerNorm used for both sublayers", "EncoderLayer", _post_pre(
        '''        x = self.norm1(x + self.dropout1(attn(x)))
        return self.norm1(x + self.dropout2(self.ff(x)))''', '''
            x = x + self.dropout1(attn(self.norm1(x)))
            return x + self.dropout2(self.ff(self.norm1(x)))'''),
        ("EncoderLayer_post_norm", "EncoderLayer_pre_norm"), "the same LayerNorm is used for both"),
    Mistake("a single shared LayerNorm module", "EncoderLayer", _encoder(
        "        if self.norm_first:\n" + CORRECT_PRE + "\n" + CORRECT_POST,
        "        self.norm2 = self.norm1\n"),
        ("EncoderLayer_structure", "EncoderLayer_post_norm", "EncoderLayer_pre_norm"), "are the same module", also=('EncoderLayer_dropout',)),
    Mistake("pre-norm residual adds the normalized x", "EncoderLayer", _post_pre(CORRECT_POST, '''
            x = self.norm1(x)
            x = x + self.dropout1(attn(x))
            x = self.norm2(x)
            return x + self.dropout2(self.ff(x))'''),
        ("EncoderLayer_pre_norm",), "the residual adds the normalized x"),
    Mistake("src_mask not passed to the attention", "EncoderLayer", _post_pre(
        '''        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x)[0]))
        return self.norm2(x + self.dropout2(self.ff(x)))''', '''
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y)[0])
            return x + self.dropout2(self.ff(self.norm2(x)))'''),
        ("EncoderLayer_post_norm", "EncoderLayer_pre_norm"), "src_mask is ignored"),
    Mistake("EncoderLayer returns (output, weights)", "EncoderLayer", _post_pre('''
        out, w = self.self_attn(x, x, x, src_mask)
        x = self.norm1(x + self.dropout1(out))
        return self.norm2(x + self.dropout2(self.ff(x))), w''', '''
            y = self.norm1(x)
            out, w = self.self_attn(y, y, y, src_mask)
            x = x + self.dropout1(out)
            return x + self.dropout2(self.ff(self.norm2(x))), w'''),
        ("EncoderLayer_structure", "EncoderLayer_post_norm", "EncoderLayer_pre_norm", "EncoderLayer_dropout"),
        "not (output, attention weights)"),
    Mistake("dropout after the residual addition", "EncoderLayer", _post_pre(
        '''        x = self.norm1(self.dropout1(x + attn(x)))
        return self.norm2(self.dropout2(x + self.ff(x)))''', '''
            x = self.dropout1(x + attn(self.norm1(x)))
            return self.dropout2(x + self.ff(self.norm2(x)))'''),
        ("EncoderLayer_dropout",), "dropout is applied after the residual add"),
    Mistake("only the sublayers' inner dropout", "EncoderLayer", _post_pre(
        '''        x = self.norm1(x + attn(x))
        return self.norm2(x + self.ff(x))''', '''
            x = x + attn(self.norm1(x))
            return x + self.ff(self.norm2(x))'''),
        ("EncoderLayer_dropout",), "needs its own dropout on each sublayer's output"),
    Mistake("no dropout on the feed-forward's output (only inside it)", "EncoderLayer", _post_pre(
        '''        x = self.norm1(x + self.dropout1(attn(x)))
        return self.norm2(x + self.ff(x))''', '''
            x = x + self.dropout1(attn(self.norm1(x)))
            return x + self.ff(self.norm2(x))'''),
        ("EncoderLayer_dropout",), "the feed-forward's is not"),
    Mistake("F.dropout without training=self.training", "EncoderLayer", _encoder(
        """        if self.norm_first:
            x = x + F.dropout(attn(self.norm1(x)), self.p)
            return x + F.dropout(self.ff(self.norm2(x)), self.p)
        x = self.norm1(x + F.dropout(attn(x), self.p))
        return self.norm2(x + F.dropout(self.ff(x), self.p))""", "        self.p = dropout\n"),
        ("EncoderLayer_dropout",), "in eval mode two calls give different outputs"),
    Mistake("EncoderLayer with nn.LayerNorm", "EncoderLayer", _encoder(
        "        if self.norm_first:\n" + CORRECT_PRE + "\n" + CORRECT_POST,
        "        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)\n"),
        ("EncoderLayer_post_norm", "EncoderLayer_pre_norm"), "not allowed", also=('EncoderLayer_structure', 'EncoderLayer_dropout')),
    Mistake("feed-forward sublayer reads the layer's input", "EncoderLayer", _post_pre(
        '''        y = self.norm1(x + self.dropout1(attn(x)))
        return self.norm2(y + self.dropout2(self.ff(x)))''', '''
            y = x + self.dropout1(attn(self.norm1(x)))
            return y + self.dropout2(self.ff(self.norm2(x)))'''),
        ("EncoderLayer_post_norm", "EncoderLayer_pre_norm"), "reads the layer's input"),
    Mistake("src_mask inverted (PyTorch's convention)", "EncoderLayer", _encoder(
        "        if self.norm_first:\n" + CORRECT_PRE + "\n" + CORRECT_POST).replace(
        "self.self_attn(y, y, y, src_mask)", "self.self_attn(y, y, y, None if src_mask is None else ~src_mask)"),
        ("EncoderLayer_post_norm", "EncoderLayer_pre_norm"), "polarity is inverted", also=('EncoderLayer_dropout',)),
]

ALTERNATIVES = [
    Alternative("layer_norm with var(unbiased=False) and rsqrt", "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, unbiased=False, keepdim=True)
    return weight * (x - mean) * torch.rsqrt(var + eps) + bias
'''),
    Alternative("layer_norm with var_mean(correction=0) and sum / d", "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    d = x.shape[-1]
    mean = x.sum(dim=-1, keepdim=True) / d
    centered = x - mean
    var = torch.sum(centered * centered, dim=-1, keepdim=True) / d
    return centered / (var + eps) ** 0.5 * weight + bias
'''),
    Alternative("layer_norm with torch.var_mean", "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    var, mean = torch.var_mean(x, dim=-1, correction=0, keepdim=True)
    return torch.addcmul(bias, (x - mean) / torch.sqrt(var + eps), weight)
'''),
    Alternative("layer_norm from the biased standard deviation", "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    centered = x - x.mean(-1, keepdim=True)
    std = x.std(-1, unbiased=False, keepdim=True)
    return weight * centered / torch.sqrt(std ** 2 + eps) + bias
'''),
    Alternative("LayerNorm keeping normalized_shape like nn.LayerNorm", "LayerNorm", '''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.normalized_shape, self.eps = (d_model,), eps
        self.weight = nn.Parameter(torch.ones(self.normalized_shape))
        self.bias = nn.Parameter(torch.zeros(self.normalized_shape))
    def forward(self, x):
        return layer_norm(x, self.weight, self.bias, eps=self.eps)
'''),
    Alternative("LayerNorm computing inline with register_parameter", "LayerNorm", '''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.register_parameter("weight", nn.Parameter(torch.ones(d_model)))
        self.register_parameter("bias", nn.Parameter(torch.zeros(d_model)))
    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        var = x.var(-1, correction=0, keepdim=True)
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias
'''),
    Alternative("EncoderLayer with a sublayer helper and one dropout module", "EncoderLayer", '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ff = FeedForward(d_model, d_ff, dropout=dropout)
        self.drop = nn.Dropout(dropout)
        self.norm_first = norm_first

    def _sublayer(self, x, norm, fn):
        if self.norm_first:
            return x + self.drop(fn(norm(x)))
        return norm(x + self.drop(fn(x)))

    def forward(self, x, src_mask=None):
        x = self._sublayer(x, self.norm1, lambda y: self.self_attn(y, y, y, mask=src_mask)[0])
        return self._sublayer(x, self.norm2, self.ff)
'''),
    Alternative("EncoderLayer with F.dropout(training=self.training)", "EncoderLayer", '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.p, self.norm_first = dropout, norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = LayerNorm(d_model), LayerNorm(d_model)

    def forward(self, x, src_mask=None):
        if self.norm_first:
            h = self.norm1(x)
            a, _ = self.self_attn(h, h, h, src_mask)
            x = x + F.dropout(a, self.p, training=self.training)
            return x + F.dropout(self.ff(self.norm2(x)), self.p, self.training)
        a, _ = self.self_attn(x, x, x, src_mask)
        x = self.norm1(x + F.dropout(a, self.p, training=self.training))
        return self.norm2(x + F.dropout(self.ff(x), self.p, self.training))
'''),
    Alternative("EncoderLayer with PyTorch's _sa_block / _ff_block layout", "EncoderLayer", '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.dropout2 = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.norm_first = norm_first

    def _sa_block(self, x, mask):
        return self.dropout1(self.self_attn(x, x, x, mask=mask)[0])

    def _ff_block(self, x):
        return self.dropout2(self.ff(x))

    def forward(self, x, src_mask=None):
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask))
            x = self.norm2(x + self._ff_block(x))
        return x
'''),
]
