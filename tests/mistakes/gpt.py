"""Mistake catalogue of notebook 10 (a GPT)."""
from . import Alternative, Mistake

ASSIGNMENT = "10_gpt"


def patched(code, replace):
    """``code`` with some lines changed: ``replace`` holds (old, new) pairs."""
    for old, new in replace:
        assert old in code, old
        code = code.replace(old, new)
    return code


# --- GPT: the cell holds Block (its __init__ given by the notebook) and GPT ---

BLOCK_INIT = '''
class Block(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1):
        super().__init__()
        self.ln1 = LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ln2 = LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.dropout = nn.Dropout(dropout)
'''

BLOCK_FORWARD = '''
    def forward(self, x, mask=None):
        h = self.ln1(x)
        x = x + self.dropout(self.attn(h, h, h, mask)[0])
        x = x + self.dropout(self.ff(self.ln2(x)))
        return x
'''

GPT_INIT = '''
class GPT(nn.Module):
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
        self.apply(lm.init_weights)
'''

GPT_FORWARD = '''
    def forward(self, idx):
        T = idx.shape[1]
        x = self.dropout(self.positions(self.tok_emb(idx)))
        mask = causal_mask(T, device=idx.device)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.ln_f(x))
'''


def gpt(*replace):
    """The answer cell (Block and GPT) with some lines changed."""
    return patched(BLOCK_INIT + BLOCK_FORWARD + GPT_INIT + GPT_FORWARD, replace)


# --- lm_loss, in parts ---

LOSS = dict(
    head='''
def lm_loss(logits, targets, pad_id=None):
''',
    shift='''    logits, targets = logits[:, :-1], targets[:, 1:]
''',
    log_probs='''    log_probs = logits - logits.logsumexp(dim=-1, keepdim=True)
''',
    nll='''    nll = -log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
''',
    reduce='''    if pad_id is None:
        return nll.mean()
    keep = targets != pad_id
    return nll[keep].mean()
''',
)


def loss(**parts):
    return "".join(parts.get(name, code) for name, code in LOSS.items())


# --- sample_next, in parts (``order`` rearranges them) ---

SAMPLE = dict(
    head='''
def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
''',
    greedy='''    if temperature == 0:
        return logits.argmax(dim=-1)
''',
    temperature='''    logits = logits / temperature
''',
    top_k='''    if top_k is not None:
        kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
''',
    top_p='''    if top_p is not None:
        probs = logits.softmax(dim=-1)
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        cum = sorted_probs.cumsum(dim=-1)
        drop_sorted = cum - sorted_probs >= top_p
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
''',
    draw='''    probs = logits.softmax(dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
''',
)


def sample(order=tuple(SAMPLE), **parts):
    return "".join(parts.get(name, SAMPLE[name]) for name in order)


# --- generate, in parts: a cache of lists of keys and values per block, a step function over the blocks ---

GENERATE = dict(
    head='''
@torch.no_grad()
def generate(model, idx, max_new_tokens, **sampling):
    B, T = idx.shape
    if T + max_new_tokens > model.max_len:
        raise ValueError(f"{T} + {max_new_tokens} tokens are more than max_len = {model.max_len}")
    if max_new_tokens == 0:
        return idx
    table = position_vectors(model, T + max_new_tokens, model.tok_emb(idx))
    keys = [[] for _ in model.blocks]
    values = [[] for _ in model.blocks]
''',
    step='''
    def step(x, mask):
        for i, block in enumerate(model.blocks):
            y = block.ln1(x)
            keys[i].append(split_heads(block.attn.w_k(y), block.attn.n_heads))
            values[i].append(split_heads(block.attn.w_v(y), block.attn.n_heads))
            x = x + attend(block.attn, y, torch.cat(keys[i], dim=2), torch.cat(values[i], dim=2), mask)
            x = x + block.ff(block.ln2(x))
        return model.head(model.ln_f(x[:, -1]))
''',
    prompt='''
    logits = step(model.tok_emb(idx) + table[:T], causal_mask(T, device=idx.device))
''',
    loop='''    out = idx
    for s in range(max_new_tokens):
        token = sample_next(logits, **sampling)
        out = torch.cat([out, token[:, None]], dim=1)
        if s < max_new_tokens - 1:
            logits = step(model.tok_emb(token[:, None]) + table[T + s], None)
''',
    end='''    return out
''',
)


