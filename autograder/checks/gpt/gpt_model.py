"""GPT(vocab_size, d_model=128, n_heads=4, n_layers=4, d_ff=512, max_len=256, dropout=0.1): tok_emb, positions
(notebook 02's LearnedPositions), dropout, ``blocks`` of pre-norm Blocks (ln1, attn, ln2, ff, dropout), ln_f and a
bias-free ``head`` whose weight is tok_emb's; forward(idx (B, T)) -> logits (B, T, vocab_size), causal.

The logits are compared with the course's GPT (lib.gpt) run here with the same weights, copied into the student's
model by name; the usual mistakes are the same computation with one thing changed (``logits``), so that a wrong
answer can be named.
"""
import math

import torch
import torch.nn.functional as F

from lib import gpt as ref
from lib.testing import assert_close, assert_shape

from ..common import load_reference, module, seeded
from ..kernel import StudentError

NAME = "GPT"
SIZES = dict(d_model=16, n_heads=2, n_layers=2, d_ff=24, max_len=12, dropout=0.0)
VOCAB = 23
ATTRIBUTES = "tok_emb, positions, dropout, blocks (each with ln1, attn, ln2, ff, dropout), ln_f, head"


def reference_model(seed, vocab=VOCAB, **sizes):
    """The course's GPT with weights far from the defaults, so that every part shows in the logits."""
    g = seeded(seed)
    with torch.random.fork_rng(devices=[]):
        model = ref.GPT(vocab, **{**SIZES, **sizes})
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "ln" in name and name.endswith("weight"):
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)
            elif p.dim() == 1:
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * p.shape[-1] ** -0.5)
    return model.eval()


def logits(model, idx, norm="pre", ln_f=True, causal=True, act="gelu", positions=True, scale=False,
           residual=True, same_ln=False, invert=False, chain=True, blocks=True):
    """The GPT's logits computed from ``model``'s parts, as the exercise asks or with one thing changed."""
    with torch.no_grad():
        x = model.tok_emb(idx) * (math.sqrt(model.d_model) if scale else 1.0)
        if positions:
            x = model.positions(x)
        t = idx.shape[1]
        mask = torch.ones(t, t, dtype=torch.bool).tril() if causal else None
        if invert:
            mask = ~torch.ones(t, t, dtype=torch.bool).tril()
        start = x
        for block in model.blocks if blocks else ():
            ln2 = block.ln1 if same_ln else block.ln2
            if not chain:  # every block reads the embeddings; the last block's output is the one used
                x = start

            def attn(y):
                return block.attn(y, y, y, mask)[0]

            def ff(y):
                lin1, lin2 = block.ff[0], block.ff[2]
                h = lin1(y)
                h = {"gelu": F.gelu(h), "relu": torch.relu(h), "tanh": F.gelu(h, approximate="tanh")}[act]
                return lin2(h)

            if norm == "pre":
                x = (x if residual else 0) + attn(block.ln1(x))
                x = (x if residual else 0) + ff(ln2(x))
            elif norm == "parallel":  # GPT-J's and GPT-NeoX's blocks: both sublayers read the block's input
                x = x + attn(block.ln1(x)) + ff(ln2(x))
            else:
                x = block.ln1(x + attn(x))
                x = ln2(x + ff(x))
        return model.head(model.ln_f(x) if ln_f else x)


