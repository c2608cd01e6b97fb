"""sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None): one token id per row (B,) from
the last position's logits (B, V). Temperature 0 is the argmax; otherwise the logits are divided by the temperature,
top-k keeps the k largest, top-p keeps the smallest set of the likeliest tokens whose probability reaches p (at
least one; on what top-k kept), and a token is drawn from the softmax of the rest with ``generator``.

Judged on many rows of the same logits drawn at once: which tokens ever come out (exactly the kept ones), and
their frequencies against the kept distribution (within 5 standard errors, seeded, so the verdict is the same
every time). The usual mistakes give other distributions, computed here to name them.
"""
import torch

from ..kernel import StudentError

NAME = "sample_next"
FIXTURES = "autograder.checks.gpt.fixtures"
N = 6000                                   # rows drawn at once
LOGITS = torch.tensor([2.0, 1.2, 0.9, 0.3, -0.4, -1.5, 0.6, -3.0], dtype=torch.float64)  # no two equal


def kept(logits, temperature=1.0, top_k=None, top_p=None, order="k_then_p", p_rule="reach", scale="divide",
         k_rule="keep"):
    """The distribution the exercise asks for (float64, (V,)), or one with a mistake put in (``scale="after_p"``:
    the nucleus taken from the probabilities before the temperature; ``k_rule="remove"``: top-k cuts the k largest)."""
    if scale in ("divide", "after_p"):
        z = logits / temperature
    elif scale == "multiply":
        z = logits * temperature
    else:
        z = logits.clone()
    keep = torch.ones_like(z, dtype=torch.bool)

    def apply_k(keep):
        if top_k is None:
            return keep
        kth = z.topk(min(top_k, len(z))).values[-1]
        return keep & ((z >= kth) if k_rule == "keep" else (z < kth))

    def apply_p(keep):
        if top_p is None:
            return keep
        probs = torch.softmax((logits if scale == "after_p" else z).masked_fill(~keep, float("-inf")), -1)
        sorted_p, idx = probs.sort(descending=True)
        cum = sorted_p.cumsum(-1)
        if p_rule == "reach":
            drop_sorted = cum - sorted_p >= top_p
        elif p_rule == "below":           # keeps only tokens whose cumulative mass stays below p
            drop_sorted = cum > top_p
            drop_sorted[0] = False
        else:                             # keeps tokens whose own probability is at least p... not a nucleus
            drop_sorted = sorted_p < top_p
            drop_sorted[0] = False
        drop = torch.zeros_like(drop_sorted).scatter(0, idx, drop_sorted)
        return keep & ~drop

    keep = apply_p(apply_k(keep)) if order == "k_then_p" else apply_k(apply_p(keep))
    return torch.softmax(z.masked_fill(~keep, float("-inf")), -1)


def _same_support(probs, came_out):
    """Whether no cut token came out and every kept token likely to come out (10 expected times) did."""
    return not (came_out & (probs == 0)).any() and not ((probs * N >= 10) & ~came_out).any()


def _describe(freq):
    return "[" + ", ".join(f"{x:.3f}" for x in freq.tolist()) + "]"