def generate(*replace, **parts):
    return patched("".join(parts.get(name, code) for name, code in GENERATE.items()), replace)


GPT_ALL = ("GPT_parts", "GPT_matches", "GPT_causal")
LOSS_ALL = ("lm_loss_values", "lm_loss_pad")
SAMPLED = ("sample_next_temperature", "sample_next_top_k", "sample_next_top_p")
GEN_ALL = ("generate_greedy", "generate_cache", "generate_sampling")

MISTAKES = [
    # --- GPT ---
    Mistake("GPT with post-norm blocks", "GPT", gpt((BLOCK_FORWARD, '''
    def forward(self, x, mask=None):
        x = self.ln1(x + self.dropout(self.attn(x, x, x, mask)[0]))
        return self.ln2(x + self.dropout(self.ff(x)))
''')), ("GPT_matches",), "post-norm"),
    Mistake("GPT without the final LayerNorm", "GPT", gpt(("return self.head(self.ln_f(x))", "return self.head(x)")),
            ("GPT_matches",), "ln_f is missing"),
    Mistake("GPT leaving ln_f out of the model", "GPT", gpt(("        self.ln_f = LayerNorm(d_model)\n", ""),
                                                            ("return self.head(self.ln_f(x))", "return self.head(x)")),
            ("GPT_parts",), "has no `ln_f`", also=("GPT_matches",)),
    Mistake("GPT with an untied output layer", "GPT", gpt(("        self.head.weight = self.tok_emb.weight\n", "")),
            ("GPT_parts",), "a weight of its own", also=("GPT_matches",)),
    Mistake("GPT tying by copying the embedding's weight", "GPT", gpt((
        "self.head.weight = self.tok_emb.weight", "self.head.weight = nn.Parameter(self.tok_emb.weight.clone())")),
            ("GPT_parts",), "a weight of its own", also=("GPT_matches",)),
    Mistake("GPT with a bias in the output layer", "GPT", gpt((
        "nn.Linear(d_model, vocab_size, bias=False)", "nn.Linear(d_model, vocab_size)")),
            ("GPT_parts",), "has a bias", also=("GPT_matches",)),
    Mistake("GPT without the causal mask", "GPT", gpt(("x = block(x, mask)", "x = block(x)")),
            ("GPT_matches", "GPT_causal"), "not causal", elsewhere="sees the future"),
    Mistake("GPT with the causal mask inverted", "GPT", gpt((
        "mask = causal_mask(T, device=idx.device)", "mask = ~causal_mask(T, device=idx.device)")),
            ("GPT_matches", "GPT_causal"), "inverted", elsewhere="True = may attend"),
    Mistake("GPT with a float causal mask", "GPT", gpt((
        "mask = causal_mask(T, device=idx.device)", "mask = torch.tril(torch.ones(T, T))")),
            ("GPT_matches", "GPT_causal"), "must be a bool tensor"),
    Mistake("GPT with ReLU in the feed-forward", "GPT", gpt(("nn.GELU()", "nn.ReLU()")), ("GPT_matches",), "ReLU"),
    Mistake("GPT with GELU's tanh approximation", "GPT", gpt(("nn.GELU()", 'nn.GELU(approximate="tanh")')),
            ("GPT_matches",), "tanh approximation"),
    Mistake("GPT without position vectors", "GPT", gpt((
        "x = self.dropout(self.positions(self.tok_emb(idx)))", "x = self.dropout(self.tok_emb(idx))")),
            ("GPT_matches",), "no position vectors"),
    Mistake("GPT scaling the embeddings by sqrt(d_model)", "GPT", gpt((
        "x = self.dropout(self.positions(self.tok_emb(idx)))",
        "x = self.dropout(self.positions(self.tok_emb(idx) * math.sqrt(self.d_model)))")),
            ("GPT_matches",), "sqrt(d_model)"),
    Mistake("GPT blocks without residual connections", "GPT", gpt(
        ("x = x + self.dropout(self.attn(h, h, h, mask)[0])", "x = self.dropout(self.attn(h, h, h, mask)[0])"),
        ("x = x + self.dropout(self.ff(self.ln2(x)))", "x = self.dropout(self.ff(self.ln2(x)))")),
            ("GPT_matches",), "no residual connection"),
    Mistake("GPT blocks using ln1 twice", "GPT", gpt(("self.ff(self.ln2(x))", "self.ff(self.ln1(x))")),
            ("GPT_matches",), "ln1 is used before both"),
    Mistake("GPT with dropout on in eval mode", "GPT", gpt((
        "x = self.dropout(self.positions(self.tok_emb(idx)))",
        "x = F.dropout(self.positions(self.tok_emb(idx)), p=self.dropout.p)")),
            ("GPT_causal",), "dropout must be off"),
    Mistake("GPT not chaining the blocks", "GPT", gpt((
        "            x = block(x, mask)\n        return self.head(self.ln_f(x))",
        "            out = block(x, mask)\n        return self.head(self.ln_f(out))")),
            ("GPT_matches",), "not chained"),
    Mistake("GPT not using the blocks' outputs", "GPT", gpt(("            x = block(x, mask)\n",
                                                             "            block(x, mask)\n")),
            ("GPT_matches",), "outputs are not used"),
    Mistake("GPT keeping the blocks in a Python list", "GPT", gpt((
        "self.blocks = nn.ModuleList([Block(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)])",
        "self.blocks = [Block(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)]")),
            GPT_ALL, "nn.ModuleList"),

    # --- lm_loss ---
    Mistake("lm_loss without the shift", "lm_loss", loss(shift=""), LOSS_ALL, "no shift"),
    Mistake("lm_loss shifting the wrong way", "lm_loss",
            loss(shift='''    logits, targets = logits[:, 1:], targets[:, :-1]
'''), LOSS_ALL, "the shift goes the wrong way"),
    Mistake("lm_loss counting the padding", "lm_loss", loss(reduce='''    return nll.mean()
'''), ("lm_loss_pad",), "padding is not left out"),
    Mistake("lm_loss testing `if pad_id:`", "lm_loss", loss(reduce='''    if not pad_id:
        return nll.mean()
    return nll[targets != pad_id].mean()
'''), ("lm_loss_pad",), "padding is not left out"),
    Mistake("lm_loss reading the padding off the inputs", "lm_loss", loss(shift='''    inputs = targets[:, :-1]
    logits, targets = logits[:, :-1], targets[:, 1:]
''', reduce='''    if pad_id is None:
        return nll.mean()
    return nll[inputs != pad_id].mean()
'''), ("lm_loss_pad",), "read off the inputs"),
    Mistake("lm_loss averaging per sequence", "lm_loss", loss(reduce='''    if pad_id is None:
        return nll.mean()
    keep = (targets != pad_id).float()
    return ((nll * keep).sum(dim=1) / keep.sum(dim=1)).mean()
'''), ("lm_loss_pad",), "a mean per sequence"),
    Mistake("lm_loss zeroing the padding but counting it", "lm_loss", loss(reduce='''    if pad_id is not None:
        nll = nll * (targets != pad_id)
    return nll.mean()
'''), ("lm_loss_pad",), "zeroed but still counted"),
    Mistake("lm_loss summing", "lm_loss", loss(reduce='''    if pad_id is None:
        return nll.sum()
    return nll[targets != pad_id].sum()
'''), LOSS_ALL, "a sum over positions"),
    Mistake("lm_loss dividing by B * T", "lm_loss", loss(head='''
def lm_loss(logits, targets, pad_id=None):
    B, T, V = logits.shape
''', reduce='''    if pad_id is not None:
        return nll[targets != pad_id].mean()
    return nll.sum() / (B * T)
'''), LOSS_ALL, "T - 1 predictions"),
    Mistake("lm_loss as log of softmax", "lm_loss",
            loss(log_probs='''    log_probs = torch.log(torch.softmax(logits, dim=-1))
'''), ("lm_loss_values",), "log(0)"),
    Mistake("lm_loss with a softmax written out", "lm_loss", loss(log_probs='''    e = torch.exp(logits)
    log_probs = torch.log(e / e.sum(dim=-1, keepdim=True))
'''), ("lm_loss_values",), "overflows"),
    Mistake("lm_loss as minus the probability", "lm_loss", loss(log_probs='''    probs = torch.softmax(logits, dim=-1)
''', nll='''    nll = -probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
'''), LOSS_ALL, "-log p"),
    Mistake("lm_loss with pad_id 0 by default", "lm_loss", loss(head='''
def lm_loss(logits, targets, pad_id=0):
''', reduce='''    return nll[targets != pad_id].mean()
'''), LOSS_ALL, "although pad_id=None"),
    Mistake("lm_loss viewing the shifted targets", "lm_loss", loss(nll='''    V = logits.shape[-1]
    nll = -log_probs.view(-1, V).gather(1, targets.view(-1, 1)).view(targets.shape)
'''), LOSS_ALL, ".reshape"),
    Mistake("lm_loss returning the loss per position", "lm_loss", loss(reduce='''    if pad_id is not None:
        nll = nll.masked_fill(targets == pad_id, 0.0)
    return nll
'''), LOSS_ALL, "return the mean loss"),

    # --- sample_next ---
    Mistake("sample_next multiplying by the temperature", "sample_next",
            sample(temperature='''    logits = logits * temperature
'''), SAMPLED, "multiplied by the temperature"),
    Mistake("sample_next ignoring the temperature", "sample_next", sample(temperature=""), SAMPLED,
            "the temperature is not applied"),
    Mistake("sample_next dividing by temperature 0", "sample_next", sample(greedy=""), ("sample_next_greedy",),
            "temperature 0"),
    Mistake("sample_next greedy over the whole batch", "sample_next", sample(greedy='''    if temperature == 0:
        return torch.argmax(logits)
'''), ("sample_next_greedy",), "argmax(dim=-1)"),
    Mistake("sample_next top-k removing the largest", "sample_next", sample().replace(
        "logits.masked_fill(logits < kth,", "logits.masked_fill(logits >= kth,"),
            ("sample_next_top_k", "sample_next_top_p"), "removes the k largest"),
    Mistake("sample_next top-k keeping k - 1", "sample_next", sample().replace(
        "logits.masked_fill(logits < kth,", "logits.masked_fill(logits <= kth,"),
            ("sample_next_top_k", "sample_next_top_p"), "keeps 2 token(s), not top_k = 3",
            elsewhere="token(s), not top_k"),
    Mistake("sample_next top-k larger than the vocabulary", "sample_next", sample().replace(
        "logits.topk(min(top_k, logits.shape[-1]), dim=-1)", "logits.topk(top_k, dim=-1)"),
            ("sample_next_top_k",), "min(top_k, V)"),
    Mistake("sample_next top-p stopping below p", "sample_next", sample().replace(
        "drop_sorted = cum - sorted_probs >= top_p", "drop_sorted = cum > top_p"),
            ("sample_next_top_p",), "stays below p"),
    Mistake("sample_next top-p by each token's own probability", "sample_next", sample().replace(
        "drop_sorted = cum - sorted_probs >= top_p", "drop_sorted = sorted_probs < top_p\n"
        "        drop_sorted[:, 0] = False"), ("sample_next_top_p",), "own probability"),
    Mistake("sample_next top-p before top-k", "sample_next",
            sample(order=("head", "greedy", "temperature", "top_p", "top_k", "draw")),
            ("sample_next_top_p",), "before top-k"),
    Mistake("sample_next top-p before the temperature", "sample_next",
            sample(order=("head", "greedy", "top_p", "temperature", "top_k", "draw")),
            ("sample_next_top_p",), "temperature is applied after top-p"),
    Mistake("sample_next with the global random state", "sample_next", sample(draw='''    probs = logits.softmax(dim=-1)
    return torch.multinomial(probs, 1).squeeze(-1)
'''), ("sample_next_temperature",), "not with the global random state"),
    Mistake("sample_next drawing one number for the whole batch", "sample_next",
            sample(draw='''    probs = logits.softmax(dim=-1)
    u = torch.rand(1, generator=generator)
    cdf = probs.cumsum(dim=-1)
    return torch.searchsorted(cdf, u.expand(len(probs), 1)).squeeze(-1).clamp(max=probs.shape[-1] - 1)
'''), SAMPLED, "the same token for all"),
    Mistake("sample_next returning (B, 1)", "sample_next", sample(draw='''    probs = logits.softmax(dim=-1)
    return torch.multinomial(probs, 1, generator=generator)
'''), SAMPLED, "squeeze(-1)"),

    # --- generate ---
    Mistake("generate with every new token at position 0", "generate", generate(
        ("table[T + s]", "table[0]")), ("generate_greedy", "generate_cache", "generate_sampling"), "position 0"),
    Mistake("generate with every new token at position T", "generate", generate(
        ("table[T + s]", "table[T]")), GEN_ALL, "position T, the first new one"),
    Mistake("generate with new positions one too far", "generate", generate(
        ("table[T + s]", "table[T + s + 1]")), GEN_ALL, "one too far"),
    Mistake("generate with new positions one too early", "generate", generate(
        ("table[T + s]", "table[T + s - 1]")), GEN_ALL, "one too early"),
    Mistake("generate caching only the prompt's last token", "generate", generate(prompt='''
    logits = step(model.tok_emb(idx[:, -1:]) + table[T - 1:T], None)
'''), GEN_ALL, "only the prompt's last token"),
    Mistake("generate without a causal mask on the prompt", "generate", generate(prompt='''
    logits = step(model.tok_emb(idx) + table[:T], None)
'''), GEN_ALL, "without a causal mask"),
    Mistake("generate caching keys of x instead of ln1(x)", "generate", generate(
        ("keys[i].append(split_heads(block.attn.w_k(y)", "keys[i].append(split_heads(block.attn.w_k(x)"),
        ("values[i].append(split_heads(block.attn.w_v(y)", "values[i].append(split_heads(block.attn.w_v(x)")),
            GEN_ALL, "ln1(x)"),
    Mistake("generate without a cache", "generate", '''
@torch.no_grad()
def generate(model, idx, max_new_tokens, **sampling):
    T = idx.shape[1]
    if T + max_new_tokens > model.max_len:
        raise ValueError(f"{T} + {max_new_tokens} tokens are more than max_len = {model.max_len}")
    for _ in range(max_new_tokens):
        t = idx.shape[1]
        x = model.tok_emb(idx) + position_vectors(model, t, model.tok_emb(idx))
        mask = causal_mask(t, device=idx.device)
        for block in model.blocks:
            y = block.ln1(x)
            x = x + block.attn(y, y, y, mask)[0]
            x = x + block.ff(block.ln2(x))
        token = sample_next(model.head(model.ln_f(x[:, -1])), **sampling)
        idx = torch.cat([idx, token[:, None]], dim=1)
    return idx
''', ("generate_cache",), "the earlier tokens are processed again"),
    Mistake("generate returning the new tokens only", "generate", generate(end='''    return out[:, T:]
'''), GEN_ALL, "the new tokens only"),
    Mistake("generate not passing the sampling arguments", "generate", generate(
        ("token = sample_next(logits, **sampling)", "token = sample_next(logits)")),
            GEN_ALL, "pass every sampling argument on"),
    Mistake("generate dropping the generator", "generate", generate(
        ("def generate(model, idx, max_new_tokens, **sampling):",
         "def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, top_p=None, generator=None):"),
        ("token = sample_next(logits, **sampling)", "token = sample_next(logits, temperature, top_k, top_p)")),
            ("generate_sampling",), "generator=None"),
    Mistake("generate passing (B, 1, V) logits", "generate", generate(
        ("return model.head(model.ln_f(x[:, -1]))", "return model.head(model.ln_f(x[:, -1:]))"),
        ("out = torch.cat([out, token[:, None]], dim=1)", "out = torch.cat([out, token], dim=1)"),
        ("model.tok_emb(token[:, None])", "model.tok_emb(token)")), ("generate_sampling",), "(B, vocab_size)"),
]