def _hints(model, idx):
    t = idx.shape[1]
    cases = {
        "the blocks are post-norm, LN(x + Sub(x)) as in notebook 06's default: GPT's blocks are pre-norm, "
        "x + Sub(LN(x)), so the residual path from the embedding to ln_f never goes through a LayerNorm":
            dict(norm="post"),
        "the blocks are post-norm, LN(x + Sub(x)), and there is no final LayerNorm (GPT-1's layout): GPT-2's "
        "blocks are pre-norm, x + Sub(LN(x)), and ln_f normalizes the stream once before the output layer":
            dict(norm="post", ln_f=False),
        "the attention and the feed-forward run in parallel on the block's input (GPT-J's and GPT-NeoX's parallel "
        "residual): they run one after the other, the feed-forward on x after the attention's residual, "
        "x = x + Attn(LN1(x)), then x = x + FF(LN2(x))": dict(norm="parallel"),
        "the final LayerNorm ln_f is missing: pre-norm blocks leave the residual stream unnormalized, so "
        "normalize it once more before the output layer, head(ln_f(x))": dict(ln_f=False),
        "the attention is not causal: pass causal_mask(T) to every block, so that position t sees tokens 0..t "
        "only": dict(causal=False),
        "the causal mask is inverted (True where j > i): in this course True means 'may attend', "
        "causal_mask(T) is True on and below the diagonal": dict(invert=True),
        "the feed-forward uses ReLU: GPT's uses GELU, nn.GELU() (notebook 03's network with a smoother "
        "activation)": dict(act="relu"),
        "the feed-forward uses GELU's tanh approximation (GPT-2's code): use the exact GELU, nn.GELU()":
            dict(act="tanh"),
        "no position vectors are added: self.positions(tok_emb(idx)) adds the learned vector of each position":
            dict(positions=False),
        "the token embeddings are multiplied by sqrt(d_model), as notebook 08's Transformer does: a GPT adds "
        "the embeddings and the position vectors as they are": dict(scale=True),
        "a block has no residual connection: x = x + Drop(Attn(LN1(x))), then x = x + Drop(FF(LN2(x)))":
            dict(residual=False),
        "ln1 is used before both sublayers: the feed-forward is normalized by the block's own ln2":
            dict(same_ln=True),
        "the blocks are not chained: every block reads the embeddings and only the last one's output is kept. Each "
        "block takes the previous block's output, x = block(x, mask)": dict(chain=False),
        "the blocks' outputs are not used (head(ln_f(...)) of the embeddings): each block takes the previous "
        "block's output, x = block(x, mask)": dict(blocks=False),
    }
    out = {}
    for message, kwargs in cases.items():
        if t == 1 and "causal" in message:
            continue
        out[message] = logits(model, idx, **kwargs)
    return out


def not_finite(out, hints, what):
    """Name the mistake behind NaN logits (a known one, or a mask that leaves a query no key)."""
    if not torch.isnan(out).any():
        return
    for message, wrong in hints.items():
        if wrong.shape == out.shape and torch.allclose(out, wrong, atol=1e-4, equal_nan=True):
            raise AssertionError(f"{what} is wrong: {message}")
    raise AssertionError(f"{what} contains NaN: a position whose attention may see no key at all (a mask row "
                         f"with no True) gets a softmax over nothing but -inf. The mask is bool with True = may "
                         f"attend: causal_mask(T), True on and below the diagonal, so that every position sees "
                         f"itself")


def build(k, vocab=VOCAB, sizes=SIZES, what=None):
    """The student's GPT(vocab, **sizes), seeded: (handle, description, what)."""
    what = what or f"{NAME}({vocab}, " + ", ".join(f"{a}={b}" for a, b in sizes.items()) + ")"
    try:
        model = k.call(what, k.student(NAME), vocab, **sizes, seed=0)
    except StudentError as e:
        raise AssertionError(str(e)) from None
    info = module(k, model, what)
    if info.isa("lib.gpt.GPT"):
        raise AssertionError(f"{what}: using the course's reference GPT from lib is not allowed in this exercise: "
                             f"write it yourself")
    return model, info, what


