"""Fourth held-out set, notebook 05: HF BERT, DistilBERT, GPT-NeoX, CLIP, pytorch-transformer (hkproj)."""
from . import Port

ASSIGNMENT = "05_multi_head"

PORTS = [
    Port("Hugging Face BertSelfAttention.transpose_for_scores (view to x.size()[:-1] + (heads, head_size), "
         "permute(0, 2, 1, 3))",
         "huggingface/transformers models/bert/modeling_bert.py, BertSelfAttention.transpose_for_scores: "
         "new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size); x = x.view(new_x_shape); "
         "return x.permute(0, 2, 1, 3)", "split_heads", '''
def split_heads(x, n_heads):
    num_attention_heads = n_heads
    attention_head_size = x.size(-1) // n_heads
    new_x_shape = x.size()[:-1] + (num_attention_heads, attention_head_size)
    x = x.view(new_x_shape)
    return x.permute(0, 2, 1, 3)
''', breach="permute(0, 2, 1, 3) assumes exactly one batch dimension (B, T, d): other numbers of leading "
            "dimensions fail", names=("leading", "dimension", "any number", "(t, d)")),
    Port("Hugging Face BertSelfAttention context reshaping (permute(0, 2, 1, 3).contiguous(), view(size()[:-2] + "
         "(all_head_size,)))",
         "huggingface/transformers models/bert/modeling_bert.py, BertSelfAttention.forward: context_layer = "
         "context_layer.permute(0, 2, 1, 3).contiguous(); new_context_layer_shape = context_layer.size()[:-2] + "
         "(self.all_head_size,); context_layer = context_layer.view(new_context_layer_shape)", "merge_heads", '''
def merge_heads(x):
    all_head_size = x.size(-3) * x.size(-1)
    context_layer = x.permute(0, 2, 1, 3).contiguous()
    new_context_layer_shape = context_layer.size()[:-2] + (all_head_size,)
    context_layer = context_layer.view(new_context_layer_shape)
    return context_layer
''', breach="permute(0, 2, 1, 3) assumes exactly one batch dimension (B, h, T, d_k): other numbers of leading "
            "dimensions fail", names=("leading", "dimension", "any number")),
    Port("Hugging Face DistilBERT MultiHeadSelfAttention (mask reshaped to (bs, 1, 1, k_length): a key padding "
         "mask only)",
         "huggingface/transformers models/distilbert/modeling_distilbert.py, MultiHeadSelfAttention.forward: "
         "mask_reshp = (bs, 1, 1, k_length); q = q / math.sqrt(dim_per_head); scores = torch.matmul(q, "
         "k.transpose(2, 3)); mask = (mask == 0).view(mask_reshp).expand_as(scores); scores = scores.masked_fill("
         "mask, torch.tensor(torch.finfo(scores.dtype).min)); weights = softmax; weights = self.dropout(weights) "
         "(q_lin / k_lin / v_lin / out_lin renamed w_q / w_k / w_v / w_o; the course's ValueError)",
         "MultiHeadAttention", '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"self.n_heads: {n_heads} must divide self.dim: {d_model} evenly")
        self.n_heads = n_heads
        self.dim = d_model
        self.dropout = nn.Dropout(p=dropout)
        self.w_q = nn.Linear(in_features=d_model, out_features=d_model, bias=bias)
        self.w_k = nn.Linear(in_features=d_model, out_features=d_model, bias=bias)
        self.w_v = nn.Linear(in_features=d_model, out_features=d_model, bias=bias)
        self.w_o = nn.Linear(in_features=d_model, out_features=d_model, bias=bias)

    def forward(self, query, key, value, mask=None):
        bs, q_length, dim = query.size()
        k_length = key.size(1)
        dim_per_head = self.dim // self.n_heads
        mask_reshp = (bs, 1, 1, k_length)

        def shape(x):
            return x.view(bs, -1, self.n_heads, dim_per_head).transpose(1, 2)

        def unshape(x):
            return x.transpose(1, 2).contiguous().view(bs, -1, self.n_heads * dim_per_head)

        q = shape(self.w_q(query))
        k = shape(self.w_k(key))
        v = shape(self.w_v(value))
        q = q / math.sqrt(dim_per_head)
        scores = torch.matmul(q, k.transpose(2, 3))
        if mask is not None:
            mask = (mask == 0).view(mask_reshp).expand_as(scores)
            scores = scores.masked_fill(mask, torch.tensor(torch.finfo(scores.dtype).min))
        weights = torch.softmax(scores, dim=-1)
        weights = self.dropout(weights)
        context = torch.matmul(weights, v)
        context = unshape(context)
        context = self.w_o(context)
        return context, weights
''', breach="the mask is reshaped to (bs, 1, 1, k_length): only a per-key padding mask works; a causal (T_q, T_k) "
            "or per-query (B, T_q, T_k) mask fails or is scrambled",
         names=("causal", "t_q", "mask of shape", "broadcast", "per query")),
    Port("Hugging Face GPTNeoXAttention (fused query_key_value, view to (heads, 3 * head_size), slices per head)",
         "huggingface/transformers models/gpt_neox/modeling_gpt_neox.py, GPTNeoXAttention: self.query_key_value = "
         "nn.Linear(hidden_size, 3 * hidden_size); qkv.view(*qkv.size()[:-1], num_heads, 3 * head_size); query = "
         "qkv[..., :head_size].permute(0, 2, 1, 3), key = qkv[..., head_size:2 * head_size], value = qkv[..., "
         "2 * head_size:]; dense -> w_o (the fused layer applied to each of query / key / value input for "
         "cross-attention)", "MultiHeadAttention", '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_heads = n_heads
        self.head_size = d_model // n_heads
        self.query_key_value = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)   # dense
        self.attention_dropout = nn.Dropout(dropout)

    def _qkv(self, x):
        qkv = self.query_key_value(x)
        new_qkv_shape = qkv.size()[:-1] + (self.n_heads, 3 * self.head_size)
        return qkv.view(*new_qkv_shape)

    def forward(self, query, key, value, mask=None):
        q = self._qkv(query)[..., : self.head_size].permute(0, 2, 1, 3)
        k = self._qkv(key)[..., self.head_size: 2 * self.head_size].permute(0, 2, 1, 3)
        v = self._qkv(value)[..., 2 * self.head_size:].permute(0, 2, 1, 3)
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)
        out, weights = scaled_dot_product_attention(q, k, v, mask)
        if self.training and self.attention_dropout.p > 0:
            out = self.attention_dropout(weights) @ v
        out = out.permute(0, 2, 1, 3).contiguous()
        out = out.view(out.size(0), out.size(1), self.n_heads * self.head_size)
        return self.w_o(out), weights
''', breach="one fused query_key_value projection (interleaved per head) instead of the attributes w_q, w_k, w_v",
         names=("w_q", "w_k", "attribute")),
    Port("Hugging Face CLIPAttention (q_proj(x) * scale, _shape, heads folded into the batch for bmm, weights "
         "reshaped back to (bsz, heads, tgt, src))",
         "huggingface/transformers models/clip/modeling_clip.py, CLIPAttention.forward: query_states = "
         "self.q_proj(hidden_states) * self.scale; _shape(tensor, seq_len, bsz) = tensor.view(bsz, seq_len, "
         "num_heads, head_dim).transpose(1, 2); proj_shape = (bsz * num_heads, -1, head_dim); attn_weights = "
         "torch.bmm(q, k.transpose(1, 2)); + causal_attention_mask (additive); softmax; attn_weights_reshaped; "
         "dropout; bmm with values; out_proj (cross-attention inputs; the bool mask made additive; nn.Dropout as "
         "the course asks; q/k/v/out_proj renamed w_q/w_k/w_v/w_o)", "MultiHeadAttention", '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        self.embed_dim = d_model
        self.num_heads = n_heads
        self.n_heads = n_heads
        self.head_dim = self.embed_dim // self.num_heads
        if self.head_dim * self.num_heads != self.embed_dim:
            raise ValueError(
                f"embed_dim must be divisible by num_heads (got `embed_dim`: {self.embed_dim} and `num_heads`:"
                f" {self.num_heads}).")
        self.scale = self.head_dim ** -0.5
        self.dropout = nn.Dropout(dropout)
        self.w_k = nn.Linear(self.embed_dim, self.embed_dim, bias=bias)
        self.w_v = nn.Linear(self.embed_dim, self.embed_dim, bias=bias)
        self.w_q = nn.Linear(self.embed_dim, self.embed_dim, bias=bias)
        self.w_o = nn.Linear(self.embed_dim, self.embed_dim, bias=bias)

    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, query, key, value, mask=None):
        bsz, tgt_len, embed_dim = query.size()
        query_states = self.w_q(query) * self.scale
        key_states = self._shape(self.w_k(key), -1, bsz)
        value_states = self._shape(self.w_v(value), -1, bsz)

        proj_shape = (bsz * self.num_heads, -1, self.head_dim)
        query_states = self._shape(query_states, tgt_len, bsz).view(*proj_shape)
        key_states = key_states.view(*proj_shape)
        value_states = value_states.view(*proj_shape)

        src_len = key_states.size(1)
        attn_weights = torch.bmm(query_states, key_states.transpose(1, 2))
        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)
            additive = torch.zeros(mask.shape, dtype=attn_weights.dtype, device=attn_weights.device)
            additive = additive.masked_fill(~mask, torch.finfo(attn_weights.dtype).min)
            attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len) + additive
            attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)

        attn_weights = torch.softmax(attn_weights, dim=-1)
        attn_weights_reshaped = attn_weights.view(bsz, self.num_heads, tgt_len, src_len)
        attn_probs = self.dropout(attn_weights)
        attn_output = torch.bmm(attn_probs, value_states)
        attn_output = attn_output.view(bsz, self.num_heads, tgt_len, self.head_dim)
        attn_output = attn_output.transpose(1, 2)
        attn_output = attn_output.reshape(bsz, tgt_len, embed_dim)
        attn_output = self.w_o(attn_output)
        return attn_output, attn_weights_reshaped