def draw(k, what, logits, seed=0, gen_seed=0, **kwargs):
    """The student's draws for logits (N, V): (N,) int64."""
    gen = k.build(f"torch.Generator().manual_seed({gen_seed})", k.trusted(FIXTURES).attr("generator"), gen_seed)
    try:
        out = k.call(what, k.student(NAME), logits, generator=gen, seed=seed, **kwargs)
    except StudentError as e:
        text = str(e)
        if "generator" in e.raw and "unexpected keyword" in e.raw:
            text += ". sample_next takes generator=None and draws with it: torch.multinomial(probs, 1, generator=...)"
        elif "probability tensor contains" in e.raw and kwargs.get("temperature") == 0:
            text += (". temperature 0 means greedy: return logits.argmax(dim=-1) before dividing by the temperature "
                     "(logits / 0 is inf or NaN, no distribution to draw from)")
        elif "probability tensor contains" in e.raw:
            text += (". A row's probabilities are NaN: every token of the row was cut (all its logits -inf). "
                     "Top-k and top-p always keep at least the likeliest token")
        elif "out of range" in e.raw and kwargs.get("top_k") is not None:
            text += (f". top_k may be larger than the vocabulary (top_k={kwargs['top_k']}, V={logits.shape[-1]}), "
                     f"and topk raises for it: keep min(top_k, V) tokens")
        raise AssertionError(text) from None
    if not torch.is_tensor(out):
        kind = getattr(out, "description", None) or f"a {type(out).__name__}"
        raise AssertionError(f"{what} should return a tensor of token ids (B,), got {kind}")
    if out.dim() == 0:
        raise AssertionError(f"{what} returns one number (shape ()), expected ({logits.shape[0]},): one token id per "
                             f"row, logits.argmax(dim=-1), not the argmax of the whole tensor")
    if out.dim() == 2 and out.shape[1] == 1:
        raise AssertionError(f"{what} returns shape {tuple(out.shape)}: return one id per row, shape (B,) "
                             f"(torch.multinomial gives (B, 1): squeeze(-1) it)")
    if tuple(out.shape) != (logits.shape[0],):
        raise AssertionError(f"{what} returns shape {tuple(out.shape)}, expected ({logits.shape[0]},): one token "
                             f"id per row of logits")
    if out.dtype != torch.long:
        raise AssertionError(f"{what} returns dtype {out.dtype}: return token ids, torch.long (int64)")
    if out.min() < 0 or out.max() >= logits.shape[-1]:
        raise AssertionError(f"{what} returns ids outside 0 ... {logits.shape[-1] - 1}")
    return out


def judge_distribution(k, what, temperature=1.0, top_k=None, top_p=None, logits=LOGITS):
    kwargs = {"temperature": temperature}
    if top_k is not None:
        kwargs["top_k"] = top_k
    if top_p is not None:
        kwargs["top_p"] = top_p
    rows = logits.float().expand(N, -1).clone()
    out = draw(k, what, rows, **kwargs)
    freq = torch.bincount(out, minlength=len(logits)).double() / N
    want = kept(logits, temperature, top_k, top_p)
    support, got_support = want > 0, freq > 0
    slack = 5 * torch.sqrt(want * (1 - want) / N) + 1e-9
    if _same_support(want, got_support) and ((freq - want).abs() <= slack).all():
        return out
    found = []
    alternatives = {}
    if top_k is not None:
        kth = min(top_k, len(logits))
        alternatives["top-k removes the k largest logits instead of keeping them: keep the logits >= the k-th "
                     "largest"] = dict(k_rule="remove")
        for n in (kth - 1, kth + 1):
            if 1 <= n <= len(logits):
                alternatives[f"top-k keeps {n} token(s), not top_k = {top_k}: keep the logits >= the k-th largest, "
                             f"logits.topk(k).values[..., -1:], the k-th itself included"] = dict(top_k=n)
    alternatives.update({
        "the logits are multiplied by the temperature: divide them by it (a temperature below 1 sharpens the "
        "distribution, above 1 flattens it)": dict(scale="multiply"),
        "the temperature is not applied: divide the logits by it before the softmax": dict(scale="none"),
        "the temperature is applied after top-p: divide the logits by the temperature first, then take the nucleus "
        "of the tempered distribution (a high temperature flattens it, so the nucleus holds more tokens)":
            dict(scale="after_p"),
        "top-p is applied before top-k: cut to the k largest first, then keep the nucleus of what is left":
            dict(order="p_then_k"),
        "top-p keeps only tokens whose cumulative probability stays below p, so it can fall short of p: keep the "
        "smallest set that *reaches* p, the first token whose cumulative probability is >= p included":
            dict(p_rule="below"),
        "top-p keeps the tokens whose own probability is at least p: the nucleus is the smallest set of the "
        "likeliest tokens whose probabilities *add up* to p (sort, cumsum)": dict(p_rule="own"),
    })
    for message, kw in alternatives.items():
        alt = kept(logits, temperature, **{"top_k": top_k, "top_p": top_p, **kw})
        if _same_support(alt, got_support) and ((freq - alt).abs() <= 5 * torch.sqrt(alt * (1 - alt) / N) + 1e-9
                                                 ).all() and not torch.allclose(alt, want):
            found.append(message)
    if found:
        raise AssertionError(f"{what} is wrong: {found[0]}")
    if got_support.sum() == 1 and (want * N >= 10).sum() > 1:
        raise AssertionError(f"{what} gave the same token for all {N} rows, token {int(freq.argmax())}: draw one "
                             f"token per row, each with its own random number (torch.multinomial on (B, V) "
                             f"probabilities draws one per row)")
    if not _same_support(want, got_support):
        never = [i for i in range(len(logits)) if want[i] * N >= 10 and not got_support[i]]
        extra = [i for i in range(len(logits)) if got_support[i] and not support[i]]
        parts = []
        if extra:
            parts.append(f"token(s) {extra} came out although they should be cut")
        if never:
            parts.append(f"token(s) {never} never came out in {N} draws although their probability is "
                         f"{', '.join(f'{want[i]:.3f}' for i in never)}")
        raise AssertionError(f"{what}: {'; '.join(parts)}. Frequencies {_describe(freq)}, expected "
                             f"{_describe(want)}")
    worst = int(((freq - want).abs() / slack).argmax())
    raise AssertionError(f"{what}: token {worst} came out with frequency {freq[worst]:.3f} in {N} draws, expected "
                         f"{want[worst]:.3f} (the softmax of the kept logits divided by the temperature). "
                         f"Frequencies {_describe(freq)}, expected {_describe(want)}")