def parts_problem(info, vocab, sizes, what):
    """Why the model's parts are not the exercise's, or None."""
    d = sizes["d_model"]
    emb = info.children.get("tok_emb")
    if emb is None or not emb.isa("torch.nn.modules.sparse.Embedding"):
        return f"{what} should have an nn.Embedding `tok_emb`"
    if tuple(emb.params["weight"].shape) != (vocab, d):
        return f"{what}.tok_emb has weight {tuple(emb.params['weight'].shape)}, expected (vocab_size, d_model) = " \
               f"{(vocab, d)}"
    for name in ("positions", "blocks", "ln_f", "head"):
        if name not in info.children:
            return f"{what} has no `{name}`: keep the attributes of the exercise ({ATTRIBUTES})" + (
                ". `blocks` is an nn.ModuleList: the modules in a plain Python list are not part of the model, so "
                "they have no parameters to train and model.eval() does not reach them" if name == "blocks" else "")
    blocks = info.children["blocks"]
    if len(blocks.children) != sizes["n_layers"]:
        return f"{what} has {len(blocks.children)} blocks, expected n_layers = {sizes['n_layers']}"
    head = info.children["head"]
    if "bias" in head.params:
        return f"{what}.head has a bias: the output layer is nn.Linear(d_model, vocab_size, bias=False), its " \
               f"weight tied to the embedding's"
    w = head.params.get("weight")
    if w is None or tuple(w.shape) != (vocab, d):
        return f"{what}.head should be a linear layer d_model -> vocab_size with weight {(vocab, d)}"
    if w.oid != emb.params["weight"].oid:
        return (f"{what}.head has a weight of its own: tie it to the token embedding, "
                f"self.head.weight = self.tok_emb.weight, so that one (vocab_size, d_model) matrix reads tokens in "
                f"and scores them out ({vocab} x {d} = {vocab * d} parameters saved)")
    return None


def load(k, model, info, reference, what):
    """Copy the reference's parameters into the student's model by name."""
    load_reference(k, model, info, reference, what, ATTRIBUTES)


def run(k, model, idx, what):
    try:
        out = k.call(what, model, idx)
    except StudentError as e:
        text = str(e)
        if not {"NotImplementedError", "ForbiddenCall"} & set(e.types) and "operator.invert" in e.raw:
            text += (". The mask must be a bool tensor, True = may attend (attention masks with ~mask): "
                     "causal_mask(T), or torch.tril(torch.ones(T, T, dtype=torch.bool)), not a float 0/1 matrix")
        elif not {"NotImplementedError", "ForbiddenCall"} & set(e.types) and "shape" in e.raw:
            text += (". Shapes: tok_emb(idx) (B, T, d_model); the causal mask (T, T) broadcasts over the batch and "
                     "the heads; each block keeps (B, T, d_model); head(ln_f(x)) gives (B, T, vocab_size)")
        raise AssertionError(text) from None
    return out


# --- graded cells ---------------------------------------------------------------------------------

def GPT_parts(k):
    """tok_emb is an nn.Embedding(vocab_size, d_model); blocks holds n_layers blocks; head is bias-free and its
    weight is tok_emb's weight (tied); the parameters are the reference's, as many (shared ones counted once);
    the defaults are d_model=128, n_heads=4, n_layers=4, d_ff=512, max_len=256."""
    for vocab, sizes in [(VOCAB, SIZES), (40, dict(SIZES, n_layers=3, d_model=24, n_heads=4))]:
        model, info, what = build(k, vocab, sizes)
        problem = parts_problem(info, vocab, sizes, what)
        if problem:
            raise AssertionError(problem)
        with torch.random.fork_rng(devices=[]):
            want = sum(p.numel() for p in ref.GPT(vocab, **sizes).parameters())
        got = sum(math.prod(t.shape) for t in info.all_params().values())
        if got != want:
            raise AssertionError(f"{what} has {got} parameters, the exercise's model {want}: keep exactly its parts "
                                 f"({ATTRIBUTES})")
    model, info, what = build(k, 50, {}, what=f"{NAME}(50) (the default sizes)")
    d = info.children["tok_emb"].params["weight"].shape[1] if "tok_emb" in info.children else None
    with torch.random.fork_rng(devices=[]):
        want = sum(p.numel() for p in ref.GPT(50).parameters())
    got = sum(math.prod(t.shape) for t in info.all_params().values())
    if d != 128 or got != want:
        raise AssertionError(f"{what} has d_model {d} and {got} parameters, expected d_model 128 and {want}: keep "
                             f"the defaults d_model=128, n_heads=4, n_layers=4, d_ff=512, max_len=256")


