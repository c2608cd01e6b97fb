"""generate(model, idx, max_new_tokens, **sampling): idx (B, T) followed by max_new_tokens tokens, each chosen by
``sample_next(logits of the last position, **sampling)`` and fed back; the prompt runs once, then each step runs the
newest token only against the keys and values cached in every block (notebook 09's cache).

The model is the course's GPT, made here and mirrored in the kernel (its LayerNorms, attention and feed-forward
are real modules there, its forward runs here). ``sample_next`` is the grader's stand-in (``fixtures.py``): the
argmax at temperature 0, else the second most likely token, and it records what it was given. The expected ids are
computed here without a cache; the usual mistakes are put into a cached loop written here (``cached``), so that a
wrong answer can be named. Whether steps run one token is read off the shapes of the operators that run.
"""
import math

import torch

from lib.masking import causal_mask
from lib.multi_head import merge_heads, split_heads

from ..kernel import StudentError
from ..common import raises_value_error
from ..long_sequences.kv_cache import COMPUTE
from .gpt_model import SIZES, VOCAB, reference_model

NAME = "generate"
FIXTURES = "autograder.checks.gpt.fixtures"


def rule(logits, temperature):
    """The stand-in sample_next: the argmax at temperature 0, else the second most likely token."""
    return logits.argmax(-1) if temperature == 0 else logits.topk(2, dim=-1).indices[..., 1]


def uncached(model, idx, n, temperature=0):
    """The ids the exercise asks for, computed by running the whole sequence at every step."""
    with torch.no_grad():
        ys = idx
        for _ in range(n):
            ys = torch.cat([ys, rule(model(ys)[:, -1], temperature)[:, None]], dim=1)
    return ys


def cached(model, idx, n, temperature=0, position="offset", prompt="all", prompt_mask=True, new_only=False,
           kv_of="ln1"):
    """A cached loop written here, with one mistake put in: the positions of new tokens (``zero``: all at 0,
    ``prompt``: all at T, ``one_late``: t + 1, ``one_early``: t - 1), the prompt (``last``: only its last token goes
    into the cache), no causal mask within the prompt, the keys and values projected from the block's input x
    instead of ln1(x) (``kv_of="x"``), or the new tokens returned without the prompt."""
    with torch.no_grad():
        b, t = idx.shape
        table = model.positions.embedding.weight
        keys = [[] for _ in model.blocks]
        values = [[] for _ in model.blocks]

        def step(x, mask):
            for i, block in enumerate(model.blocks):
                y = block.ln1(x)
                attn = block.attn
                src = x if kv_of == "x" else y
                keys[i].append(split_heads(attn.w_k(src), attn.n_heads))
                values[i].append(split_heads(attn.w_v(src), attn.n_heads))
                q = split_heads(attn.w_q(y), attn.n_heads)
                k_, v = torch.cat(keys[i], 2), torch.cat(values[i], 2)
                scores = q @ k_.transpose(-2, -1) / math.sqrt(q.shape[-1])
                if mask is not None:
                    scores = scores.masked_fill(~mask, float("-inf"))
                x = x + attn.w_o(merge_heads(torch.softmax(scores, -1) @ v))
                x = x + block.ff(block.ln2(x))
            return model.head(model.ln_f(x[:, -1]))

        prompt_ids = idx if prompt == "all" else idx[:, -1:]
        start = 0 if prompt == "all" else t - 1
        x = model.tok_emb(prompt_ids) + table[start:t]
        mask = causal_mask(prompt_ids.shape[1]) if prompt_mask and prompt_ids.shape[1] > 1 else None
        logits = step(x, mask)
        out = [idx]
        for s in range(n):
            token = rule(logits, temperature)
            out.append(token[:, None])
            if s == n - 1:
                break
            p = {"offset": t + s, "zero": 0, "prompt": t, "one_late": min(t + s + 1, len(table) - 1),
                 "one_early": t + s - 1}[position]
            logits = step(model.tok_emb(token[:, None]) + table[p], None)
        ys = torch.cat(out, 1)
        return ys[:, t:] if new_only else ys


HINTS = {
    "every new token gets the position vector of position 0: token T + s of the sequence needs position T + s "
    "(keep a counter of the positions done)": dict(position="zero"),
    "every new token gets the position vector of position T, the first new one: add the vector of its own "
    "position, T + s for the s-th new token": dict(position="prompt"),
    "each new token's position vector is one too far: the first new token is at position T (positions count from "
    "0), then T + 1, ...": dict(position="one_late"),
    "each new token's position vector is one too early: the first new token is at position T, just after the "
    "prompt's last one at T - 1, then T + 1, ...": dict(position="one_early"),
    "only the prompt's last token goes into the cache: run the whole prompt through the blocks first, so that "
    "every block caches the keys and values of all its tokens": dict(prompt="last"),
    "the prompt runs without a causal mask: within the prompt, position t may see tokens 0..t only, as in "
    "training (causal_mask(T)); the later single-token steps need no mask": dict(prompt_mask=False),
    "the cached keys and values are projected from the block's input x: attention reads the normalized "
    "y = block.ln1(x), so cache block.attn.w_k(y) and w_v(y), as the query uses w_q(y)": dict(kv_of="x"),
}


