"""global_tokens_mask(T, n_global, device=None) -> (T, T) bool, True in the first n_global rows and columns,
made on `device`."""
import torch

from ..masking import as_tensor, device_check, form_problem, mismatch

CASES = [(6, 1), (7, 2), (5, 0), (4, 4), (3, 5), (1, 1), (8, 3)]  # T, n_global


def globals_(T, n, rows=True, cols=True, both=False):
    """The mask computed here, or with one mistake put in on purpose."""
    g = torch.arange(T) < n
    if both:
        return g[:, None] & g[None, :]
    mask = torch.zeros(T, T, dtype=torch.bool)
    if rows:
        mask |= g[:, None]
    if cols:
        mask |= g[None, :]
    return mask


def global_problem(mask, T, n, what):
    """The message naming what is wrong with a global-tokens mask, or None when it is right."""
    as_tensor(mask, what)
    expected = globals_(T, n)
    problem = form_problem(mask, (T, T), what)
    if problem:
        return problem
    if torch.equal(mask, expected):
        return None
    if torch.equal(mask, globals_(T, n, cols=False)):
        return (f"{what} is True in the first {n} rows only: the global tokens see every token, but every token "
                f"must also see them. Make the first {n} columns True as well")
    if torch.equal(mask, globals_(T, n, rows=False)):
        return (f"{what} is True in the first {n} columns only: every token sees the global tokens, but the global "
                f"tokens must also see every token. Make the first {n} rows True as well")
    if torch.equal(mask, globals_(T, n, both=True)):
        return (f"{what} is True only where both the query and the key are global tokens (&): a pair is kept when "
                f"either of them is global, so combine rows and columns with |")
    if torch.equal(mask, ~expected):
        return (f"{what} is inverted: it is True where attention is blocked. In this course True = may attend: True "
                f"in the first n_global rows and columns")
    for other in (n - 1, n + 1):
        if 0 <= other and other != n and torch.equal(mask, globals_(T, other)):
            return (f"{what} is off by one: it makes the first {other} rows and columns True, not the first {n} "
                    f"(tokens 0 ... n_global - 1 are the global ones)")
    return _other_tokens(mask, T, n, what) or mismatch(mask, expected, what)


def _other_tokens(mask, T, n, what):
    """The message when the mask makes other tokens than the first n global (their whole rows and columns True)."""
    chosen = [i for i in range(T) if bool(mask[i].all()) and bool(mask[:, i].all())]
    pattern = torch.zeros(T, T, dtype=torch.bool)
    pattern[chosen, :] = True
    pattern[:, chosen] = True
    if not chosen or not torch.equal(mask.bool(), pattern):
        return None
    first, last = set(range(min(n, T))), set(range(max(T - n, 0), T))
    if set(chosen) == last:
        where = f"the last {n} tokens are the global ones, not the first {n}"
    elif set(chosen) == first | last:
        where = (f"the last {n} tokens are global as well as the first {n} (global tokens at both ends, as in "
                 f"BigBird)")
    else:
        where = f"tokens {chosen} are the global ones"
    return (f"{what}: {where}. In this course the global tokens are the first n_global, 0 ... n_global - 1: True "
            f"in the first n_global rows and columns only")


def global_tokens_mask_values(k):
    """Bool (T, T), True exactly in the first n_global rows and columns, for n_global = 0 up to more than T."""
    fn = k.student("global_tokens_mask")
    for T, n in CASES:
        what = f"global_tokens_mask({T}, {n})"
        problem = global_problem(k.call(what, fn, T, n), T, n, what)
        if problem:
            raise AssertionError(problem)
    what = "global_tokens_mask(5, 2, device='cpu')"
    problem = global_problem(k.call(what, fn, 5, 2, device="cpu"), 5, 2, what)
    if problem:
        raise AssertionError(problem)


def global_tokens_mask_device(k):
    """global_tokens_mask(T, n_global, device=d) makes the mask on d directly (the data-free 'meta' device)."""
    hint = ("create the mask directly on `device`, e.g. from torch.arange(T, device=device) < n_global, or with "
            "torch.zeros(T, T, dtype=torch.bool, device=device)")
    fn = k.student("global_tokens_mask")
    device_check(k, fn, (6, 2), {"device": "meta"}, "global_tokens_mask(6, 2, device='meta')", "meta", hint)
    device_check(k, fn, (4, 1), {"device": torch.device("meta")},
                 "global_tokens_mask(4, 1, device=torch.device('meta'))", "meta", hint)