def _loaded(k, seed, **sizes):
    model, info, what = build(k, VOCAB, {**SIZES, **sizes})
    problem = parts_problem(info, VOCAB, {**SIZES, **sizes}, what)
    if problem:
        raise AssertionError(problem)
    reference = reference_model(seed, **sizes)
    load(k, model, info, reference, what)
    k.call(f"{what}.eval()", model.attr("eval"))
    return model, reference, what


def GPT_matches(k):
    """In eval mode, equals the course's GPT run here with the same weights: batches of 2 and 3, T = 7, T = 1 and
    T = max_len, with one and with three blocks."""
    g = torch.Generator().manual_seed(1201)
    for seed, sizes, b, t in [(1202, {}, 2, 7), (1203, {}, 3, 12), (1204, dict(n_layers=3), 2, 5),
                              (1205, {}, 2, 1)]:
        model, reference, what = _loaded(k, seed, **sizes)
        idx = torch.randint(0, VOCAB, (b, t), generator=g)
        call = f"{what}(idx {tuple(idx.shape)}) in eval mode, with the reference's weights"
        out = run(k, model, idx, call)
        want = logits(reference, idx)
        if torch.is_tensor(out) and t > 1 and tuple(out.shape) == (b, 1, VOCAB):
            raise AssertionError(f"logits of {call} has shape {tuple(out.shape)}: the logits of the last position "
                                 f"only (nanoGPT's shortcut when it has no targets). Return every position's "
                                 f"logits, (B, T, vocab_size) = {(b, t, VOCAB)}: the loss needs them all, and "
                                 f"generate takes the last one itself")
        assert_shape(out, want.shape, f"logits of {call}")
        hints = _hints(reference, idx)
        not_finite(out, hints, f"logits of {call}")
        assert_close(out, want, f"logits of {call}", atol=1e-4, hints=hints)


def GPT_causal(k):
    """With its own weights: the logits at position t depend on tokens 0..t only (changing later tokens changes
    nothing before them) and do depend on token t itself; eval mode gives the same logits twice (dropout off)."""
    g = torch.Generator().manual_seed(1211)
    model, info, what = build(k, VOCAB, dict(SIZES, dropout=0.3))
    k.call(f"{what}.eval()", model.attr("eval"))
    idx = torch.randint(0, VOCAB, (2, 9), generator=g)
    base = run(k, model, idx, f"{what}(idx (2, 9)) in eval mode")
    again = run(k, model, idx, f"{what}(idx (2, 9)) in eval mode, a second time")
    not_finite(base, {}, f"logits of {what}(idx (2, 9))")
    if not torch.equal(base, again) and "blocks" not in info.children:
        raise AssertionError(f"{what} in eval mode gives different logits for the same tokens: its blocks are not "
                             f"submodules, so model.eval() does not turn their dropout off. Keep them in an "
                             f"nn.ModuleList, not a plain Python list")
    if not torch.equal(base, again):
        raise AssertionError(f"{what} in eval mode gives different logits for the same tokens: dropout must be off "
                             f"in eval mode (nn.Dropout, not F.dropout with training=True)")
    for t in (2, 5):
        changed = idx.clone()
        changed[:, t + 1:] = (changed[:, t + 1:] + 7) % VOCAB
        out = run(k, model, changed, f"{what}(idx with the tokens after position {t} changed)")
        if not torch.allclose(out[:, :t + 1], base[:, :t + 1], atol=1e-5):
            raise AssertionError(f"{what}: changing the tokens after position {t} changed the logits at positions "
                                 f"0..{t}: a position sees the future. Mask every block's attention with "
                                 f"causal_mask(T)")
        changed = idx.clone()
        changed[:, t] = (changed[:, t] + 7) % VOCAB
        out = run(k, model, changed, f"{what}(idx with the token at position {t} changed)")
        if torch.allclose(out[:, t], base[:, t], atol=1e-6):
            raise AssertionError(f"{what}: the logits at position {t} do not depend on the token at position {t}: "
                                 f"position t reads tokens 0..t (itself included) and predicts token t+1; the shift "
                                 f"by one belongs in the loss, not in the model")