def model_pair(k, seed, **sizes):
    """The reference GPT here (eval mode) and the same one in the kernel (a handle)."""
    here = reference_model(seed, **sizes)
    there = k.build("a GPT", k.trusted("lib.gpt").attr("GPT"), VOCAB, **{**SIZES, **sizes}, seed=0)
    problems = k.load(there, here.state_dict())
    if problems:
        raise RuntimeError(f"the grader's model did not load: {problems[:2]}")
    k.call("model.eval()", there.attr("eval"))
    return here, there


def run(k, model, idx, n, what, watch=False, **sampling):
    inject = {"sample_next": k.trusted(FIXTURES).attr("sample_next")}
    k.call("forgetting the calls", k.trusted(FIXTURES).attr("calls"))
    try:
        trace = k.trace(what, k.student(NAME), model, idx, n, inject=inject, watch=watch, **sampling)
    except StudentError as e:
        text = str(e)
        if not {"NotImplementedError", "ForbiddenCall"} & set(e.types) and "part of a course's module" in e.raw:
            text += (". Run the blocks' parts one by one (block.ln1, block.attn.w_q, w_k, w_v, w_o, block.ln2, "
                     "block.ff), as the cached decoder of notebook 09 did")
        elif not {"NotImplementedError", "ForbiddenCall"} & set(e.types) and "size" in e.raw:
            text += (". Shapes: the cache of a block holds keys and values (B, n_heads, t, d_head); a step's query "
                     "is (B, n_heads, 1, d_head) and needs no mask")
        raise AssertionError(text) from None
    calls = k.call("the calls of sample_next", k.trusted(FIXTURES).attr("calls"))
    given = {"temperature": 1.0, "top_k": None, "top_p": None, "generator": None, **sampling}
    given["generator"] = "Generator" if given["generator"] is not None else None
    for c in calls:
        wrong = [key for key in given if c[key] != given[key]]
        if wrong:
            raise AssertionError(f"{what} called sample_next with {', '.join(f'{w}={c[w]!r}' for w in wrong)}: "
                                 f"pass every sampling argument on, sample_next(logits, **sampling)")
    out = trace.value
    if not torch.is_tensor(out):
        kind = getattr(out, "description", None) or f"a {type(out).__name__}"
        raise AssertionError(f"{what} should return a tensor of token ids, got {kind}")
    b, t = idx.shape
    if tuple(out.shape) == (b, n) and n:
        raise AssertionError(f"{what} returns shape {tuple(out.shape)}, the new tokens only: return the prompt "
                             f"followed by them, (B, T + max_new_tokens) = {(b, t + n)}")
    if tuple(out.shape) != (b, t + n):
        raise AssertionError(f"{what} returns shape {tuple(out.shape)}, expected (B, T + max_new_tokens) = "
                             f"{(b, t + n)}")
    if out.dtype != torch.long:
        raise AssertionError(f"{what} returns dtype {out.dtype}: return token ids, torch.long (int64)")
    return out, trace, calls


def compare(out, here, idx, n, what, temperature=0):
    want = uncached(here, idx, n, temperature)
    if torch.equal(out, want):
        return
    if not torch.equal(out[:, :idx.shape[1]], idx):
        raise AssertionError(f"{what}: the first T = {idx.shape[1]} columns are not the prompt: return idx followed "
                             f"by the new tokens")
    for message, kwargs in HINTS.items():
        if torch.equal(out, cached(here, idx, n, temperature, **kwargs)):
            raise AssertionError(f"{what} is wrong: {message}")
    i, j = map(int, (out != want).nonzero()[0])
    raise AssertionError(f"{what}: row {i}, column {j} is {int(out[i, j])}, expected {int(want[i, j])} (the ids of "
                         f"running the whole sequence through the model at every step). Check that each new token "
                         f"is appended to the cache of every block, at its own position")


def _prompt(seed, b, t):
    return torch.randint(0, VOCAB, (b, t), generator=torch.Generator().manual_seed(seed))


# --- graded cells ---------------------------------------------------------------------------------

def generate_greedy(k):
    """With temperature=0: the same ids as running the whole sequence through the model at every step, for
    prompts of 4 tokens and of 1, batch 3 and 1, up to max_len; max_new_tokens=0 returns the prompt."""
    for seed, b, t, n in [(1301, 3, 4, 8), (1302, 1, 1, 11), (1303, 2, 6, 6)]:
        here, there = model_pair(k, seed)
        idx = _prompt(seed, b, t)
        what = f"{NAME}(a GPT with 2 blocks, idx {tuple(idx.shape)}, max_new_tokens={n}, temperature=0)"
        out, _, _ = run(k, there, idx, n, what, temperature=0)
        compare(out, here, idx, n, what)
    idx = _prompt(1304, 2, 5)
    what = f"{NAME}(a GPT, idx {tuple(idx.shape)}, max_new_tokens=0, temperature=0)"
    out, _, _ = run(k, there, idx, 0, what, temperature=0)
    if not torch.equal(out, idx):
        raise AssertionError(f"{what} should return the prompt as it is")