# --- graded cells ---------------------------------------------------------------------------------

def sample_next_greedy(k):
    """temperature=0 returns each row's argmax, as int64 (B,), whatever the generator: a batch of different rows,
    logits of any size (large and negative ones too)."""
    g = torch.Generator().manual_seed(1101)
    logits = torch.randn(7, 30, generator=g) * 3 - 50
    what = f"{NAME}(logits {tuple(logits.shape)}, temperature=0)"
    for gen_seed in (0, 1):
        out = draw(k, what, logits, gen_seed=gen_seed, temperature=0)
        if not torch.equal(out, logits.argmax(-1)):
            i = int((out != logits.argmax(-1)).nonzero()[0])
            raise AssertionError(f"{what}: row {i} gave token {int(out[i])}, expected {int(logits[i].argmax())}, "
                                 f"its largest logit: temperature 0 is greedy, the argmax, with no drawing")


def sample_next_temperature(k):
    """Draws follow the softmax of logits / temperature, for temperature 1, 0.5 and 2 (frequencies of 6000 rows
    within 5 standard errors), with the generator given: the same generator state gives the same draws whatever
    the global random state, and each row is drawn on its own."""
    for t in (1.0, 0.5, 2.0):
        judge_distribution(k, f"{NAME}(logits ({N}, {len(LOGITS)}), all rows the same, temperature={t})", t)
    rows = LOGITS.float().expand(64, -1).clone()
    what = f"{NAME}(logits (64, {len(LOGITS)}), temperature=1.0, generator=...)"
    a = draw(k, what, rows, seed=1, gen_seed=7)
    b = draw(k, what, rows, seed=2, gen_seed=7)
    if not torch.equal(a, b):
        raise AssertionError(f"{what}: two calls with generators in the same state gave different tokens: draw with "
                             f"the generator you are given, torch.multinomial(probs, 1, generator=generator), not "
                             f"with the global random state")
    if len(set(a.tolist())) == 1:
        raise AssertionError(f"{what} gave the same token for all 64 rows: draw one token per row "
                             f"(torch.multinomial on (B, V) probabilities draws one per row)")


def sample_next_top_k(k):
    """top_k keeps exactly the k largest logits (k = 1, 3 and k > V), with temperatures 1 and 0.7."""
    for top_k, t in ((3, 1.0), (1, 1.0), (3, 0.7), (20, 1.0)):
        judge_distribution(k, f"{NAME}(logits ({N}, {len(LOGITS)}), temperature={t}, top_k={top_k})", t, top_k=top_k)


def sample_next_top_p(k):
    """top_p keeps the smallest set of the likeliest tokens whose probability reaches p (p = 0.5, 0.8, 0.95, and
    p below the likeliest token's probability, which keeps that one token), and combines with top_k (top-k first)
    and with a temperature."""
    for top_p, top_k, t in ((0.8, None, 1.0), (0.5, None, 1.0), (0.95, None, 1.0), (0.2, None, 1.0),
                            (0.9, 4, 1.0), (0.7, None, 2.0), (0.6, 3, 1.5)):
        what = f"{NAME}(logits ({N}, {len(LOGITS)}), temperature={t}" + \
            (f", top_k={top_k}" if top_k else "") + f", top_p={top_p})"
        judge_distribution(k, what, t, top_k=top_k, top_p=top_p)

