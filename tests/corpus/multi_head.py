"""Ported code of notebook 05 (splitting and merging heads, multi-head attention) in the styles of public
projects."""
from . import Port

ASSIGNMENT = "05_multi_head"

POLARITY = ("true = masked", "inverted", "polarity", "true where masked", "opposite")
LEADING = ("leading", "4-d", "3-d", "extra dim", "batch dims")

PORTS = [
    # --- split_heads ----------------------------------------------------------------------------------
    Port("Hugging Face GPT-2 _split_heads (view to new_shape, heads before positions)",
         "huggingface/transformers models/gpt2/modeling_gpt2.py GPT2Attention._split_heads: new_shape = "
         "tensor.size()[:-1] + (num_heads, attn_head_size); tensor = tensor.view(new_shape); "
         "return tensor.permute(0, 2, 1, 3)  # (batch, head, seq_length, head_features)", "split_heads", '''
def split_heads(x, n_heads):
    attn_head_size = x.size(-1) // n_heads
    new_shape = x.size()[:-1] + (n_heads, attn_head_size)
    tensor = x.view(new_shape)
    return tensor.transpose(-3, -2)  # (..., head, seq_length, head_features)
'''),
    Port("lucidrains einsum/einops style: rearrange 'b n (h d) -> b h n d' (without einops)",
         "lucidrains/vit-pytorch vit.py Attention: q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', "
         "h=self.heads), qkv); written with torch.unflatten and movedim since einops is not installed",
         "split_heads", '''
def split_heads(x, n_heads):
    # '... n (h d) -> ... h n d'
    return x.unflatten(-1, (n_heads, x.shape[-1] // n_heads)).movedim(-2, -3)
'''),
    Port("Annotated Transformer head split: view(nbatches, -1, h, d_k).transpose(1, 2)",
         "harvardnlp/annotated-transformer MultiHeadedAttention.forward: lin(x).view(nbatches, -1, self.h, "
         "self.d_k).transpose(1, 2)", "split_heads", '''
def split_heads(x, n_heads):
    nbatches = x.size(0)
    d_k = x.size(-1) // n_heads
    return x.view(nbatches, -1, n_heads, d_k).transpose(1, 2)
''', breach="hard-codes a 3-D (batch, T, d) input: view(nbatches, -1, h, d_k) folds any extra leading dims "
            "into the positions", names=LEADING),
    Port("d2l transpose_qkv (heads folded into the batch: (B * h, T, d/h))",
         "d2l-ai/d2l-en MultiHeadAttention.transpose_qkv: X.reshape(X.shape[0], X.shape[1], num_heads, -1); "
         "X.permute(0, 2, 1, 3); return X.reshape(-1, X.shape[2], X.shape[3])", "split_heads", '''
def split_heads(X, n_heads):
    """Transposition for parallel computation of multiple attention heads."""
    # Shape of input X: (batch_size, no. of queries or key-value pairs, num_hiddens)
    X = X.reshape(X.shape[0], X.shape[1], n_heads, -1)
    X = X.permute(0, 2, 1, 3)
    # Shape of output: (batch_size * num_heads, no. of queries or key-value pairs, num_hiddens / num_heads)
    return X.reshape(-1, X.shape[2], X.shape[3])
''', breach="folds the heads into the batch axis, returning (B * h, T, d/h) instead of (B, h, T, d/h)",
         names=("b * h", "b*h", "batch axis", "folded", "(b, h, t")),
    Port("einops rearrange 'b n (d h) -> b h n d' (head index fastest)",
         "public einops-based vision-transformer attention code (e.g. a TokenLearner/CvT-style Transformer: "
         "q = rearrange(q, 'b n (d h) -> b h n d', h=h)), written with torch since einops is not installed",
         "split_heads", '''
def split_heads(x, n_heads):
    # '... n (d h) -> ... h n d': feature f goes to head f % h
    return x.unflatten(-1, (x.shape[-1] // n_heads, n_heads)).movedim(-1, -3)
''', breach="heads interleaved: head i gets features i, i + h, i + 2h, ... instead of the block "
            "i*d/h ... (i+1)*d/h - 1", names=("interleav", "every h-th", "block", "neighbouring", "(h, d_k)")),

    # --- merge_heads ----------------------------------------------------------------------------------
    Port("nanoGPT re-assemble all head outputs side by side",
         "karpathy/nanoGPT model.py CausalSelfAttention.forward: y = y.transpose(1, 2).contiguous().view(B, T, C)",
         "merge_heads", '''
def merge_heads(y):
    *lead, h, T, hs = y.shape
    # re-assemble all head outputs side by side
    return y.transpose(-3, -2).contiguous().view(*lead, T, h * hs)
'''),
    Port("lucidrains rearrange 'b h n d -> b n (h d)' (without einops)",
         "lucidrains/vit-pytorch vit.py Attention.forward: out = rearrange(out, 'b h n d -> b n (h d)'); written "
         "with torch.movedim and flatten", "merge_heads", '''
def merge_heads(x):
    # '... h n d -> ... n (h d)'
    return x.movedim(-3, -2).flatten(-2)
'''),
    Port("Annotated Transformer concat: x.transpose(1, 2).contiguous().view(nbatches, -1, h * d_k)",
         "harvardnlp/annotated-transformer MultiHeadedAttention.forward step 3, 'Concat' using a view",
         "merge_heads", '''
def merge_heads(x):
    nbatches, h, _, d_k = x.size(0), x.size(1), x.size(-2), x.size(-1)
    return x.transpose(1, 2).contiguous().view(nbatches, -1, h * d_k)
''', breach="hard-codes a 4-D (batch, h, T, d_k) input: with more leading dims transpose(1, 2) swaps the wrong "
            "axes and the view folds them away", names=LEADING),

    # --- MultiHeadAttention ---------------------------------------------------------------------------
    Port("Hugging Face BertSelfAttention + BertSelfOutput",
         "huggingface/transformers models/bert/modeling_bert.py: ValueError('The hidden size (%d) is not a multiple "
         "of the number of attention heads (%d)'); transpose_for_scores; scores / sqrt(attention_head_size) + "
         "extended attention mask; dropout on the probs; BertSelfOutput.dense", "MultiHeadAttention", '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(
                f"The hidden size ({d_model}) is not a multiple of the number of attention heads ({n_heads})")
        self.num_attention_heads = n_heads
        self.attention_head_size = d_model // n_heads
        self.all_head_size = d_model
        self.w_q = nn.Linear(d_model, self.all_head_size, bias=bias)
        self.w_k = nn.Linear(d_model, self.all_head_size, bias=bias)
        self.w_v = nn.Linear(d_model, self.all_head_size, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)   # BertSelfOutput.dense

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        x = x.view(new_x_shape)
        return x.permute(0, 2, 1, 3)

    def forward(self, query, key, value, mask=None):
        query_layer = self.transpose_for_scores(self.w_q(query))
        key_layer = self.transpose_for_scores(self.w_k(key))
        value_layer = self.transpose_for_scores(self.w_v(value))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        if mask is not None:
            if mask.dim() == 3:
                mask = mask[:, None, :, :]
            extended = (1.0 - mask.to(attention_scores.dtype)) * torch.finfo(attention_scores.dtype).min
            attention_scores = attention_scores + extended
        attention_probs = torch.softmax(attention_scores, dim=-1)
        context_layer = torch.matmul(self.dropout(attention_probs), value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        context_layer = context_layer.view(new_context_layer_shape)
        return self.w_o(context_layer), attention_probs
'''),
    Port("lucidrains Attention (einsum, max_neg_value = -finfo.max)",
         "lucidrains/vit-pytorch and x-transformers Attention: scale = dim_head ** -0.5; dots = einsum('b h i d, "
         "b h j d -> b h i j', q, k) * scale; dots.masked_fill(~mask, -torch.finfo(dots.dtype).max); attn = "
         "dots.softmax(dim=-1); dropout; einsum('b h i j, b h j d -> b h i d'); to_out", "MultiHeadAttention", '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"dim {d_model} must be divisible by heads {n_heads}")
        self.heads = n_heads
        self.scale = (d_model // n_heads) ** -0.5
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        q, k, v = (split_heads(t, self.heads) for t in (self.w_q(query), self.w_k(key), self.w_v(value)))
        dots = torch.einsum("b h i d, b h j d -> b h i j", q, k) * self.scale
        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)
            max_neg_value = -torch.finfo(dots.dtype).max
            dots = dots.masked_fill(~mask, max_neg_value)
        attn = dots.softmax(dim=-1)
        out = torch.einsum("b h i j, b h j d -> b h i d", self.dropout(attn), v)
        return self.w_o(merge_heads(out)), attn
'''),
    Port("d2l MultiHeadAttention (heads folded into the batch, mask repeat_interleave'd per head)",
         "d2l-ai/d2l-en MultiHeadAttention.forward: queries = self.transpose_qkv(self.W_q(queries)); valid_lens = "
         "torch.repeat_interleave(valid_lens, repeats=self.num_heads, dim=0); output = self.attention(...); "
         "output_concat = self.transpose_output(output); return self.W_o(output_concat)", "MultiHeadAttention", '''
class MultiHeadAttention(nn.Module):
    """Multi-head attention."""

    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"num_hiddens={d_model} is not divisible by num_heads={n_heads}")
        self.num_heads = n_heads
        self.dropout = nn.Dropout(dropout)
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def transpose_qkv(self, X):
        X = X.reshape(X.shape[0], X.shape[1], self.num_heads, -1)
        X = X.permute(0, 2, 1, 3)
        return X.reshape(-1, X.shape[2], X.shape[3])

    def transpose_output(self, X):
        X = X.reshape(-1, self.num_heads, X.shape[1], X.shape[2])
        X = X.permute(0, 2, 1, 3)
        return X.reshape(X.shape[0], X.shape[1], -1)

    def forward(self, queries, keys, values, mask=None):
        B = queries.shape[0]
        queries = self.transpose_qkv(self.w_q(queries))
        keys = self.transpose_qkv(self.w_k(keys))
        values = self.transpose_qkv(self.w_v(values))
        if mask is not None and mask.dim() == 3:
            # On axis 0, copy the first item (scalar or vector) for num_heads times, then copy the next item...
            mask = torch.repeat_interleave(mask, repeats=self.num_heads, dim=0)
        elif mask is not None and mask.dim() == 4:
            mask = mask.expand(B, self.num_heads, -1, -1).reshape(-1, *mask.shape[-2:])
        output, attention_weights = scaled_dot_product_attention(queries, keys, values, mask)
        if self.training and self.dropout.p > 0:
            output = torch.bmm(self.dropout(attention_weights), values)
        output_concat = self.transpose_output(output)
        weights = attention_weights.reshape(B, self.num_heads, *attention_weights.shape[-2:])
        return self.w_o(output_concat), weights
'''),
    Port("fairseq MultiheadAttention (q scaled by head_dim ** -0.5 before the product)",
         "facebookresearch/fairseq fairseq/modules/multihead_attention.py: self.scaling = self.head_dim ** -0.5; "
         "q = self.q_proj(query); q *= self.scaling; attn_weights = torch.bmm(q, k.transpose(1, 2)); "
         "attn_weights.masked_fill(mask, float('-inf')) via key_padding_mask; out_proj", "MultiHeadAttention", '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        self.embed_dim = d_model
        self.num_heads = n_heads
        self.head_dim = d_model // n_heads
        if self.head_dim * n_heads != self.embed_dim:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.scaling = self.head_dim ** -0.5
        self.w_k = nn.Linear(d_model, d_model, bias=bias)    # k_proj
        self.w_v = nn.Linear(d_model, d_model, bias=bias)    # v_proj
        self.w_q = nn.Linear(d_model, d_model, bias=bias)    # q_proj
        self.w_o = nn.Linear(d_model, d_model, bias=bias)    # out_proj
        self.dropout_module = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        q = self.w_q(query)
        k = self.w_k(key)
        v = self.w_v(value)
        q = q * self.scaling
        q, k, v = (split_heads(t, self.num_heads) for t in (q, k, v))
        attn_weights = torch.matmul(q, k.transpose(-2, -1))
        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)
            attn_weights = attn_weights.masked_fill(~mask, float("-inf"))
        attn_weights_float = torch.softmax(attn_weights.float(), dim=-1)
        attn_weights = attn_weights_float.type_as(attn_weights)
        attn_probs = self.dropout_module(attn_weights)
        attn = torch.matmul(attn_probs, v)
        return self.w_o(merge_heads(attn)), attn_weights
'''),
    Port("nanoGPT CausalSelfAttention (causal mask always applied)",
         "karpathy/nanoGPT model.py CausalSelfAttention: register_buffer('bias', tril(ones(block_size, block_size)))"
         "; att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf')); attn_dropout; c_proj; resid_dropout",
         "MultiHeadAttention", '''
class MultiHeadAttention(nn.Module):

    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"n_embd={d_model} is not divisible by n_head={n_heads}")
        # key, query, value projections for all heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        # output projection
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.attn_dropout = nn.Dropout(dropout)
        self.n_head = n_heads

    def forward(self, query, key, value, mask=None):
        B, T, C = query.size()
        S = key.size(1)
        q = self.w_q(query).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = self.w_k(key).view(B, S, self.n_head, C // self.n_head).transpose(1, 2)    # (B, nh, S, hs)
        v = self.w_v(value).view(B, S, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, S, hs)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        bias = torch.tril(torch.ones(T, S, device=query.device)).view(1, 1, T, S)
        att = att.masked_fill(bias == 0, float("-inf"))
        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)
            att = att.masked_fill(~mask, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = self.attn_dropout(att) @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs side by side
        return self.w_o(y), att
''', breach="always applies a causal mask (nanoGPT is decoder-only): without a mask, and in cross-attention, "
            "queries cannot see later keys", names=("causal", "future", "always", "ignores the mask", "lower triangle")),
    Port("Annotated Transformer MultiHeadedAttention with assert d_model % h == 0",
         "harvardnlp/annotated-transformer MultiHeadedAttention.__init__: assert d_model % h == 0; self.linears = "
         "clones(nn.Linear(d_model, d_model), 4)", "MultiHeadAttention", '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        "Take in model size and number of heads."
        super().__init__()
        assert d_model % n_heads == 0
        # We assume d_v always equals d_k
        self.d_k = d_model // n_heads
        self.h = n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.attn = None
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        if mask is not None and mask.dim() == 3:
            # Same mask applied to all h heads.
            mask = mask.unsqueeze(1)
        nbatches = query.size(0)
        query, key, value = [
            lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
            for lin, x in zip((self.w_q, self.w_k, self.w_v), (query, key, value))
        ]
        x, self.attn = scaled_dot_product_attention(query, key, value, mask=mask)
        if self.training and self.dropout.p > 0:
            x = self.dropout(self.attn) @ value
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        return self.w_o(x), self.attn
''', breach="checks d_model % n_heads with an assert (AssertionError, skipped under python -O) instead of raising "
            "ValueError", names=("valueerror", "assert", "assertionerror")),
    Port("Annotated Transformer MultiHeadedAttention: mask.unsqueeze(1) for every mask",
         "harvardnlp/annotated-transformer MultiHeadedAttention.forward: if mask is not None: # Same mask applied "
         "to all h heads. mask = mask.unsqueeze(1)", "MultiHeadAttention", '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by h={n_heads}")
        self.d_k = d_model // n_heads
        self.h = n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        if mask is not None:
            # Same mask applied to all h heads.
            mask = mask.unsqueeze(1)
        nbatches = query.size(0)
        query, key, value = [
            lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
            for lin, x in zip((self.w_q, self.w_k, self.w_v), (query, key, value))
        ]
        x, attn = scaled_dot_product_attention(query, key, value, mask=mask)
        if self.training and self.dropout.p > 0:
            x = self.dropout(attn) @ value
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        return self.w_o(x), attn
''', breach="unsqueezes every mask at dim 1, which is right only for 3-D (B, T_q, T_k) or (B, 1, T_k) masks: a 2-D "
            "(T_q, T_k) or a 4-D (B, 1|h, T_q, T_k) mask gets misaligned with the scores",
         names=("unsqueeze", "2-d", "(t_q, t_k)", "4-d", "mask shape")),
    Port("nn.MultiheadAttention bool attn_mask (True = not allowed)",
         "PyTorch docs nn.MultiheadAttention.forward: 'binary mask ... a True value indicates that the corresponding "
         "position is not allowed to attend'; F.multi_head_attention_forward: masked_fill_(attn_mask, -inf)",
         "MultiHeadAttention", '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        self.embed_dim = d_model
        self.num_heads = n_heads
        self.head_dim = d_model // n_heads
        if self.head_dim * n_heads != d_model:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)   # out_proj
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        attn_mask = mask
        q = split_heads(self.w_q(query), self.num_heads)
        k = split_heads(self.w_k(key), self.num_heads)
        v = split_heads(self.w_v(value), self.num_heads)
        attn_output_weights = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if attn_mask is not None:
            if attn_mask.dim() == 3:
                attn_mask = attn_mask.unsqueeze(1)
            attn_output_weights = attn_output_weights.masked_fill(attn_mask, float("-inf"))
        attn_output_weights = torch.softmax(attn_output_weights, dim=-1)
        attn_output = self.dropout(attn_output_weights) @ v
        return self.w_o(merge_heads(attn_output)), attn_output_weights
''', breach="mask polarity of nn.MultiheadAttention: True means NOT allowed to attend, the opposite of the "
            "course's True = may attend", names=POLARITY),
    Port("nn.MultiheadAttention weights averaged over heads (average_attn_weights=True)",
         "PyTorch docs nn.MultiheadAttention.forward(average_attn_weights=True): attn_output_weights are averaged "
         "across heads, shape (N, L, S); F.multi_head_attention_forward: attn_output_weights.mean(dim=1)",
         "MultiHeadAttention", '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        self.num_heads = n_heads
        self.head_dim = d_model // n_heads
        if self.head_dim * n_heads != d_model:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None, average_attn_weights=True):
        q = split_heads(self.w_q(query), self.num_heads)
        k = split_heads(self.w_k(key), self.num_heads)
        v = split_heads(self.w_v(value), self.num_heads)
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)
        attn_output, attn_output_weights = scaled_dot_product_attention(q, k, v, mask)
        if self.training and self.dropout.p > 0:
            attn_output = self.dropout(attn_output_weights) @ v
        attn_output = self.w_o(merge_heads(attn_output))
        if average_attn_weights:
            attn_output_weights = attn_output_weights.mean(dim=1)
        return attn_output, attn_output_weights