ALTERNATIVES = [
    # --- GPT ---
    Alternative("GPT with F.gelu and the feed-forward's layers called one by one", "GPT", gpt((
        "x = x + self.dropout(self.ff(self.ln2(x)))",
        "x = x + self.dropout(self.ff[2](F.gelu(self.ff[0](self.ln2(x)))))"))),
    Alternative("GPT with a mask from torch.tril and the embedding tied the other way", "GPT", gpt(
        ("mask = causal_mask(T, device=idx.device)",
         "mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=idx.device))"),
        ("self.head.weight = self.tok_emb.weight", "self.tok_emb.weight = self.head.weight"))),
    Alternative("GPT with the mask kept in a buffer and positions added by hand", "GPT", gpt(
        ("        self.head.weight = self.tok_emb.weight\n",
         "        self.head.weight = self.tok_emb.weight\n"
         "        self.register_buffer(\"mask\", torch.ones(max_len, max_len).tril().bool(), persistent=False)\n"),
        ("x = self.dropout(self.positions(self.tok_emb(idx)))",
         "x = self.tok_emb(idx) + self.positions.embedding.weight[:T]\n        x = self.dropout(x)"),
        ("mask = causal_mask(T, device=idx.device)", "mask = self.mask[:T, :T]"))),

    # --- lm_loss ---
    Alternative("lm_loss with log_softmax, flattened, and a masked sum", "lm_loss", '''
def lm_loss(logits, targets, pad_id=None):
    V = logits.shape[-1]
    log_probs = F.log_softmax(logits[:, :-1].reshape(-1, V), dim=-1)
    tgt = targets[:, 1:].reshape(-1)
    nll = -log_probs[torch.arange(len(tgt)), tgt]
    keep = torch.ones_like(tgt, dtype=nll.dtype) if pad_id is None else (tgt != pad_id).to(nll.dtype)
    return (nll * keep).sum() / keep.sum()
'''),
    Alternative("lm_loss with F.one_hot", "lm_loss", '''
def lm_loss(logits, targets, pad_id=None):
    logits, targets = logits[:, :-1], targets[:, 1:]
    log_probs = torch.log_softmax(logits, dim=-1)
    nll = -(F.one_hot(targets, logits.shape[-1]).to(log_probs.dtype) * log_probs).sum(-1)
    if pad_id is not None:
        nll = nll[targets != pad_id]
    return nll.mean()
'''),
    Alternative("lm_loss with a loop over the positions", "lm_loss", '''
def lm_loss(logits, targets, pad_id=None):
    B, T, V = logits.shape
    total, count = logits.new_zeros(()), 0
    for b in range(B):
        for t in range(T - 1):
            target = int(targets[b, t + 1])
            if pad_id is not None and target == pad_id:
                continue
            row = logits[b, t]
            m = row.max()
            total = total - (row[target] - m - torch.log(torch.exp(row - m).sum()))
            count += 1
    return total / count
'''),

    # --- sample_next ---
    Alternative("sample_next with kthvalue and a top-p cut by searchsorted", "sample_next", '''
def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(-1)
    z = logits / temperature
    V = z.shape[-1]
    if top_k is not None and top_k < V:
        kth = z.kthvalue(V - top_k + 1, dim=-1, keepdim=True).values
        z = torch.where(z >= kth, z, torch.full_like(z, float("-inf")))
    if top_p is not None:
        sorted_z, order = z.sort(dim=-1, descending=True)
        cum = sorted_z.softmax(-1).cumsum(-1)
        n_keep = torch.searchsorted(cum, torch.full_like(cum[:, :1], top_p)) + 1
        keep_sorted = torch.arange(V).expand_as(cum) < n_keep
        keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
        z = z.masked_fill(~keep, float("-inf"))
    return torch.multinomial(torch.softmax(z, -1), num_samples=1, generator=generator)[:, 0]
'''),
    Alternative("sample_next by inverse CDF", "sample_next", sample(draw='''    probs = logits.softmax(dim=-1)
    u = torch.rand(probs.shape[0], 1, generator=generator, dtype=probs.dtype)
    cdf = probs.cumsum(dim=-1)
    ids = torch.searchsorted(cdf, u * cdf[:, -1:])
    return ids.squeeze(-1).clamp(max=probs.shape[-1] - 1)
''')),
    Alternative("sample_next by Gumbel-max", "sample_next",
            sample(draw='''    u = torch.rand(logits.shape, generator=generator, dtype=logits.dtype).clamp_min(1e-12)
    return (logits - torch.log(-torch.log(u))).argmax(dim=-1)
''')),
    Alternative("sample_next with top-p kept in sorted order", "sample_next", sample(top_p='''    if top_p is not None:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        probs = F.softmax(sorted_logits, dim=-1)
        remove = probs.cumsum(-1) > top_p
        remove[:, 1:] = remove[:, :-1].clone()
        remove[:, 0] = False
        sorted_logits[remove] = float("-inf")
        logits = torch.empty_like(logits).scatter_(-1, order, sorted_logits)
''')),

    Alternative("sample_next with the temperature after top-k and torch.where", "sample_next",
            sample(order=("head", "greedy", "top_k", "temperature", "top_p", "draw")).replace(
                'logits.masked_fill(logits < kth, float("-inf"))',
                'torch.where(logits >= kth, logits, torch.full_like(logits, -float("inf")))')),

    # --- generate ---
    Alternative("generate with the prompt fed token by token", "generate", generate(prompt='''
    for j in range(T):
        logits = step(model.tok_emb(idx[:, j:j + 1]) + table[j], None)
''')),
    Alternative("generate with explicit sampling arguments", "generate", generate(
        ("def generate(model, idx, max_new_tokens, **sampling):",
         "def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, top_p=None, generator=None):"),
        ("token = sample_next(logits, **sampling)",
         "token = sample_next(logits, temperature, top_k, top_p, generator)"))),
    Alternative("generate with a preallocated cache and the position table read directly", "generate", '''
class Cache:
    def __init__(self, n_heads, B, max_len, d_head):
        self.k = torch.zeros(B, n_heads, max_len, d_head)
        self.v = torch.zeros(B, n_heads, max_len, d_head)
        self.n = 0

    def add(self, k, v):
        m = k.shape[2]
        self.k[:, :, self.n:self.n + m] = k
        self.v[:, :, self.n:self.n + m] = v
        self.n += m
        return self.k[:, :, :self.n], self.v[:, :, :self.n]


def run_blocks(model, x, caches, mask):
    for block, cache in zip(model.blocks, caches):
        a = block.attn
        y = block.ln1(x)
        k, v = cache.add(split_heads(a.w_k(y), a.n_heads), split_heads(a.w_v(y), a.n_heads))
        q = split_heads(a.w_q(y), a.n_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        x = x + a.w_o(merge_heads(scores.softmax(-1) @ v))
        x = x + block.ff(block.ln2(x))
    return x


def generate(model, idx, max_new_tokens, **sampling):
    B, T = idx.shape
    total = T + max_new_tokens
    if total > model.max_len:
        raise ValueError("the sequence would be longer than max_len")
    with torch.no_grad():
        pos = model.positions.embedding.weight
        d = model.d_model
        caches = [Cache(b.attn.n_heads, B, total, d // b.attn.n_heads) for b in model.blocks]
        x = run_blocks(model, model.tok_emb(idx) + pos[:T], caches, causal_mask(T))
        for t in range(T, total):
            nxt = sample_next(model.head(model.ln_f(x[:, -1, :])), **sampling)
            idx = torch.cat((idx, nxt.unsqueeze(1)), dim=1)
            if t + 1 < total:
                x = run_blocks(model, model.tok_emb(nxt)[:, None, :] + pos[t], caches, None)
    return idx
'''),
]
