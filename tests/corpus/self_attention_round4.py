"""Fourth held-out set, notebook 01: GPT-2 (TF and HF), Triton tutorial, self-attention-cv, Qwen2, ViT, pytorch-transformer."""
from . import Port

ASSIGNMENT = "01_self_attention"

PORTS = [
    Port("OpenAI gpt-2 src/model.py softmax (reduce_max with keepdims, exp, divide by reduce_sum)",
         "openai/gpt-2 src/model.py, softmax(x, axis=-1): x = x - tf.reduce_max(x, axis=axis, keepdims=True); "
         "ex = tf.exp(x); return ex / tf.reduce_sum(ex, axis=axis, keepdims=True) (tf -> torch)",
         "softmax", '''
def softmax(x, dim=-1):
    x = x - torch.amax(x, dim=dim, keepdim=True)
    ex = torch.exp(x)
    return ex / torch.sum(ex, dim=dim, keepdim=True)
'''),
    Port("Triton fused-softmax tutorial naive_softmax (row-wise over dim 1 of a 2-D matrix)",
         "triton-lang/triton python/tutorials/02-fused-softmax.py, naive_softmax(x): x_max = x.max(dim=1)[0]; "
         "z = x - x_max[:, None]; numerator = torch.exp(z); denominator = numerator.sum(dim=1); "
         "ret = numerator / denominator[:, None] (the course's signature added; dim ignored, as in the tutorial, "
         "written with keepdim so that it runs on any rank)",
         "softmax", '''
def softmax(x, dim=-1):
    # read from DRAM: MN elements, write M elements (the tutorial works on rows of an (M, N) matrix)
    x_max = x.max(dim=1, keepdim=True)[0]
    z = x - x_max
    numerator = torch.exp(z)
    denominator = numerator.sum(dim=1, keepdim=True)
    return numerator / denominator
''', breach="always normalizes over dimension 1 (the tutorial's rows of an (M, N) matrix) and ignores the dim "
            "argument", names=("dim",)),
    Port("self-attention-cv (The AI Summer) einsum 'b i d , b j d -> b i j', parameter-free",
         "The-AI-Summer/self-attention-cv self_attention_cv/transformer_vanilla/self_attention.py, "
         "compute_mhsa: scaled_dot = torch.einsum('b i d , b j d -> b i j', q, k); attention = "
         "torch.softmax(scaled_dot, dim=-1); torch.einsum('b i j , b j d -> b i d', attention, v) (q = k = v = x, "
         "no scale, course softmax)", "simple_self_attention", '''
def simple_self_attention(x):
    scores = torch.einsum('b i d , b j d -> b i j', x, x)
    attention = softmax(scores, dim=-1)
    return torch.einsum('b i j , b j d -> b i d', attention, x)
''', breach="the einsum equations fix the input to exactly three dimensions (b, i, d): a single sentence (T, d) "
            "or more leading dimensions fail", names=("leading", "dimension", "(t, d)", "batch", "2-d", "rank")),
    Port("nanoGPT lecture 'version 3/4' (wei = q @ k.transpose(-2, -1), softmax(dim=-1), wei @ v) with x as q, k, v",
         "karpathy/ng-video-lecture gpt.py / the lecture notebook: wei = q @ k.transpose(-2, -1); "
         "wei = F.softmax(wei, dim=-1); out = wei @ v (no projections, no scale, no mask here)",
         "simple_self_attention", '''
def simple_self_attention(x):
    wei = x @ x.transpose(-2, -1)      # (B, T, C) @ (B, C, T) -> (B, T, T)
    wei = softmax(wei, dim=-1)
    return wei @ x
'''),
    Port("Hugging Face GPT2Attention._attn eager path (scores divided by value.size(-1) ** 0.5, torch.where with finfo.min)",
         "huggingface/transformers models/gpt2/modeling_gpt2.py, GPT2Attention._attn: attn_weights = "
         "torch.matmul(query, key.transpose(-1, -2)); if self.scale_attn_weights: attn_weights = attn_weights / "
         "torch.full([], value.size(-1) ** 0.5, ...); mask_value = torch.finfo(attn_weights.dtype).min; "
         "attn_weights = torch.where(causal_mask, attn_weights, mask_value); softmax; matmul(attn_weights, value)",
         "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    attn_weights = torch.matmul(q, k.transpose(-1, -2))
    attn_weights = attn_weights / torch.full([], v.size(-1) ** 0.5, dtype=attn_weights.dtype,
                                             device=attn_weights.device)
    if mask is not None:
        mask_value = torch.finfo(attn_weights.dtype).min
        mask_value = torch.full([], mask_value, dtype=attn_weights.dtype, device=attn_weights.device)
        attn_weights = torch.where(mask, attn_weights, mask_value)
    attn_weights = softmax(attn_weights, dim=-1)
    attn_output = torch.matmul(attn_weights, v)
    return attn_output, attn_weights
''', breach="divides the scores by sqrt of the value width d_v (value.size(-1)), not by sqrt(d_k); equal in GPT-2, "
            "wrong when d_v != d_k", names=("d_v", "value", "d_k")),
    Port("Hugging Face Qwen2 eager_attention_forward (scaling = head_dim ** -0.5, additive mask, softmax in float32)",
         "huggingface/transformers models/qwen2/modeling_qwen2.py, eager_attention_forward: attn_weights = "
         "torch.matmul(query, key_states.transpose(2, 3)) * scaling; attn_weights = attn_weights + causal_mask; "
         "softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype); the course's boolean mask turned into "
         "the additive 0 / finfo.min mask as HF's masking utilities do", "scaled_dot_product_attention", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scaling = q.shape[-1] ** -0.5
    attn_weights = torch.matmul(q, k.transpose(-2, -1)) * scaling
    if mask is not None:
        min_dtype = torch.finfo(attn_weights.dtype).min
        causal_mask = torch.where(mask, torch.zeros((), dtype=attn_weights.dtype, device=attn_weights.device),
                                  torch.full((), min_dtype, dtype=attn_weights.dtype, device=attn_weights.device))
        attn_weights = attn_weights + causal_mask
    attn_weights = softmax(attn_weights.to(torch.float32), dim=-1).to(q.dtype)
    attn_output = torch.matmul(attn_weights, v)
    return attn_output, attn_weights
'''),
    Port("Hugging Face ViTSelfAttention (query/key/value nn.Linear with bias=config.qkv_bias, True by default)",
         "huggingface/transformers models/vit/modeling_vit.py, ViTSelfAttention.__init__: self.query = "
         "nn.Linear(config.hidden_size, self.all_head_size, bias=config.qkv_bias) (qkv_bias=True in ViTConfig), "
         "same for key and value; one head, attributes renamed w_q / w_k / w_v", "SelfAttention", '''
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k=None, qkv_bias=True):
        super().__init__()
        all_head_size = d_model if d_k is None else d_k
        self.w_q = nn.Linear(d_model, all_head_size, bias=qkv_bias)
        self.w_k = nn.Linear(d_model, all_head_size, bias=qkv_bias)
        self.w_v = nn.Linear(d_model, all_head_size, bias=qkv_bias)

    def forward(self, x, mask=None):
        return scaled_dot_product_attention(self.w_q(x), self.w_k(x), self.w_v(x), mask=mask)
''', breach="the projections have a bias (ViT's qkv_bias=True); the course's are nn.Linear(..., bias=False)",
         names=("bias",)),
    Port("Hugging Face GPT-2 c_attn: one fused projection to 3 * d_k, split into query, key, value",
         "huggingface/transformers models/gpt2/modeling_gpt2.py, GPT2Attention: self.c_attn = Conv1D(3 * embed_dim, "
         "embed_dim); query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2) (Conv1D -> "
         "nn.Linear without bias, one head)", "SelfAttention", '''
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k=None):
        super().__init__()
        self.split_size = d_model if d_k is None else d_k
        self.c_attn = nn.Linear(d_model, 3 * self.split_size, bias=False)

    def forward(self, x, mask=None):
        query, key, value = self.c_attn(x).split(self.split_size, dim=-1)
        return scaled_dot_product_attention(query, key, value, mask=mask)
''', breach="one fused c_attn projection instead of the three attributes w_q, w_k, w_v the exercise asks for",
         names=("w_q", "w_k", "attribute")),
    Port("pytorch-transformer (hkproj / Umar Jamil) MultiHeadAttentionBlock, one head (w_q, w_k, w_v bias=False)",
         "hkproj/pytorch-transformer model.py, MultiHeadAttentionBlock.__init__: self.w_q = nn.Linear(d_model, "
         "d_model, bias=False) (w_k, w_v likewise); forward: query = self.w_q(q) ... then attention(query, key, "
         "value, mask) (one head: h = 1; the course's attention function)", "SelfAttention", '''
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k=None):
        super().__init__()
        self.d_model = d_model
        self.d_k = d_model if d_k is None else d_k
        self.w_q = nn.Linear(d_model, self.d_k, bias=False)  # Wq
        self.w_k = nn.Linear(d_model, self.d_k, bias=False)  # Wk
        self.w_v = nn.Linear(d_model, self.d_k, bias=False)  # Wv

    def forward(self, x, mask=None):
        query = self.w_q(x)
        key = self.w_k(x)
        value = self.w_v(x)
        x, self.attention_scores = scaled_dot_product_attention(query, key, value, mask)
        return x, self.attention_scores
'''),
]