''', breach="returns the weights averaged over the heads, (B, T_q, T_k), instead of per head (B, h, T_q, T_k)",
         names=("average", "averaged", "mean over", "per head", "(b, h, t_q, t_k)")),
    Port("nanoGPT lecture MultiHeadAttention: a ModuleList of heads in a Python loop",
         "karpathy/ng-video-lecture gpt.py MultiHeadAttention.forward: out = torch.cat([h(x) for h in self.heads], "
         "dim=-1); out = self.dropout(self.proj(out))", "MultiHeadAttention", '''
class MultiHeadAttention(nn.Module):
    """ multiple heads of self-attention in parallel """

    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"n_embd={d_model} is not divisible by n_head={n_heads}")
        self.n_heads = n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        q, k, v = self.w_q(query), self.w_k(key), self.w_v(value)
        head_size = q.shape[-1] // self.n_heads
        if mask is not None and mask.dim() == 4:
            mask = mask.squeeze(1) if mask.shape[1] == 1 else mask
        outs, weights = [], []
        for i in range(self.n_heads):   # one head at a time
            cols = slice(i * head_size, (i + 1) * head_size)
            head_mask = mask[:, i] if mask is not None and mask.dim() == 4 else mask
            out, wei = scaled_dot_product_attention(q[..., cols], k[..., cols], v[..., cols], head_mask)
            if self.training and self.dropout.p > 0:
                out = self.dropout(wei) @ v[..., cols]
            outs.append(out)
            weights.append(wei)
        out = torch.cat(outs, dim=-1)
        return self.w_o(out), torch.stack(weights, dim=1)
