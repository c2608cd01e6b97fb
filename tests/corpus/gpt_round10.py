"""Tenth held-out set, notebook 10: ports of nanoGPT, openai/gpt-2's sampler, Meta's llama, KerasHub's samplers and
CausalLM, Keras's losses, vLLM's sampler, Hugging Face's Flax top-p warper, llama.cpp's sampler chain and LitGPT's
chunked cross-entropy, read at their sources; and of Hugging Face's GPT-2, GPT-NeoX and GPT-1 layers, PyTorch
logits warpers, sampling loop, old GPT-2 loss and old generate loop, its Flax top-k warper, picoGPT, KerasHub's
GPT2Backbone, x-transformers' wrapper and tinygrad's gpt2.py, written from what the writer remembered of them (the
hour ran short). Graded before any change: 9 of 9 faithful ports kept their marks, 10 of 11 breaches lost points
and 6 were named; one breach (a request past max_len cut short) kept its points, as no judge asked for the ValueError
the notebook requires. nanogpt_generate's names gained "ValueError" and "crop" after grading: its breach states both
causes, and the first failing part now names the second."""
from tests.corpus import Port

ASSIGNMENT = "10_gpt"

PORTS = [
    # ------------------------------------------------------------------ GPT
    Port("hf_gpt2_model", "huggingface/transformers src/transformers/models/gpt2/modeling_gpt2.py GPT2Block.forward, GPT2Model.forward and GPT2LMHeadModel (residual = h; h = ln_1(h); h = attn + residual; ln_2 then mlp; wte + wpe, drop, ln_f, lm_head tied by tie_weights)", "GPT", r'''
class Block(nn.Module):
    """One pre-norm block: x + Drop(Attn(LN1(x))), then x + Drop(FF(LN2(x))). x: (B, T, d) -> (B, T, d)."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.1):
        super().__init__()
        self.ln1 = LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ln2 = LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        residual = x
        hidden_states = self.ln1(x)
        attn_output = self.attn(hidden_states, hidden_states, hidden_states, mask)[0]
        attn_output = self.dropout(attn_output)                       # GPT2Attention's resid_dropout
        # residual connection
        hidden_states = attn_output + residual
        residual = hidden_states
        hidden_states = self.ln2(hidden_states)
        feed_forward_hidden_states = self.dropout(self.ff(hidden_states))   # GPT2MLP's dropout
        # residual connection
        hidden_states = residual + feed_forward_hidden_states
        return hidden_states


class GPT(nn.Module):
    """Decoder-only language model: idx (B, T) int64, T <= max_len -> logits (B, T, vocab_size).

    Attributes: tok_emb, positions (LearnedPositions), dropout, blocks (n_layers Blocks), ln_f, and head,
    a bias-free nn.Linear whose weight is tok_emb's weight (tied). Every block is causal.
    """

    def __init__(self, vocab_size, d_model=128, n_heads=4, n_layers=4, d_ff=512, max_len=256, dropout=0.1):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)                  # wte
        self.positions = LearnedPositions(max_len, d_model)               # wpe
        self.dropout = nn.Dropout(dropout)                                # drop (embd_pdrop)
        self.blocks = nn.ModuleList([Block(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)])   # h
        self.ln_f = LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)           # GPT2LMHeadModel.lm_head
        self.head.weight = self.tok_emb.weight                            # tie_weights(): output = input embeddings
        self.apply(lm.init_weights)   # given: GPT-2's initialization

    def forward(self, idx):
        input_shape = idx.size()
        inputs_embeds = self.tok_emb(idx)
        hidden_states = self.positions(inputs_embeds)                     # inputs_embeds + wpe(position_ids)
        hidden_states = self.dropout(hidden_states)
        attention_mask = causal_mask(input_shape[-1], device=idx.device)  # the "bias" buffer, sliced to T
        for block in self.blocks:
            hidden_states = block(hidden_states, attention_mask)
        hidden_states = self.ln_f(hidden_states)
        return self.head(hidden_states)
'''),

    Port("picogpt_model", "jaymody/picoGPT gpt2.py transformer_block and gpt2 (x = x + mha(layer_norm(x, **ln_1)); x = x + ffn(layer_norm(x, **ln_2)); x = wte[inputs] + wpe[range(len(inputs))]; layer_norm(x, **ln_f); return x @ wte.T)", "GPT", r'''
class Block(nn.Module):
    """One pre-norm block: x + Drop(Attn(LN1(x))), then x + Drop(FF(LN2(x))). x: (B, T, d) -> (B, T, d)."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.1):
        super().__init__()
        self.ln1 = LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ln2 = LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        # multi-head causal self attention
        h = self.ln1(x)
        x = x + self.dropout(self.attn(h, h, h, mask)[0])   # [n_seq, n_embd] -> [n_seq, n_embd]
        # position-wise feed forward network
        x = x + self.dropout(self.ff(self.ln2(x)))          # [n_seq, n_embd] -> [n_seq, n_embd]
        return x


class GPT(nn.Module):
    """Decoder-only language model: idx (B, T) int64, T <= max_len -> logits (B, T, vocab_size).

    Attributes: tok_emb, positions (LearnedPositions), dropout, blocks (n_layers Blocks), ln_f, and head,
    a bias-free nn.Linear whose weight is tok_emb's weight (tied). Every block is causal.
    """

    def __init__(self, vocab_size, d_model=128, n_heads=4, n_layers=4, d_ff=512, max_len=256, dropout=0.1):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.positions = LearnedPositions(max_len, d_model)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)])
        self.ln_f = LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight
        self.apply(lm.init_weights)   # given: GPT-2's initialization

    def forward(self, idx):
        # token + positional embeddings
        x = self.dropout(self.positions(self.tok_emb(idx)))  # [n_seq] -> [n_seq, n_embd]
        mask = causal_mask(idx.shape[1], device=idx.device)
        # forward pass through n_layer transformer blocks
        for block in self.blocks:
            x = block(x, mask)  # [n_seq, n_embd] -> [n_seq, n_embd]
        # projection to vocab
        x = self.ln_f(x)  # [n_seq, n_embd] -> [n_seq, n_embd]
        return x @ self.tok_emb.weight.T  # [n_seq, n_embd] -> [n_seq, n_vocab]
'''),

    Port("keras_hub_gpt2", "keras-team/keras-hub keras_hub/src/models/gpt2/gpt2_backbone.py GPT2Backbone with TransformerDecoder(normalize_first=True) and GPT2CausalLM (token_embedding(x, reverse=True): the ReversibleEmbedding, tied)", "GPT", r'''
class Block(nn.Module):
    """One pre-norm block: x + Drop(Attn(LN1(x))), then x + Drop(FF(LN2(x))). x: (B, T, d) -> (B, T, d)."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.1):
        super().__init__()
        self.ln1 = LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ln2 = LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        # Self attention block.
        residual = x
        x = self.ln1(x)                                   # normalize_first: _self_attention_layer_norm
        x = self.attn(x, x, x, mask)[0]
        x = self.dropout(x)                               # _self_attention_dropout
        x = x + residual
        # Feedforward block.
        residual = x
        x = self.ln2(x)                                   # _feedforward_layer_norm
        x = self.ff(x)                                    # intermediate dense, gelu, output dense
        x = self.dropout(x)                               # _feedforward_dropout
        x = x + residual
        return x


class GPT(nn.Module):
    """Decoder-only language model: idx (B, T) int64, T <= max_len -> logits (B, T, vocab_size).

    Attributes: tok_emb, positions (LearnedPositions), dropout, blocks (n_layers Blocks), ln_f, and head,
    a bias-free nn.Linear whose weight is tok_emb's weight (tied). Every block is causal.
    """

    def __init__(self, vocab_size, d_model=128, n_heads=4, n_layers=4, d_ff=512, max_len=256, dropout=0.1):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)       # ReversibleEmbedding(tie_weights=True)
        self.positions = LearnedPositions(max_len, d_model)    # PositionEmbedding(sequence_length=max_sequence_length)
        self.dropout = nn.Dropout(dropout)                     # embeddings_dropout
        self.blocks = nn.ModuleList([Block(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)])
        self.ln_f = LayerNorm(d_model)                         # layer_norm, epsilon=1e-05
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight                 # token_embedding(x, reverse=True)
        self.apply(lm.init_weights)   # given: GPT-2's initialization

    def forward(self, idx):
        x = self.dropout(self.positions(self.tok_emb(idx)))
        # TransformerDecoder computes its causal mask from the sequence length
        decoder_mask = causal_mask(idx.shape[1], device=idx.device)
        for block in self.blocks:
            x = block(x, decoder_mask)
        sequence_output = self.ln_f(x)
        return self.head(sequence_output)
'''),

    Port("nanogpt_model", "karpathy/nanoGPT model.py Block.forward and GPT.forward (x = x + attn(ln_1(x)); wte + wpe, drop, ln_f; with targets=None 'inference-time mini-optimization: only forward the lm_head on the very last position', lm_head(x[:, [-1], :]))", "GPT", r'''
class Block(nn.Module):
    """One pre-norm block: x + Drop(Attn(LN1(x))), then x + Drop(FF(LN2(x))). x: (B, T, d) -> (B, T, d)."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.1):
        super().__init__()
        self.ln1 = LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ln2 = LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        h = self.ln1(x)
        x = x + self.dropout(self.attn(h, h, h, mask)[0])    # resid_dropout(c_proj(y))
        x = x + self.dropout(self.ff(self.ln2(x)))           # MLP ends with its dropout
        return x


class GPT(nn.Module):
    """Decoder-only language model: idx (B, T) int64, T <= max_len -> logits (B, T, vocab_size).

    Attributes: tok_emb, positions (LearnedPositions), dropout, blocks (n_layers Blocks), ln_f, and head,
    a bias-free nn.Linear whose weight is tok_emb's weight (tied). Every block is causal.
    """

    def __init__(self, vocab_size, d_model=128, n_heads=4, n_layers=4, d_ff=512, max_len=256, dropout=0.1):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.positions = LearnedPositions(max_len, d_model)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)])
        self.ln_f = LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.tok_emb.weight = self.head.weight   # https://paperswithcode.com/method/weight-tying
        self.apply(lm.init_weights)   # given: GPT-2's initialization

    def forward(self, idx, targets=None):
        b, t = idx.size()
        assert t <= self.max_len, f"Cannot forward sequence of length {t}, block size is only {self.max_len}"
        # forward the GPT model itself
        x = self.dropout(self.positions(self.tok_emb(idx)))
        mask = causal_mask(t, device=idx.device)
        for block in self.blocks:
            x = block(x, mask)
        x = self.ln_f(x)
        if targets is not None:
            # if we are given some desired targets also calculate the loss
            logits = self.head(x)
        else:
            # inference-time mini-optimization: only forward the lm_head on the very last position
            logits = self.head(x[:, [-1], :])  # note: using list [-1] to preserve the time dim
        return logits
''', breach="with no targets, forward returns only the last position's logits (B, 1, V) instead of (B, T, V) for every position",
         names=("last position", "every position", "all positions", "(b, 1", "x[:, [-1]", "only the last")),

    Port("gpt_neox_parallel", "huggingface/transformers src/transformers/models/gpt_neox/modeling_gpt_neox.py GPTNeoXLayer.forward with use_parallel_residual=True, its default ('x = x + attn(ln1(x)) + mlp(ln2(x))'), embeddings tied (tie_word_embeddings=True)", "GPT", r'''
class Block(nn.Module):
    """One pre-norm block: x + Drop(Attn(LN1(x))), then x + Drop(FF(LN2(x))). x: (B, T, d) -> (B, T, d)."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.1):
        super().__init__()
        self.ln1 = LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ln2 = LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        hidden_states = x
        normed = self.ln1(hidden_states)                               # input_layernorm
        attn_output = self.attn(normed, normed, normed, mask)[0]
        attn_output = self.dropout(attn_output)                        # post_attention_dropout
        # pseudocode:
        # x = x + attn(ln1(x)) + mlp(ln2(x))
        mlp_output = self.ff(self.ln2(hidden_states))                  # post_attention_layernorm(hidden_states)
        mlp_output = self.dropout(mlp_output)                          # post_mlp_dropout
        hidden_states = mlp_output + attn_output + hidden_states
        return hidden_states


class GPT(nn.Module):
    """Decoder-only language model: idx (B, T) int64, T <= max_len -> logits (B, T, vocab_size).

    Attributes: tok_emb, positions (LearnedPositions), dropout, blocks (n_layers Blocks), ln_f, and head,
    a bias-free nn.Linear whose weight is tok_emb's weight (tied). Every block is causal.
    """

    def __init__(self, vocab_size, d_model=128, n_heads=4, n_layers=4, d_ff=512, max_len=256, dropout=0.1):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)                  # embed_in
        self.positions = LearnedPositions(max_len, d_model)
        self.dropout = nn.Dropout(dropout)                                # emb_dropout
        self.blocks = nn.ModuleList([Block(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)])   # layers
        self.ln_f = LayerNorm(d_model)                                    # final_layer_norm
        self.head = nn.Linear(d_model, vocab_size, bias=False)           # embed_out
        self.head.weight = self.tok_emb.weight
        self.apply(lm.init_weights)   # given: GPT-2's initialization

    def forward(self, idx):
        hidden_states = self.dropout(self.positions(self.tok_emb(idx)))
        causal = causal_mask(idx.shape[1], device=idx.device)
        for layer in self.blocks:
            hidden_states = layer(hidden_states, causal)
        hidden_states = self.ln_f(hidden_states)
        return self.head(hidden_states)
''', breach="parallel residual: the feed-forward reads LN2 of the block's input x, not of x + attention, so FF never sees the attention's output",
         names=("parallel", "sequential", "attention output", "attention's output", "x + attn", "after the attention")),

    Port("hf_openai_gpt1", "huggingface/transformers src/transformers/models/openai/modeling_openai.py Block.forward and OpenAIGPTModel.forward (GPT-1: n = ln_1(x + a); h = ln_2(n + m), post-norm; tokens_embed + positions_embed, drop, blocks, no final LayerNorm; lm_head tied)", "GPT", r'''
class Block(nn.Module):
    """One pre-norm block: x + Drop(Attn(LN1(x))), then x + Drop(FF(LN2(x))). x: (B, T, d) -> (B, T, d)."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.1):
        super().__init__()
        self.ln1 = LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ln2 = LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        a = self.dropout(self.attn(x, x, x, mask)[0])      # Attention ends with resid_dropout
        n = self.ln1(x + a)
        m = self.dropout(self.ff(n))                       # MLP ends with its dropout
        h = self.ln2(n + m)
        return h


class GPT(nn.Module):
    """Decoder-only language model: idx (B, T) int64, T <= max_len -> logits (B, T, vocab_size).

    Attributes: tok_emb, positions (LearnedPositions), dropout, blocks (n_layers Blocks), ln_f, and head,
    a bias-free nn.Linear whose weight is tok_emb's weight (tied). Every block is causal.
    """

    def __init__(self, vocab_size, d_model=128, n_heads=4, n_layers=4, d_ff=512, max_len=256, dropout=0.1):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)          # tokens_embed
        self.positions = LearnedPositions(max_len, d_model)       # positions_embed
        self.dropout = nn.Dropout(dropout)                        # drop
        self.blocks = nn.ModuleList([Block(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)])   # h
        self.ln_f = LayerNorm(d_model)                            # the course's attribute; GPT-1 applies none
        self.head = nn.Linear(d_model, vocab_size, bias=False)    # OpenAIGPTLMHeadModel.lm_head
        self.head.weight = self.tok_emb.weight                    # tied
        self.apply(lm.init_weights)   # given: GPT-2's initialization

    def forward(self, idx):
        inputs_embeds = self.tok_emb(idx)
        hidden_states = self.positions(inputs_embeds)             # inputs_embeds + position_embeds
        hidden_states = self.dropout(hidden_states)
        causal = causal_mask(idx.shape[1], device=idx.device)
        for block in self.blocks:
            hidden_states = block(hidden_states, causal)
        return self.head(hidden_states)
''', breach="post-norm blocks (LayerNorm after each residual sum: ln1(x + attn(x)), ln2(n + ff(n))) and no final LayerNorm before the head, GPT-1's layout instead of GPT-2's pre-norm",
         names=("post-norm", "pre-norm", "postnorm", "prenorm", "post norm", "pre norm")),

    # ------------------------------------------------------------------ lm_loss
    Port("xtransformers_loss", "lucidrains/x-transformers x_transformers/autoregressive_wrapper.py AutoregressiveWrapper.forward (inp, target = x[:, :-1], x[:, 1:]; F.cross_entropy(rearrange(logits, 'b n c -> b c n'), target, ignore_index=ignore_index), written out with logsumexp and gather)", "lm_loss", r'''
def lm_loss(logits, targets, pad_id=None):
    """Mean next-token cross-entropy: logits (B, T, V) from tokens targets (B, T) -> a 0-dim tensor.

    Position t's logits predict targets[:, t + 1]. Positions whose target is pad_id do not count.
    """
    ignore_index = -100 if pad_id is None else pad_id      # AutoregressiveWrapper(ignore_index = -100)
    target = targets[:, 1:]                                # inp, target = x[:, :-1], x[:, 1:]
    logits = logits[:, :-1]                                # what the net computed from inp
    # F.cross_entropy(..., ignore_index=ignore_index): mean of -log p(target) over the targets that count
    log_probs = logits - logits.logsumexp(dim=-1, keepdim=True)
    keep = target != ignore_index
    nll = -log_probs.gather(-1, target.masked_fill(~keep, 0).unsqueeze(-1)).squeeze(-1)
    return nll[keep].sum() / keep.sum()
'''),

    Port("litgpt_chunked_ce", "Lightning-AI/litgpt litgpt/utils.py chunked_cross_entropy (chunk_size=128, reduction='none' per chunk, sum / non_masked_elems.maximum(1)) called as chunked_cross_entropy(logits[..., :-1, :], targets[..., 1:]) in litgpt/finetune", "lm_loss", r'''
def lm_loss(logits, targets, pad_id=None):
    """Mean next-token cross-entropy: logits (B, T, V) from tokens targets (B, T) -> a 0-dim tensor.

    Position t's logits predict targets[:, t + 1]. Positions whose target is pad_id do not count.
    """
    ignore_index = -100 if pad_id is None else pad_id
    # shift the targets such that output n predicts token n+1
    logits, targets = logits[..., :-1, :], targets[..., 1:]
    logits = logits.reshape(-1, logits.size(-1))
    targets = targets.reshape(-1)
    chunk_size = 128
    # lm_head wasn't chunked, chunk cross entropy
    logit_chunks = logits.split(chunk_size)
    target_chunks = targets.split(chunk_size)
    loss_chunks = []
    for logit_chunk, target_chunk in zip(logit_chunks, target_chunks):
        # cross_entropy(logit_chunk, target_chunk, ignore_index=ignore_index, reduction="none")
        masked = target_chunk == ignore_index
        log_probs = logit_chunk - logit_chunk.logsumexp(dim=-1, keepdim=True)
        nll = -log_probs.gather(-1, target_chunk.masked_fill(masked, 0)[:, None]).squeeze(-1)
        loss_chunks.append(nll.masked_fill(masked, 0.0))
    non_masked_elems = (targets != ignore_index).sum()
    return torch.cat(loss_chunks).sum() / non_masked_elems.maximum(torch.ones_like(non_masked_elems))
'''),

    Port("hf_gpt2_lm_loss", "huggingface/transformers src/transformers/models/gpt2/modeling_gpt2.py GPT2LMHeadModel.forward before the loss_function refactor (shift_logits = lm_logits[..., :-1, :]; shift_labels = labels[..., 1:]; CrossEntropyLoss(), whose ignore_index is -100)", "lm_loss", r'''
def lm_loss(logits, targets, pad_id=None):
    """Mean next-token cross-entropy: logits (B, T, V) from tokens targets (B, T) -> a 0-dim tensor.

    Position t's logits predict targets[:, t + 1]. Positions whose target is pad_id do not count.
    """
    # Shift so that tokens < n predict n
    shift_logits = logits[..., :-1, :].contiguous()
    shift_labels = targets[..., 1:].contiguous()
    # Flatten the tokens: CrossEntropyLoss() (ignore_index=-100, reduction="mean"), written out
    shift_logits = shift_logits.view(-1, shift_logits.size(-1))
    shift_labels = shift_labels.view(-1)
    keep = shift_labels != -100
    log_probs = shift_logits - shift_logits.logsumexp(dim=-1, keepdim=True)
    nll = -log_probs.gather(-1, shift_labels.masked_fill(~keep, 0)[:, None]).squeeze(-1)
    return nll[keep].mean()
''', breach="padding is left out only where the label is -100 (CrossEntropyLoss's ignore_index); pad_id is never looked at, so pad targets count in the mean",
         names=("pad", "-100", "ignore_index", "ignored")),

    Port("nanogpt_loss", "karpathy/nanoGPT model.py GPT.forward with targets (F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1); the shift is made by get_batch in train.py, y = data[i+1:i+1+block_size])", "lm_loss", r'''
def lm_loss(logits, targets, pad_id=None):
    """Mean next-token cross-entropy: logits (B, T, V) from tokens targets (B, T) -> a 0-dim tensor.

    Position t's logits predict targets[:, t + 1]. Positions whose target is pad_id do not count.
    """
    ignore_index = -1 if pad_id is None else pad_id
    # if we are given some desired targets also calculate the loss
    logits = logits.view(-1, logits.size(-1))
    targets = targets.view(-1)
    keep = targets != ignore_index
    log_probs = logits - logits.logsumexp(dim=-1, keepdim=True)
    nll = -log_probs.gather(-1, targets.masked_fill(~keep, 0)[:, None]).squeeze(-1)
    return nll[keep].mean()
''', breach="no shift: position t is scored against token t itself (nanoGPT's loader passes targets already shifted), not against token t + 1",
         names=("shift", "t + 1", "t+1", "next token", "itself", "targets[:, 1:]")),

    Port("keras_causal_lm_loss", "keras-team/keras-hub keras_hub/src/models/causal_lm_preprocessor.py (y, sample_weight = token_ids[..., 1:], padding_mask[..., 1:]) with CausalLM.compile's SparseCategoricalCrossentropy(from_logits=True) and keras/src/losses/loss.py reduce_values, reduction 'sum_over_batch_size'", "lm_loss", r'''
def lm_loss(logits, targets, pad_id=None):
    """Mean next-token cross-entropy: logits (B, T, V) from tokens targets (B, T) -> a 0-dim tensor.

    Position t's logits predict targets[:, t + 1]. Positions whose target is pad_id do not count.
    """
    padding_mask = torch.ones_like(targets, dtype=torch.bool) if pad_id is None else targets != pad_id
    # CausalLMPreprocessor: x = token_ids[..., :-1], y = token_ids[..., 1:], sample_weight = padding_mask[..., 1:]
    y, sample_weight = targets[..., 1:], padding_mask[..., 1:]
    logits = logits[..., :-1, :]
    # SparseCategoricalCrossentropy(from_logits=True): one loss per position
    losses = -(logits - logits.logsumexp(dim=-1, keepdim=True)).gather(-1, y.unsqueeze(-1)).squeeze(-1)
    # reduce_weighted_values: values * sample_weight, then reduce_values("sum_over_batch_size")
    values = losses * sample_weight.to(losses.dtype)
    loss = values.sum()
    divisor = torch.tensor(values.shape).prod().to(loss.dtype)
    return loss / divisor
''', breach="Keras' 'sum_over_batch_size' divides the pad-weighted sum by all B*(T-1) positions, not by the number of non-pad targets, so padding still lowers the mean",
         names=("denominator", "divid", "all positions", "non-pad", "number of", "count")),

    # ------------------------------------------------------------------ sample_next
    Port("vllm_sampler", "vllm-project/vllm vllm/model_executor/layers/sampler.py (v0): logits.div_(temperatures), _apply_top_k_top_p (ascending sort, top_k_mask = logits_sort < kth, top_p_mask = probs_sum <= 1 - p, top_p_mask[:, -1] = False, scatter back), _multinomial (probs.div_(q.exponential_(generator=seq_group.generator)).argmax), greedy when temperature < _SAMPLING_EPS", "sample_next", r'''
def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """logits (B, V) -> token ids (B,) int64: argmax at temperature 0; else logits / temperature, top-k,
    then top-p on what is left, then one draw per row from the softmax (with generator)."""
    _SAMPLING_EPS = 1e-5
    if temperature < _SAMPLING_EPS:                       # SamplingType.GREEDY
        return torch.argmax(logits, dim=-1)
    batch, vocab_size = logits.shape
    # SamplingTensors: top_k = -1 means the whole vocabulary, else min(top_k, vocab_size); top_p = 1.0 is off
    k = torch.full((batch,), vocab_size if top_k is None else min(top_k, vocab_size), device=logits.device)
    p = torch.full((batch,), 1.0 if top_p is None else top_p, dtype=logits.dtype, device=logits.device)
    # Apply temperature scaling.
    logits = logits / temperature
    if top_k is not None or top_p is not None:
        logits_sort, logits_idx = logits.sort(dim=-1, descending=False)
        # Apply top-k.
        top_k_mask = logits_sort.size(1) - k.to(torch.long)
        # Get all the top_k values.
        top_k_mask = logits_sort.gather(1, top_k_mask.unsqueeze(dim=1))
        top_k_mask = logits_sort < top_k_mask
        logits_sort = logits_sort.masked_fill(top_k_mask, -float("inf"))
        # Apply top-p.
        probs_sort = logits_sort.softmax(dim=-1)
        probs_sum = probs_sort.cumsum(dim=-1)
        top_p_mask = probs_sum <= 1 - p.unsqueeze(dim=1)
        # at least one
        top_p_mask[:, -1] = False
        logits_sort = logits_sort.masked_fill(top_p_mask, -float("inf"))
        # Re-sort the probabilities.
        logits = torch.empty_like(logits_sort).scatter_(dim=-1, index=logits_idx, src=logits_sort)
    probs = torch.softmax(logits, dim=-1, dtype=torch.float)
    # _multinomial: torch.multinomial forces a GPU<->CPU sync, so an exponential race instead
    q = torch.empty_like(probs)
    q.exponential_(generator=generator)
    return probs.div_(q).argmax(dim=1).view(-1, 1).squeeze(-1)
'''),

    Port("hf_flax_warpers", "huggingface/transformers src/transformers/generation/flax_logits_process.py FlaxTemperatureLogitsWarper, FlaxTopKLogitsWarper (lax.top_k, scatter into a -inf row), FlaxTopPLogitsWarper (cumulative_probs < top_p, jnp.roll(score_mask, 1), first always kept) and flax_utils _sample (jax.random.categorical(prng_key, logits): Gumbel-max with the key; the generator stands for the PRNG key)", "sample_next", r'''
def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """logits (B, V) -> token ids (B,) int64: argmax at temperature 0; else logits / temperature, top-k,
    then top-p on what is left, then one draw per row from the softmax (with generator)."""
    if temperature == 0:                                  # do_sample=False: _greedy_search, jnp.argmax
        return torch.argmax(logits, dim=-1)
    filter_value = -float("Inf")
    scores = logits / temperature                         # FlaxTemperatureLogitsWarper
    if top_k is not None and top_k != 0:                  # FlaxTopKLogitsWarper
        batch_size, vocab_size = scores.shape
        next_scores_flat = torch.full((batch_size * vocab_size,), filter_value, dtype=scores.dtype,
                                      device=scores.device)
        topk = min(top_k, scores.shape[-1])  # Safety check
        topk_scores, topk_indices = scores.topk(topk, dim=-1)
        shift = (torch.arange(batch_size, device=scores.device) * vocab_size)[:, None].expand(batch_size, topk).flatten()
        topk_scores_flat = topk_scores.flatten()
        topk_indices_flat = topk_indices.flatten() + shift
        next_scores_flat[topk_indices_flat] = topk_scores_flat
        scores = next_scores_flat.reshape(batch_size, vocab_size)
    if top_p is not None and top_p < 1.0:                 # FlaxTopPLogitsWarper
        topk_scores, topk_indices = scores.topk(scores.shape[-1], dim=-1)
        mask_scores = torch.full_like(scores, filter_value)
        cumulative_probs = topk_scores.softmax(dim=-1).cumsum(dim=-1)
        score_mask = cumulative_probs < top_p
        # include the token that is higher than top_p as well
        score_mask = score_mask.roll(1, dims=-1)
        score_mask[:, 0] = True
        # min tokens to keep
        score_mask[:, :1] = True
        topk_next_scores = torch.where(score_mask, topk_scores, mask_scores)
        scores = torch.empty_like(scores).scatter(-1, topk_indices, topk_next_scores)   # sort_key_val by index
    # jax.random.categorical(prng_key, logits): argmax(logits + gumbel(key))
    tiny = torch.finfo(scores.dtype).tiny
    uniform = torch.rand(scores.shape, generator=generator, dtype=scores.dtype, device=scores.device).clamp_min(tiny)
    gumbel = -torch.log(-torch.log(uniform))
    return torch.argmax(scores + gumbel, dim=-1)
'''),

    Port("openai_gpt2_sample", "openai/gpt-2 src/sample.py top_k_logits and top_p_logits (tf.nn.top_k with no clamp of k; number kept = reduce_sum(cumulative_probs <= p) - 1, at least 0, as the index of the smallest logit kept; -1e10 fill) in sample_sequence (logits / temperature, top_k, top_p, tf.multinomial with the seeded graph, the generator standing for the seed; a greedy branch added for temperature 0, which gpt-2 lacks)", "sample_next", r'''
def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """logits (B, V) -> token ids (B,) int64: argmax at temperature 0; else logits / temperature, top-k,
    then top-p on what is left, then one draw per row from the softmax (with generator)."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = logits / temperature

    def top_k_logits(logits, k):
        if k == 0:
            # no truncation
            return logits
        values, _ = logits.topk(k, dim=-1)
        min_values = values[:, -1, None]
        return torch.where(logits < min_values, torch.ones_like(logits) * -1e10, logits)

    def top_p_logits(logits, p):
        """Nucleus sampling"""
        sorted_logits = logits.sort(dim=-1, descending=True).values
        cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        # number of indices to include
        indices = ((cumulative_probs <= p).int().sum(dim=-1) - 1).clamp_min(0)
        min_values = sorted_logits.gather(-1, indices[:, None])
        return torch.where(logits < min_values, torch.ones_like(logits) * -1e10, logits)

    logits = top_k_logits(logits, k=0 if top_k is None else top_k)
    if top_p is not None:
        logits = top_p_logits(logits, p=top_p)
    samples = torch.multinomial(logits.softmax(dim=-1), num_samples=1, generator=generator)
    return samples.squeeze(-1)
''', breach="top-p keeps only the tokens whose cumulative probability is <= p, so the token that crosses p is dropped (the nucleus falls short of p); also top_k larger than V is not clamped and topk raises",
         names=("cross", "exclud", "reach", "at least p", "smallest set", "larger than")),

    Port("llamacpp_chain", "ggml-org/llama.cpp common/common.h default sampler order (..., TOP_K, TYPICAL_P, TOP_P, MIN_P, XTC, TEMPERATURE) and src/llama-sampling.cpp llama_sampler_top_k_impl, llama_sampler_top_p_apply (softmax over the candidates left; stop at cum_sum >= p, last_idx = i + 1), llama_sampler_temp_impl (temp <= 0 keeps the max), dist with the seeded rng", "sample_next", r'''
def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """logits (B, V) -> token ids (B,) int64: argmax at temperature 0; else logits / temperature, top-k,
    then top-p on what is left, then one draw per row from the softmax (with generator)."""
    cur = logits
    vocab = cur.shape[-1]
    # top-k: k = min(k, size); sort; cur_p->size = k
    if top_k is not None and top_k > 0:
        k = min(top_k, vocab)
        vals, idx = cur.topk(k, dim=-1)
        cur = torch.full_like(cur, float("-inf")).scatter(-1, idx, vals)
    # top-p: softmax over the candidates left, keep up to the first token where cum_sum >= p
    if top_p is not None and top_p < 1.0:
        probs = cur.softmax(dim=-1)
        sorted_p, order = probs.sort(dim=-1, descending=True)
        cum_sum = sorted_p.cumsum(dim=-1)
        last_idx = (cum_sum < top_p).sum(dim=-1, keepdim=True) + 1          # i + 1 of the first cum_sum >= p
        rank = torch.arange(vocab, device=cur.device).expand_as(sorted_p)
        drop_sorted = rank >= last_idx
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        cur = cur.masked_fill(drop, float("-inf"))
    # temperature, last in the chain
    if temperature <= 0:
        # find the token with the highest logit and set the rest to -inf
        best = cur.argmax(dim=-1, keepdim=True)
        cur = torch.full_like(cur, float("-inf")).scatter(-1, best, cur.gather(-1, best))
    else:
        cur = cur / temperature
    # dist: softmax, then std::discrete_distribution with the sampler's rng
    probs = cur.softmax(dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
''', breach="temperature is applied last in the chain, after top-p, so the nucleus is chosen on the untempered probabilities (with top_p and temperature != 1 it keeps the wrong set)",
         names=("temperature", "order", "before top-p", "after top-p", "untempered", "scaled")),

    Port("hf_torch_sample", "huggingface/transformers src/transformers/generation/logits_process.py TemperatureLogitsWarper, TopKLogitsWarper (scores < topk(...)[0][..., -1, None]), TopPLogitsWarper (ascending sort, cumulative_probs <= 1 - top_p, keep the last min_tokens_to_keep, scatter) and generation/utils.py _sample (probs = softmax; next_tokens = torch.multinomial(probs, num_samples=1).squeeze(1))", "sample_next", r'''
def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """logits (B, V) -> token ids (B,) int64: argmax at temperature 0; else logits / temperature, top-k,
    then top-p on what is left, then one draw per row from the softmax (with generator)."""
    if temperature == 0:                                  # do_sample=False: greedy, argmax of the scores
        return torch.argmax(logits, dim=-1)
    filter_value = -float("Inf")
    min_tokens_to_keep = 1
    scores = logits / temperature                         # TemperatureLogitsWarper
    if top_k is not None and top_k != 0:                  # TopKLogitsWarper
        k = min(max(top_k, min_tokens_to_keep), scores.size(-1))  # Safety check
        # Remove all tokens with a probability less than the last token of the top-k
        indices_to_remove = scores < torch.topk(scores, k)[0][..., -1, None]
        scores = scores.masked_fill(indices_to_remove, filter_value)
    if top_p is not None and top_p < 1.0:                 # TopPLogitsWarper
        sorted_logits, sorted_indices = torch.sort(scores, descending=False)
        cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        # Remove tokens with cumulative top_p above the threshold (token with 0 are kept)
        sorted_indices_to_remove = cumulative_probs <= (1 - top_p)
        # Keep at least min_tokens_to_keep
        sorted_indices_to_remove[..., -min_tokens_to_keep:] = 0
        # scatter sorted tensors to original indexing
        indices_to_remove = sorted_indices_to_remove.scatter(1, sorted_indices, sorted_indices_to_remove)
        scores = scores.masked_fill(indices_to_remove, filter_value)
    # _sample: sample
    probs = torch.nn.functional.softmax(scores, dim=-1)
    next_tokens = torch.multinomial(probs, num_samples=1).squeeze(1)
    return next_tokens
''', breach="the draw uses torch's global random state (torch.multinomial without generator=), so the generator given is ignored and draws are not reproducible from it",
         names=("generator", "seed", "reproducib", "global")),

    # ------------------------------------------------------------------ generate
    Port("nanogpt_generate", "karpathy/nanoGPT model.py GPT.generate (idx_cond = idx if idx.size(1) <= block_size else idx[:, -block_size:]; logits, _ = self(idx_cond) on the whole sequence every step; logits[:, -1, :]; torch.cat((idx, idx_next), dim=1)), sampling handed to sample_next", "generate", r'''
@torch.no_grad()
def generate(model, idx, max_new_tokens, **sampling):
    """idx (B, T) int64 -> (B, T + max_new_tokens): the prompt, then tokens chosen by sample_next(**sampling).

    The prompt runs once; then each step runs the newest token only, against every block's cached keys and values.
    """
    for _ in range(max_new_tokens):
        # if the sequence context is growing too long we must crop it at block_size
        idx_cond = idx if idx.size(1) <= model.max_len else idx[:, -model.max_len:]
        # forward the model to get the logits for the index in the sequence
        logits = model(idx_cond)
        # pluck the logits at the final step and choose the next token
        idx_next = sample_next(logits[:, -1, :], **sampling)
        # append sampled index to the running sequence and continue
        idx = torch.cat((idx, idx_next[:, None]), dim=1)
    return idx
''', breach="no key/value cache: every step re-runs the whole sequence so far (and crops it to max_len instead of raising a ValueError)",
         names=("cache", "whole sequence", "re-run", "rerun", "recompute", "every step", "ValueError", "crop")),

    Port("llama_generate", "meta-llama/llama llama/generation.py Llama.generate (total_len = min(params.max_seq_len, max_gen_len + max_prompt_len); forward(tokens[:, prev_pos:cur_pos], prev_pos) from min_prompt_len on) with llama/model.py Attention's cache_k/cache_v and the hstack'ed causal mask; sampling handed to sample_next", "generate", r'''
@torch.no_grad()
def generate(model, idx, max_new_tokens, **sampling):
    """idx (B, T) int64 -> (B, T + max_new_tokens): the prompt, then tokens chosen by sample_next(**sampling).

    The prompt runs once; then each step runs the newest token only, against every block's cached keys and values.
    """
    bsz, prompt_len = idx.shape
    assert prompt_len <= model.max_len
    total_len = min(model.max_len, max_new_tokens + prompt_len)
    tokens = torch.zeros((bsz, total_len), dtype=torch.long, device=idx.device)
    tokens[:, :prompt_len] = idx
    like = model.tok_emb(idx[:, :1])
    freqs = position_vectors(model, total_len, like)               # the table sliced by start_pos
    head_dim = model.d_model // model.blocks[0].attn.n_heads
    caches = [(like.new_zeros(bsz, b.attn.n_heads, total_len, head_dim),
               like.new_zeros(bsz, b.attn.n_heads, total_len, head_dim)) for b in model.blocks]
    prev_pos = 0
    for cur_pos in range(prompt_len, total_len):
        # Transformer.forward(tokens[:, prev_pos:cur_pos], prev_pos)
        start_pos, seqlen = prev_pos, cur_pos - prev_pos
        h = model.tok_emb(tokens[:, prev_pos:cur_pos]) + freqs[start_pos:start_pos + seqlen]
        mask = None
        if seqlen > 1:
            mask = torch.ones(seqlen, start_pos + seqlen, dtype=torch.bool, device=idx.device).tril(start_pos)
        for block, (cache_k, cache_v) in zip(model.blocks, caches):
            y = block.ln1(h)
            cache_k[:, :, start_pos:start_pos + seqlen] = split_heads(block.attn.w_k(y), block.attn.n_heads)
            cache_v[:, :, start_pos:start_pos + seqlen] = split_heads(block.attn.w_v(y), block.attn.n_heads)
            keys, values = cache_k[:, :, :start_pos + seqlen], cache_v[:, :, :start_pos + seqlen]
            h = h + attend(block.attn, y, keys, values, mask)
            h = h + block.ff(block.ln2(h))
        logits = model.head(model.ln_f(h))
        next_token = sample_next(logits[:, -1], **sampling)
        next_token = next_token.reshape(-1)
        tokens[:, cur_pos] = next_token
        prev_pos = cur_pos
    return tokens
''', breach="total_len = min(max_len, T + max_new_tokens): a request past max_len is silently cut short (returns max_len tokens) instead of raising a ValueError",
         names=("valueerror", "raise", "max_len", "truncat", "silently", "cut short")),

    Port("tinygrad_gpt2_generate", "tinygrad/tinygrad examples/gpt2.py GPT2.generate and Transformer.forward (tokens = toks[:, start_pos:]; wpe(allpos.shrink((start_pos, start_pos+seqlen))); mask full -inf .triu(start_pos+1) only when seqlen > 1; Attention.cache_kv assigned at (start_pos, start_pos+seqlen)); sampling handed to sample_next; the ValueError added, as the project has no length check", "generate", r'''
@torch.no_grad()
def generate(model, idx, max_new_tokens, **sampling):
    """idx (B, T) int64 -> (B, T + max_new_tokens): the prompt, then tokens chosen by sample_next(**sampling).

    The prompt runs once; then each step runs the newest token only, against every block's cached keys and values.
    """
    if idx.shape[1] + max_new_tokens > model.max_len:
        raise ValueError(f"{idx.shape[1]} + {max_new_tokens} tokens do not fit max_len {model.max_len}")
    MAX_CONTEXT = model.max_len
    toks = idx
    start_pos = 0
    cache_kv = [None] * len(model.blocks)
    for _ in range(max_new_tokens):
        tokens = toks[:, start_pos:]
        bsz, seqlen = tokens.shape
        # Transformer.forward(tokens, start_pos)
        tok_emb = model.tok_emb(tokens)
        pos_emb = position_vectors(model, start_pos + seqlen, tok_emb)[start_pos:start_pos + seqlen]
        h = tok_emb + pos_emb
        mask = causal_mask(seqlen, device=idx.device) if seqlen > 1 else None
        for i, block in enumerate(model.blocks):
            attn = block.attn
            x = block.ln1(h)
            xk, xv = split_heads(attn.w_k(x), attn.n_heads), split_heads(attn.w_v(x), attn.n_heads)
            # create kv cache
            if cache_kv[i] is None:
                cache_kv[i] = x.new_zeros(2, bsz, attn.n_heads, MAX_CONTEXT, xk.shape[-1])
            # update the cache
            cache_kv[i][0, :, :, start_pos:start_pos + seqlen] = xk
            cache_kv[i][1, :, :, start_pos:start_pos + seqlen] = xv
            if start_pos > 0:
                keys = cache_kv[i][0, :, :, :start_pos + seqlen]
                values = cache_kv[i][1, :, :, :start_pos + seqlen]
            else:
                keys, values = xk, xv
            h = h + attend(attn, x, keys, values, mask)
            h = h + block.ff(block.ln2(h))
        logits = model.head(model.ln_f(h))[:, -1, :]
        tok = sample_next(logits, **sampling)
        start_pos = toks.shape[1]
        toks = torch.cat([toks, tok[:, None]], dim=1)
    return toks
'''),

    Port("hf_legacy_generate", "huggingface/transformers src/transformers/generation_utils.py (v3) _generate_no_beam_search (while cur_len < max_length; prepare_inputs_for_generation; next_token_logits = outputs[0][:, -1, :]; torch.cat([input_ids, next_token.unsqueeze(-1)])) with GPT2LMHeadModel.prepare_inputs_for_generation ('only last token for inputs_ids if past is defined') and GPT2Attention's past (key = torch.cat((past_key, key), dim=-2)); sampling handed to sample_next; the ValueError added for the course", "generate", r'''
@torch.no_grad()
def generate(model, idx, max_new_tokens, **sampling):
    """idx (B, T) int64 -> (B, T + max_new_tokens): the prompt, then tokens chosen by sample_next(**sampling).

    The prompt runs once; then each step runs the newest token only, against every block's cached keys and values.
    """
    input_ids = idx
    cur_len = input_ids.shape[-1]
    max_length = cur_len + max_new_tokens
    if max_length > model.max_len:
        raise ValueError(f"max_length {max_length} is larger than the model's max_len {model.max_len}")
    past = None
    while cur_len < max_length:
        # prepare_inputs_for_generation: only last token for inputs_ids if past is defined in kwargs
        step_ids = input_ids[:, -1].unsqueeze(-1) if past else input_ids
        past_length = 0 if past is None else past[0][0].size(-2)
        inputs_embeds = model.tok_emb(step_ids)
        position_embeds = position_vectors(model, past_length + step_ids.shape[1], inputs_embeds)[past_length:]
        hidden_states = inputs_embeds + position_embeds
        query_length, key_length = step_ids.shape[1], past_length + step_ids.shape[1]
        causal = causal_mask(key_length, device=idx.device)[key_length - query_length:key_length, :key_length]
        presents = []
        for i, block in enumerate(model.blocks):
            attn = block.attn
            residual = hidden_states
            hidden_states = block.ln1(hidden_states)
            key = split_heads(attn.w_k(hidden_states), attn.n_heads)
            value = split_heads(attn.w_v(hidden_states), attn.n_heads)
            if past is not None:
                past_key, past_value = past[i]
                key = torch.cat((past_key, key), dim=-2)
                value = torch.cat((past_value, value), dim=-2)
            presents.append((key, value))
            hidden_states = attend(attn, hidden_states, key, value, causal) + residual
            residual = hidden_states
            hidden_states = residual + block.ff(block.ln2(hidden_states))
        past = presents
        next_token_logits = model.head(model.ln_f(hidden_states))[:, -1, :]
        next_token = sample_next(next_token_logits, **sampling)
        # add token and increase length by one
        input_ids = torch.cat([input_ids, next_token.unsqueeze(-1)], dim=-1)
        cur_len = cur_len + 1
    return input_ids
'''),
]