def generate_cache(k):
    """The prompt runs once and each step runs the newest token only: no operator works on more than the prompt's
    positions at once (read off the shapes of the operators that run), and the output layer runs on one position
    per row at every step."""
    here, there = model_pair(k, 1311)
    b, t, n = 3, 3, 9
    idx = _prompt(1311, b, t)
    what = f"{NAME}(a GPT, idx {tuple(idx.shape)}, max_new_tokens={n}, temperature=0)"
    out, trace, _ = run(k, there, idx, n, what, watch=True, temperature=0)
    d, d_ff = SIZES["d_model"], SIZES["d_ff"]
    for op, _, shape in trace.ops:
        if shape and len(shape) == 3 and shape[0] == b and shape[-1] == VOCAB and t < shape[1] <= t + n:
            raise AssertionError(
                f"{what} gets logits for {shape[1]} positions per row in one step (shape {tuple(shape)}): it runs the "
                f"whole model on the sequence so far at every step, with no cache. Run the prompt once, caching every "
                f"block's keys and values, then each step on the newest token only")
        if op not in COMPUTE or not shape or len(shape) < 2:
            continue
        m = shape[-2]
        if t < m <= t + n and shape[-1] == m:
            raise AssertionError(
                f"{what} computes attention for {m} queries against {m} keys at once (operator '{op}', output shape "
                f"{tuple(shape)}): it runs the model on the whole sequence again, so nothing is saved. Run the "
                f"prompt once, caching every block's keys and values, then each step on the newest token only")
        rows = math.prod(shape[:-1])
        if shape[-1] in (d, d_ff, VOCAB) and rows % b == 0 and t < rows // b <= t + n:
            raise AssertionError(
                f"{what} runs a layer on {rows // b} positions per row in one step (operator '{op}', output shape "
                f"{tuple(shape)}), more than the prompt's {t}: the earlier tokens are processed again. Cache the "
                f"projected keys and values, w_k(x) and w_v(x), and run each step on the newest token only")
    newest = sum(1 for op, _, shape in trace.ops if op in COMPUTE and shape and shape[-1] == VOCAB
                 and math.prod(shape[:-1]) == b)
    if newest < n - 1:
        raise AssertionError(f"{what} ran the output layer on one position per row {newest} times, expected once per "
                             f"new token: take each step's logits from head(ln_f(x)) of the newest position only")
    compare(out, here, idx, n, what)


def generate_sampling(k):
    """The sampling arguments (temperature, top_k, top_p, generator) reach sample_next unchanged at every step,
    with the last position's logits (B, vocab_size), and the token it returns is the one appended and fed back;
    a ValueError when T + max_new_tokens > max_len."""
    here, there = model_pair(k, 1321)
    idx = _prompt(1321, 2, 3)
    n = 6
    gen = k.build("torch.Generator().manual_seed(0)", k.trusted(FIXTURES).attr("generator"), 0)
    what = f"{NAME}(a GPT, idx {tuple(idx.shape)}, max_new_tokens={n}, temperature=0.8, top_k=5, top_p=0.9, " \
           f"generator=...)"
    out, _, calls = run(k, there, idx, n, what, temperature=0.8, top_k=5, top_p=0.9, generator=gen)
    if not calls:
        raise AssertionError(f"{what} never called sample_next: choose each new token with "
                             f"sample_next(logits, **sampling)")
    if len(calls) != n:
        raise AssertionError(f"{what} called sample_next {len(calls)} times, expected once per new token ({n})")
    for c in calls:
        if c["shape"] != [2, VOCAB]:
            raise AssertionError(f"{what} called sample_next with logits of shape {tuple(c['shape'])}: pass the "
                                 f"last position's logits, (B, vocab_size) = (2, {VOCAB})")
        got = {key: c[key] for key in ("temperature", "top_k", "top_p", "generator")}
        want = {"temperature": 0.8, "top_k": 5, "top_p": 0.9, "generator": "Generator"}
        if got != want:
            wrong = [key for key in want if got[key] != want[key]]
            raise AssertionError(f"{what} called sample_next with {', '.join(f'{w}={got[w]!r}' for w in wrong)}: "
                                 f"pass every sampling argument on, sample_next(logits, **sampling)")
    compare(out, here, idx, n, what, temperature=0.8)
    idx = _prompt(1322, 2, 5)
    top = SIZES["max_len"]
    n = top - 5 + 1
    raises_value_error(k, f"{NAME}(a GPT with max_len={top}, idx {tuple(idx.shape)}, max_new_tokens={n})",
                       k.student(NAME), there, idx, n, temperature=0,
                       why=f"5 + {n} tokens are more than max_len = {top}: check T + max_new_tokens <= model.max_len "
                           f"first, rather than returning fewer tokens or cropping the context")
