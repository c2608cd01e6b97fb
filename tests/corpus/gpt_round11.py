"""Eleventh held-out set, notebook 10: ports of karpathy/llm.c, graykode/gpt-2-Pytorch, karpathy/ng-video-lecture,
allenai/OLMo, pytorch/torchtune, facebookresearch/fairseq, ml-explore/mlx-examples, huggingface/text-generation-inference,
karpathy/nanochat, google/gemma_pytorch, mistralai/mistral-inference and pytorch-labs/gpt-fast. Four were pieced from stored copies that did not name their repository (mlx-examples' early
length_mask, torchtune's _loss_step, gemma_pytorch's Sampler, TGI's Sampling; their paths were confirmed in the named
repositories); the others were read at their sources. Graded before any change (after the tenth set's diagnoses): all
6 faithful ports kept their marks, all 9 breaches lost points, and 8 were named; the other (nanochat's naive generate:
no cache and no ValueError) met the ValueError first, which generate now asks for in its last part."""
from tests.corpus import Port

ASSIGNMENT = "10_gpt"

PORTS = [
    Port("llmc_gpt", "karpathy/llm.c train_gpt2.py Block.forward and GPT.forward (x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)); tok_emb + pos_emb; ln_f; lm_head bias-free, tied by transformer.wte.weight = lm_head.weight; dropout added where the course's API names it)", "GPT", r'''
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
        x = x + self.dropout(self.attn(h, h, h, mask)[0])
        x = x + self.dropout(self.ff(self.ln2(x)))
        return x


class GPT(nn.Module):
    """Decoder-only language model: idx (B, T) int64, T <= max_len -> logits (B, T, vocab_size)."""

    def __init__(self, vocab_size, d_model=128, n_heads=4, n_layers=4, d_ff=512, max_len=256, dropout=0.1):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.positions = LearnedPositions(max_len, d_model)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)])
        self.ln_f = LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.tok_emb.weight = self.head.weight  # https://paperswithcode.com/method/weight-tying
        self.apply(lm.init_weights)   # given: GPT-2's initialization

    def forward(self, idx):
        b, t = idx.size()
        assert t <= self.max_len, f"Cannot forward sequence of length {t}, block size is only {self.max_len}"
        x = self.dropout(self.positions(self.tok_emb(idx)))
        mask = causal_mask(t, device=idx.device)
        for block in self.blocks:
            x = block(x, mask)
        x = self.ln_f(x)
        return self.head(x)
'''),

    Port("graykode_gpt2", "graykode/gpt-2-Pytorch GPT2/model.py Block.forward, GPT2Model.forward and GPT2LMHead (a = attn(ln_1(x)); x = x + a; m = mlp(ln_2(x)); x = x + m; wte + wpe; ln_f; decoder = Linear(bias=False) with decoder.weight = wte.weight)", "GPT", r'''
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
        a, _ = self.attn(h, h, h, mask)
        x = x + self.dropout(a)
        m = self.ff(self.ln2(x))
        x = x + self.dropout(m)
        return x


class GPT(nn.Module):
    """Decoder-only language model: idx (B, T) int64, T <= max_len -> logits (B, T, vocab_size)."""

    def __init__(self, vocab_size, d_model=128, n_heads=4, n_layers=4, d_ff=512, max_len=256, dropout=0.1):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.positions = LearnedPositions(max_len, d_model)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)])
        self.ln_f = LayerNorm(d_model)
        self.set_embeddings_weights(self.tok_emb.weight)
        self.apply(lm.init_weights)   # given: GPT-2's initialization

    def set_embeddings_weights(self, model_embeddings_weights):
        embed_shape = model_embeddings_weights.shape
        self.head = nn.Linear(embed_shape[1], embed_shape[0], bias=False)
        self.head.weight = model_embeddings_weights  # Tied weights

    def forward(self, idx):
        hidden_states = self.dropout(self.positions(self.tok_emb(idx)))
        mask = causal_mask(idx.size(-1), device=idx.device)
        for block in self.blocks:
            hidden_states = block(hidden_states, mask)
        hidden_states = self.ln_f(hidden_states)
        return self.head(hidden_states)
'''),

    Port("ngvideo_gpt", "karpathy/ng-video-lecture gpt.py Block.forward and BigramLanguageModel (x = x + sa(ln1(x)); x = x + ffwd(ln2(x)); token_embedding_table + position_embedding_table; ln_f; lm_head = nn.Linear(n_embd, vocab_size), its own weight and a bias)", "GPT", r'''
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
        y = self.ln1(x)
        x = x + self.dropout(self.attn(y, y, y, mask)[0])
        x = x + self.dropout(self.ff(self.ln2(x)))
        return x


class GPT(nn.Module):
    """Decoder-only language model: idx (B, T) int64, T <= max_len -> logits (B, T, vocab_size)."""

    def __init__(self, vocab_size, d_model=128, n_heads=4, n_layers=4, d_ff=512, max_len=256, dropout=0.1):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.positions = LearnedPositions(max_len, d_model)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)])
        self.ln_f = LayerNorm(d_model)  # final layer norm
        self.head = nn.Linear(d_model, vocab_size)
        self.apply(lm.init_weights)   # given: GPT-2's initialization

    def forward(self, idx):
        B, T = idx.shape
        x = self.dropout(self.positions(self.tok_emb(idx)))  # (B,T,C)
        mask = causal_mask(T, device=idx.device)
        for block in self.blocks:
            x = block(x, mask)  # (B,T,C)
        x = self.ln_f(x)  # (B,T,C)
        return self.head(x)  # (B,T,vocab_size)
''', breach="the output layer is its own nn.Linear(d_model, vocab_size) with a bias, not tied to tok_emb's weight (and it has a bias), so the model has V*d + V extra parameters and other logits",
         names=("tied", "tie", "bias", "tok_emb")),

    Port("olmo_loss", "allenai/OLMo olmo/train.py Trainer.get_labels and model_forward (labels = input_ids.masked_fill(attention_mask == 0, -100)[..., 1:]; logits[..., :-1, :]; F.cross_entropy(ignore_index=-100, reduction='mean'), written with logsumexp and gather)", "lm_loss", r'''
def lm_loss(logits, targets, pad_id=None):
    """Mean next-token cross-entropy: logits (B, T, V) from tokens targets (B, T) -> a 0-dim tensor."""
    # Labels are just input IDs shifted to the left (first item is ignored).
    labels = targets
    if pad_id is not None:
        attention_mask = (targets != pad_id).float()
        labels = labels.masked_fill(attention_mask == 0.0, -100)
    labels = labels[..., 1:].contiguous()
    logits_for_loss = logits[..., :-1, :].contiguous()
    logits_for_loss = logits_for_loss.view(-1, logits_for_loss.size(-1))
    labels = labels.view(-1)
    # cross_entropy(ignore_index=-100, reduction="mean")
    keep = labels != -100
    log_probs = logits_for_loss - logits_for_loss.logsumexp(dim=-1, keepdim=True)
    nll = -log_probs.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return (nll * keep).sum() / keep.sum()
'''),

    Port("torchtune_loss", "pytorch/torchtune recipes/full_finetune_single_device.py _loss_step (padding_collate_sft pads labels with CROSS_ENTROPY_IGNORE_IDX = -100; labels = torch.hstack((labels[..., 1:], ignore_labels_cache[:B])); loss over all T positions with CrossEntropyLoss(ignore_index=-100), mean over the counted ones)", "lm_loss", r'''
def lm_loss(logits, targets, pad_id=None):
    """Mean next-token cross-entropy: logits (B, T, V) from tokens targets (B, T) -> a 0-dim tensor."""
    ignore_index = -100
    labels = targets if pad_id is None else targets.masked_fill(targets == pad_id, ignore_index)
    ignore_labels_cache = torch.full((labels.shape[0], 1), ignore_index, device=labels.device, dtype=labels.dtype)
    # Shift labels to compute loss
    # equivalent to doing labels[..., 1:] and logits[..., :-1, :]
    # But this way we dont need to slice the logits. We just add an ignore index to labels.
    labels = torch.hstack((labels[..., 1:], ignore_labels_cache[: labels.shape[0]]))
    labels = labels.reshape(-1)
    logits = logits.reshape(-1, logits.size(-1))
    counted = labels != ignore_index
    log_probs = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    picked = log_probs.gather(1, labels.masked_fill(~counted, 0).unsqueeze(1)).squeeze(1)
    return -(picked * counted).sum() / counted.sum()
'''),

    Port("fairseq_loss", "facebookresearch/fairseq fairseq/criterions/cross_entropy.py CrossEntropyCriterion.forward (F.nll_loss(lprobs, target, size_average=False, ignore_index=padding_idx): the summed loss, sample_size = ntokens returned for the trainer to divide by), with the MonolingualDataset's shift", "lm_loss", r'''
def lm_loss(logits, targets, pad_id=None):
    """Mean next-token cross-entropy: logits (B, T, V) from tokens targets (B, T) -> a 0-dim tensor."""
    # the dataset's target is the source shifted by one
    lprobs = logits[:, :-1] - logits[:, :-1].logsumexp(dim=-1, keepdim=True)   # get_normalized_probs(log_probs=True)
    lprobs = lprobs.reshape(-1, lprobs.size(-1))
    target = targets[:, 1:].reshape(-1)
    nll = -lprobs.gather(1, target.unsqueeze(1)).squeeze(1)
    if pad_id is not None:
        nll = nll.masked_fill(target == pad_id, 0.0)     # ignore_index=self.padding_idx
    loss = nll.sum()                                      # size_average=False
    return loss
''', breach="returns the summed loss over the counted positions (fairseq's size_average=False; the trainer divides by sample_size later), not the mean: the loss grows with batch size and length",
         names=("sum", "mean", "divide", "average")),

    Port("mlx_lora_loss", "ml-explore/mlx-examples lora/lora.py loss and iterate_batches, early version (batch[:, :-1], batch[:, 1:], lengths = the full token count; length_mask = arange(inputs.shape[1]) < lengths; ce * length_mask summed / length_mask.sum())", "lm_loss", r'''
def lm_loss(logits, targets, pad_id=None):
    """Mean next-token cross-entropy: logits (B, T, V) from tokens targets (B, T) -> a 0-dim tensor."""
    # iterate_batches: yield batch[:, :-1], batch[:, 1:], lengths
    inputs_logits, labels = logits[:, :-1], targets[:, 1:]
    if pad_id is None:
        lengths = torch.full((targets.shape[0],), targets.shape[1], device=targets.device)
    else:
        lengths = (targets != pad_id).sum(dim=1)          # len(x) of each unpadded sequence
    # Mask padding tokens
    length_mask = torch.arange(inputs_logits.shape[1], device=targets.device)[None, :] < lengths[:, None]
    # Calculate the loss
    log_probs = inputs_logits - inputs_logits.logsumexp(dim=-1, keepdim=True)
    ce = -log_probs.gather(-1, labels.unsqueeze(-1)).squeeze(-1) * length_mask
    ntoks = length_mask.sum()
    return ce.sum() / ntoks
''', breach="the length mask keeps input positions t < length, so the last real token, whose target is the first pad, still counts (one pad target per padded row enters the mean); the mask is on positions by length, not on targets equal to pad_id",
         names=("pad", "off-by-one", "length", "last")),

    Port("tgi_sampling", "huggingface/text-generation-inference server/text_generation_server/utils/tokens.py Sampling and StaticWarper (warpers in order TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper; Greedy = argmax; Sampling draws torch.multinomial(probs, num_samples=1, generator=self.generator))", "sample_next", r'''
def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """logits (B, V) -> token ids (B,) int64."""
    if temperature == 0:                                   # Greedy
        return logits.argmax(dim=-1)
    scores = logits
    if temperature is not None and temperature != 1.0:    # TemperatureLogitsWarper
        scores = scores / float(temperature)
    if top_k is not None and top_k != 0:                   # TopKLogitsWarper
        k = min(top_k, scores.size(-1))
        indices_to_remove = scores < torch.topk(scores, k)[0][..., -1, None]
        scores = scores.masked_fill(indices_to_remove, -float("Inf"))
    if top_p is not None and top_p < 1.0:                  # TopPLogitsWarper
        sorted_logits, sorted_indices = torch.sort(scores, descending=False)
        cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        sorted_indices_to_remove = cumulative_probs <= (1 - top_p)
        sorted_indices_to_remove[..., -1:] = 0             # min_tokens_to_keep = 1
        indices_to_remove = sorted_indices_to_remove.scatter(1, sorted_indices, sorted_indices_to_remove)
        scores = scores.masked_fill(indices_to_remove, -float("Inf"))
    probs = torch.nn.functional.softmax(scores, -1)        # Sampling
    next_tokens = torch.multinomial(probs, num_samples=1, generator=generator)
    return next_tokens.squeeze(-1)
'''),

    Port("nanochat_sample", "karpathy/nanochat nanochat/engine.py sample_next_token(logits, rng, temperature, top_k) (argmax at temperature 0; top-k by torch.topk then softmax(vals / temperature) and multinomial(generator=rng) gathered back; no top-p)", "sample_next", r'''
def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """logits (B, V) -> token ids (B,) int64."""
    assert temperature >= 0.0, "temperature must be non-negative"
    rng = generator
    if temperature == 0.0:
        return torch.argmax(logits, dim=-1, keepdim=True).squeeze(-1)
    if top_k is not None:
        k = min(top_k, logits.size(-1))
        vals, idx = torch.topk(logits, k, dim=-1)
        vals = vals / temperature
        probs = F.softmax(vals, dim=-1)
        choice = torch.multinomial(probs, num_samples=1, generator=rng)
        return idx.gather(1, choice).squeeze(-1)
    else:
        logits = logits / temperature
        probs = F.softmax(logits, dim=-1)
        return torch.multinomial(probs, num_samples=1, generator=rng).squeeze(-1)
''', breach="top_p is never applied (nanochat's sampler has only temperature and top-k), so top-p sampling draws from the whole (or top-k) distribution",
         names=("top_p", "top-p", "nucleus", "ignored")),

    Port("gemma_sampler", "google/gemma_pytorch gemma/model.py Sampler.forward (logits.div_(temperatures); probs sorted descending; top_ps_mask = (probs_sum - probs_sort) > top_p on the full distribution, then top_ks_mask = arange >= top_k; renormalize; torch.multinomial(probs, 1, replacement=True) without a generator)", "sample_next", r'''
def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """logits (B, V) -> token ids (B,) int64."""
    if temperature == 0:
        return torch.argmax(logits, dim=-1)
    top_ps = torch.full((logits.shape[0],), 1.0 if top_p is None else float(top_p), device=logits.device)
    top_ks = torch.full((logits.shape[0],), logits.shape[-1] if top_k is None else int(top_k), device=logits.device)
    # Apply temperature scaling.
    logits = logits / temperature
    # Calculate probabilities with softmax.
    probs = torch.softmax(logits, dim=-1, dtype=torch.float)
    probs_sort, probs_idx = torch.sort(probs, dim=-1, descending=True)
    # Apply top-p, top-k.
    probs_sum = torch.cumsum(probs_sort, dim=-1)
    top_ps_mask = (probs_sum - probs_sort) > top_ps.unsqueeze(dim=1)
    probs_sort = torch.where(top_ps_mask, 0, probs_sort)
    top_ks_mask = torch.arange(probs_idx.shape[-1], device=probs_idx.device)
    top_ks_mask = top_ks_mask.expand(probs_idx.shape[0], -1)
    top_ks_mask = top_ks_mask >= top_ks.unsqueeze(dim=1)
    probs_sort = torch.where(top_ks_mask, 0, probs_sort)
    # Re-normalization.
    probs_sort = probs_sort / probs_sort.sum(dim=-1, keepdim=True)
    probs = torch.gather(probs_sort, dim=-1, index=torch.argsort(probs_idx, dim=-1))
    next_token_ids = torch.multinomial(probs, num_samples=1, replacement=True).squeeze(dim=-1)
    return next_token_ids
''', breach="top-p is computed on the full softmax before top-k (then top-k cuts), not on what top-k kept, so with both the nucleus can keep more tokens than the contract's; the draw also ignores the generator (global RNG)",
         names=("order", "before", "renormal", "top-k", "generator")),

    Port("mistral_sample", "mistralai/mistral-inference src/mistral_inference/generate.py sample and sample_top_p (argmax when temperature <= 0; probs = softmax(logits / temperature); mask = probs_sum - probs_sort > p; renormalize; torch.multinomial(probs_sort, 1) without a generator; no top-k)", "sample_next", r'''
def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """logits (B, V) -> token ids (B,) int64."""
    def sample_top_p(probs, p):
        assert 0 <= p <= 1
        probs_sort, probs_idx = torch.sort(probs, dim=-1, descending=True)
        probs_sum = torch.cumsum(probs_sort, dim=-1)
        mask = probs_sum - probs_sort > p
        probs_sort[mask] = 0.0
        probs_sort.div_(probs_sort.sum(dim=-1, keepdim=True))
        next_token = torch.multinomial(probs_sort, num_samples=1)
        return torch.gather(probs_idx, -1, next_token)

    if temperature > 0:
        probs = torch.softmax(logits / temperature, dim=-1)
        next_token = sample_top_p(probs, 1.0 if top_p is None else top_p)
    else:
        next_token = torch.argmax(logits, dim=-1).unsqueeze(0)
    return next_token.reshape(-1)
''', breach="top_k is never applied (mistral-inference samples with temperature and top-p only), and the draw uses the global RNG, not the generator given",
         names=("top_k", "top-k", "generator", "ignored")),

    Port("nanochat_engine_generate", "karpathy/nanochat nanochat/engine.py Engine.generate with KVCache (prefill the prompt once into a cache of len(tokens) + max_tokens, sample from logits[:, -1, :], then forward only the newest token per step until num_generated == max_tokens)", "generate", r'''
@torch.no_grad()
def generate(model, idx, max_new_tokens, **sampling):
    """idx (B, T) int64 -> (B, T + max_new_tokens)."""
    t = idx.shape[1]
    kv_length_hint = t + max_new_tokens
    x = model.tok_emb(idx)
    positions = position_vectors(model, kv_length_hint, x)     # the table for every position the cache will hold
    b, _, d = x.shape
    caches = []
    for block in model.blocks:
        h = block.attn.n_heads
        caches.append([x.new_zeros(b, h, kv_length_hint, d // h), x.new_zeros(b, h, kv_length_hint, d // h)])
    pos = 0

    def forward(ids_emb, T0, mask):
        y = ids_emb
        n = y.shape[1]
        for block, (k_cache, v_cache) in zip(model.blocks, caches):
            z = block.ln1(y)
            k_cache[:, :, T0:T0 + n] = split_heads(block.attn.w_k(z), block.attn.n_heads)
            v_cache[:, :, T0:T0 + n] = split_heads(block.attn.w_v(z), block.attn.n_heads)
            y = y + attend(block.attn, z, k_cache[:, :, :T0 + n], v_cache[:, :, :T0 + n], mask)
            y = y + block.ff(block.ln2(y))
        return model.head(model.ln_f(y))

    # 1) prefill of the prompt tokens
    logits = forward(x + positions[:t], 0, causal_mask(t, device=idx.device))
    pos = t
    logits = logits[:, -1, :]
    next_ids = sample_next(logits, **sampling)
    out = [idx]
    num_generated = 0
    first_iteration = True
    while True:
        if num_generated >= max_new_tokens:
            break
        if first_iteration:
            first_iteration = False
        else:
            logits = forward(model.tok_emb(ids) + positions[pos], pos, None)
            pos += 1
            logits = logits[:, -1, :]
            next_ids = sample_next(logits, **sampling)
        out.append(next_ids[:, None])
        num_generated += 1
        ids = next_ids[:, None]
    return torch.cat(out, dim=1)
'''),

    Port("gptfast_generate", "pytorch-labs/gpt-fast generate.py generate, prefill and decode_n_tokens (T_new = T + max_new_tokens; max_seq_length = min(T_new, block_size); setup_caches(max_seq_length); prefill samples the first token, decode_n_tokens the other max_new_tokens - 1 one at a time with input_pos += 1)", "generate", r'''
@torch.no_grad()
def generate(model, idx, max_new_tokens, **sampling):
    """idx (B, T) int64 -> (B, T + max_new_tokens)."""
    T = idx.size(1)
    T_new = T + max_new_tokens
    max_seq_length = min(T_new, model.max_len)
    if max_new_tokens == 0:
        return idx
    # setup_caches(max_batch_size, max_seq_length)
    x = model.tok_emb(idx)
    freqs = position_vectors(model, max_seq_length, x)
    b, _, d = x.shape
    caches = [(x.new_zeros(b, blk.attn.n_heads, max_seq_length, d // blk.attn.n_heads),
               x.new_zeros(b, blk.attn.n_heads, max_seq_length, d // blk.attn.n_heads)) for blk in model.blocks]

    def model_forward(tokens_emb, input_pos, mask):
        h = tokens_emb + freqs[input_pos]
        for blk, (k_cache, v_cache) in zip(model.blocks, caches):
            z = blk.ln1(h)
            k_cache[:, :, input_pos] = split_heads(blk.attn.w_k(z), blk.attn.n_heads)
            v_cache[:, :, input_pos] = split_heads(blk.attn.w_v(z), blk.attn.n_heads)
            end = int(input_pos[-1]) + 1
            h = h + attend(blk.attn, z, k_cache[:, :, :end], v_cache[:, :, :end], mask)
            h = h + blk.ff(blk.ln2(h))
        return model.head(model.ln_f(h))

    def prefill(x, input_pos):
        logits = model_forward(model.tok_emb(x), input_pos, causal_mask(len(input_pos), device=x.device))
        return sample_next(logits[:, -1], **sampling)

    def decode_n_tokens(cur_token, input_pos, num_new_tokens):
        new_tokens = []
        for i in range(num_new_tokens):
            logits = model_forward(model.tok_emb(cur_token), input_pos, None)
            next_token = sample_next(logits[:, -1], **sampling)
            input_pos += 1
            new_tokens.append(next_token.clone())
            cur_token = next_token.view(-1, 1)
        return new_tokens

    seq = torch.empty(b, T_new, dtype=idx.dtype, device=idx.device)
    seq[:, :T] = idx
    input_pos = torch.arange(0, T, device=idx.device)
    next_token = prefill(idx, input_pos)
    seq[:, T] = next_token
    input_pos = torch.tensor([T], device=idx.device)
    generated_tokens = decode_n_tokens(next_token.view(-1, 1), input_pos, max_new_tokens - 1)
    if generated_tokens:
        seq[:, T + 1:] = torch.stack(generated_tokens, dim=1)
    return seq
''', breach="no length check: max_seq_length = min(T + max_new_tokens, max_len) silently sizes the cache and position table to max_len, so T + max_new_tokens = max_len + 1 returns max_len + 1 tokens and longer requests fail midway with an IndexError, never a ValueError up front",
         names=("ValueError", "max_len", "length", "raise")),

    Port("mistral_generate", "mistralai/mistral-inference src/mistral_inference/generate.py generate (cache_window = max(seqlens) + max_tokens; prompt forwarded once, last_token_prelogits; each step next_token = sample(last_token_prelogits, temperature=temperature, top_p=0.8), then model.forward(next_token, seqlens=[1]*B, cache))", "generate", r'''
@torch.no_grad()
def generate(model, idx, max_new_tokens, **sampling):
    """idx (B, T) int64 -> (B, T + max_new_tokens)."""
    temperature = sampling.get("temperature", 1.0)
    B, T = idx.shape
    cache_window = T + max_new_tokens
    x = model.tok_emb(idx)
    positions = position_vectors(model, cache_window, x)
    d = x.shape[-1]
    cache = [[x.new_zeros(B, blk.attn.n_heads, cache_window, d // blk.attn.n_heads) for _ in range(2)]
             for blk in model.blocks]

    def forward(emb, start, mask):
        h, n = emb, emb.shape[1]
        for blk, (k, v) in zip(model.blocks, cache):
            z = blk.ln1(h)
            k[:, :, start:start + n] = split_heads(blk.attn.w_k(z), blk.attn.n_heads)
            v[:, :, start:start + n] = split_heads(blk.attn.w_v(z), blk.attn.n_heads)
            h = h + attend(blk.attn, z, k[:, :, :start + n], v[:, :, :start + n], mask)
            h = h + blk.ff(blk.ln2(h))
        return model.head(model.ln_f(h))

    # Encode prompt (one chunk)
    prelogits = forward(x + positions[:T], 0, causal_mask(T, device=idx.device))
    last_token_prelogits = prelogits[:, -1]
    generated_tensors = []
    for step in range(max_new_tokens):
        if step > 0:
            last_token_prelogits = forward(model.tok_emb(next_token[:, None]) + positions[T + step - 1], T + step - 1, None)[:, -1]
        next_token = sample_next(last_token_prelogits, temperature=temperature, top_p=0.8)
        generated_tensors.append(next_token[:, None])
    return torch.cat([idx] + generated_tensors, dim=1)
''', breach="the sampling arguments are not passed on: sample_next always gets top_p=0.8 (mistral-inference hard-codes it) and only the temperature, so top_k and the generator are dropped and a caller's top_p is replaced",
         names=("top_p", "0.8", "sampling", "generator", "pass")),

    Port("nanochat_naive_generate", "karpathy/nanochat nanochat/gpt.py GPT.generate (naive streaming inference: for each new token, logits = self.forward(ids) on the whole sequence, logits[:, -1, :], top-k and temperature, ids = torch.cat((ids, next_ids)); no KV cache)", "generate", r'''
@torch.no_grad()
def generate(model, idx, max_new_tokens, **sampling):
    """idx (B, T) int64 -> (B, T + max_new_tokens)."""
    ids = idx
    for _ in range(max_new_tokens):
        logits = model(ids)  # (B, T, vocab_size)
        logits = logits[:, -1, :]  # (B, vocab_size)
        next_ids = sample_next(logits, **sampling)
        ids = torch.cat((ids, next_ids[:, None]), dim=1)
    return ids
''', breach="no key/value cache: every step runs the whole sequence so far through the model (the prompt is re-run max_new_tokens times), instead of the prompt once and then only the newest token (and no ValueError when T + max_new_tokens = max_len + 1)",
         names=("cache", "whole sequence", "newest", "every step")),
]