'''),
    Port("pytorch-transformer (hkproj / Umar Jamil) MultiHeadAttentionBlock (w_q, w_k, w_v, w_o all bias=False, "
         "masked_fill(mask == 0, -1e9), dropout on the scores)",
         "hkproj/pytorch-transformer model.py, MultiHeadAttentionBlock: self.w_q = nn.Linear(d_model, d_model, "
         "bias=False) ... self.w_o = nn.Linear(d_model, d_model, bias=False); attention(): attention_scores = "
         "(query @ key.transpose(-2, -1)) / math.sqrt(d_k); masked_fill_(mask == 0, -1e9); softmax(dim=-1); "
         "dropout(attention_scores) (the course's ValueError and (B, T_q, T_k) mask expansion added)",
         "MultiHeadAttention", '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        self.d_model = d_model
        self.h = n_heads
        self.n_heads = n_heads
        if d_model % n_heads != 0:
            raise ValueError("d_model is not divisible by h")
        self.d_k = d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=False)  # Wq
        self.w_k = nn.Linear(d_model, d_model, bias=False)  # Wk
        self.w_v = nn.Linear(d_model, d_model, bias=False)  # Wv
        self.w_o = nn.Linear(d_model, d_model, bias=False)  # Wo
        self.dropout = nn.Dropout(dropout)

    @staticmethod
    def attention(query, key, value, mask, dropout):
        d_k = query.shape[-1]
        attention_scores = (query @ key.transpose(-2, -1)) / math.sqrt(d_k)
        if mask is not None:
            attention_scores = attention_scores.masked_fill(mask == 0, -1e9)
        attention_scores = attention_scores.softmax(dim=-1)
        if dropout is not None:
            attention_scores = dropout(attention_scores)
        return (attention_scores @ value), attention_scores

    def forward(self, q, k, v, mask=None):
        query = self.w_q(q)
        key = self.w_k(k)
        value = self.w_v(v)
        query = query.view(query.shape[0], query.shape[1], self.h, self.d_k).transpose(1, 2)
        key = key.view(key.shape[0], key.shape[1], self.h, self.d_k).transpose(1, 2)
        value = value.view(value.shape[0], value.shape[1], self.h, self.d_k).transpose(1, 2)
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)
        x, self.attention_scores = MultiHeadAttention.attention(query, key, value, mask, self.dropout)
        x = x.transpose(1, 2).contiguous().view(x.shape[0], -1, self.h * self.d_k)
        return self.w_o(x), self.attention_scores
''', breach="every projection is bias-free whatever the bias argument (the course's default bias=True asks for "
            "biases)", names=("bias",)),
]