''', breach="computes the heads one at a time in a Python loop over the heads, which the contract forbids",
         names=("loop", "one at a time", "at once", "for each head", "per head")),
    Port("LLaMA Attention (wq, wk, wv, wo always bias-free)",
         "meta-llama/llama llama/model.py Attention: self.wq = ColumnParallelLinear(args.dim, n_heads * head_dim, "
         "bias=False, ...), wk, wv, wo = RowParallelLinear(..., bias=False); scores = matmul(xq, keys.transpose(2, "
         "3)) / sqrt(head_dim); softmax(scores.float()).type_as(xq)", "MultiHeadAttention", '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"dim={d_model} is not divisible by n_heads={n_heads}")
        self.n_local_heads = n_heads
        self.head_dim = d_model // n_heads
        self.w_q = nn.Linear(d_model, n_heads * self.head_dim, bias=False)
        self.w_k = nn.Linear(d_model, n_heads * self.head_dim, bias=False)
        self.w_v = nn.Linear(d_model, n_heads * self.head_dim, bias=False)
        self.w_o = nn.Linear(n_heads * self.head_dim, d_model, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        bsz, seqlen, _ = query.shape
        xq = self.w_q(query).view(bsz, seqlen, self.n_local_heads, self.head_dim)
        keys = self.w_k(key).view(bsz, key.shape[1], self.n_local_heads, self.head_dim)
        values = self.w_v(value).view(bsz, value.shape[1], self.n_local_heads, self.head_dim)
        xq = xq.transpose(1, 2)          # (bs, n_local_heads, seqlen, head_dim)
        keys = keys.transpose(1, 2)      # (bs, n_local_heads, cache_len + seqlen, head_dim)
        values = values.transpose(1, 2)
        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.head_dim)
        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)
            scores = scores.masked_fill(~mask, float("-inf"))   # (bs, n_local_heads, seqlen, cache_len + seqlen)
        scores = torch.softmax(scores.float(), dim=-1).type_as(xq)
        output = torch.matmul(self.dropout(scores), values)
        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.w_o(output), scores
''', breach="the projections never have a bias: bias=True (the default) is ignored",
         names=("bias",  "bias=true", "no bias")),
    Port("Peter Bloem SelfAttentionNarrow: queries and keys scaled by e^(1/4), e = embedding size",
         "pbloem/former former/modules.py SelfAttentionNarrow: s = e // h; queries = queries / (e ** (1/4)); "
         "keys = keys / (e ** (1/4))", "MultiHeadAttention", '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"Embedding dimension ({d_model}) should be divisible by nr. of heads ({n_heads})")
        self.emb = d_model
        self.heads = n_heads
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)   # unifyheads
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        e, h = self.emb, self.heads
        queries = split_heads(self.w_q(query), h)
        keys = split_heads(self.w_k(key), h)
        values = split_heads(self.w_v(value), h)
        # Instead of dividing the dot products by sqrt(e), we scale the keys and values.
        queries = queries / (e ** (1 / 4))
        keys = keys / (e ** (1 / 4))
        dot = torch.matmul(queries, keys.transpose(-2, -1))
        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)
            dot = dot.masked_fill(~mask, float("-inf"))
        dot = torch.softmax(dot, dim=-1)
        out = torch.matmul(self.dropout(dot), values)
        return self.w_o(merge_heads(out)), dot
''', breach="scores scaled by 1/sqrt(d_model), the embedding size e, instead of 1/sqrt(d_k) = 1/sqrt(d_model / h)",
         names=("sqrt(d_model)", "sqrt(d_k)", "d_model", "scale", "per-head")),
]
