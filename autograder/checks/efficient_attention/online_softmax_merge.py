"""online_softmax_merge(m1, s1, m2, s2) -> (m, s): the running maximum and sum of exponentials of two blocks of a
row, from each block's own: m = max(m1, m2), s = s1·exp(m1 − m) + s2·exp(m2 − m). A block whose scores are all
masked has m = −inf and s = 0 and changes nothing; two such blocks give (−inf, 0).

The three parts judge three things: the merge of two blocks (``values``), blocks with no score (``masked``), and
merging many blocks one after another, in any order, with the function's own results fed back (``order``).
"""
import torch

from lib.testing import assert_close, assert_shape, is_close

from ..common import seeded
from ..kernel import StudentError

NAME = "online_softmax_merge"
NO_RESCALE = ("the two sums are added as they are: each was computed relative to its own block's maximum, so "
              "before adding, bring both to the new maximum m: s = s1·exp(m1 − m) + s2·exp(m2 − m)")
INVERTED = ("the sums are rescaled by exp(m − m1) and exp(m − m2), the factors upside down: a sum computed "
            "relative to m1 becomes one relative to the larger m when multiplied by exp(m1 − m), which is at most 1")
ONLY_FIRST = ("only s1 is rescaled to the new maximum: s2 was also computed relative to its own maximum m2, so it "
              "needs exp(m2 − m) too (it is 1 only when the second block holds the maximum)")
ONLY_SECOND = ("only s2 is rescaled to the new maximum: s1 was also computed relative to its own maximum m1, so it "
               "needs exp(m1 − m) too (it is 1 only when the first block holds the maximum)")
TO_SECOND = ("both sums are brought to the second block's maximum m2, as if the newer block always held the "
             "larger scores: bring them to m = max(m1, m2), which either block may hold")
OVERFLOW = ("large maxima (in the hundreds) give inf or NaN: exp(m1) itself overflows float32 above about 88. "
            "Combine the blocks with exp(m1 − m) and exp(m2 − m), which are at most 1, never with exp(m1) and "
            "exp(m2) on their own")
BASE_TWO = ("the sums are rescaled with 2**(m1 − m) and 2**(m2 − m), a base-2 exponential (exp2, as kernels that keep "
            "base-2 statistics of log2(e)-scaled scores do): here m and s are natural-base, s = Σ exp(x − m), so "
            "rescale with exp(m1 − m) and exp(m2 − m)")
EMPTY_NAN = ("two blocks whose maxima are both -inf (every score masked) give NaN: exp(m1 − m) is then "
             "exp(−inf − (−inf)) = exp(NaN). Where m is -inf, use 0 in place of m in the exponents "
             "(torch.where), so that the sum stays 0")


def stats(x, keepdim=True):
    """The maximum and the sum of exp(x − max) of each row of x (last dim); (−inf, 0) for a row of −inf."""
    m = x.amax(-1, keepdim=True)
    s = (x - finite(m)).exp().sum(-1, keepdim=True)
    return (m, s) if keepdim else (m.squeeze(-1), s.squeeze(-1))


def finite(m):
    """m with -inf replaced by 0, so that exp(x - m) is 0, not NaN, where x = m = -inf."""
    return torch.where(m == float("-inf"), torch.zeros_like(m), m)


def merged(m1, s1, m2, s2, variant=None):
    """The right merge, or with one mistake put in (for the hints)."""
    m = torch.maximum(m1, m2)
    if variant == "to_second":
        m = m2
    f = finite(m)
    a, b = (m1 - f).exp(), (m2 - f).exp()
    s = {None: s1 * a + s2 * b, "to_second": s1 * a + s2 * b, "no_rescale": s1 + s2,
         "inverted": s1 / a + s2 / b, "only_first": s1 * a + s2, "only_second": s1 + s2 * b,
         "base_two": s1 * 2.0 ** (m1 - f) + s2 * 2.0 ** (m2 - f)}[variant]
    return m, s


HINTS = (("no_rescale", NO_RESCALE), ("inverted", INVERTED), ("only_first", ONLY_FIRST),
         ("only_second", ONLY_SECOND), ("to_second", TO_SECOND), ("base_two", BASE_TWO))


def call(k, what, m1, s1, m2, s2, args_after=False):
    """The student's (m, s) for these blocks: two tensors of the blocks' broadcast shape."""
    try:
        trace = k.trace(what, k.student(NAME), m1, s1, m2, s2, args_after=args_after)
    except StudentError as e:
        if "ambiguous" in e.raw:
            raise AssertionError(f"{e}. Python's max(m1, m2) compares whole tensors: take the larger of each pair "
                                 f"of entries with torch.maximum(m1, m2)") from None
        raise AssertionError(str(e)) from None
    got = trace.value
    if not isinstance(got, (tuple, list)) or len(got) != 2 or not all(torch.is_tensor(t) for t in got):
        raise AssertionError(f"{what} should return a pair of tensors (m, s), got {type(got).__name__}")
    shape = torch.broadcast_shapes(m1.shape, s1.shape, m2.shape, s2.shape)
    for value, name in zip(got, ("m", "s")):
        assert_shape(value, shape, f"{name} returned by {what}")
    m_ref, s_ref = merged(m1, s1, m2, s2)
    if not is_close(got[0], m_ref) and is_close(got[0], s_ref) and is_close(got[1], m_ref):
        raise AssertionError(f"{what} returns (s, m): return the maximum first, (m, s)")
    return (*got, trace.args) if args_after else got


OTHER_REFERENCE = ("the pair describes the right total, s·e^m, but m is not the larger of the two maxima: it is "
                   "measured against another reference (a log-sum-exp, m + log s, as SGLang's merge_state keeps). "
                   "Return m = max(m1, m2) and s, the sum of exp(x − m), against it")


def judge_pair(got, m1, s1, m2, s2, what):
    """Compare (m, s) with the right merge; name the usual mistakes."""
    m, s = got
    m_ref, s_ref = merged(m1, s1, m2, s2)
    if not is_close(m, m_ref):
        if is_close(m, m2):
            raise AssertionError(f"{what}: m is m2, the second block's maximum, where the first block holds the "
                                 f"larger one: {TO_SECOND}")
        if torch.is_tensor(s) and s.shape == s_ref.shape and is_close(s * (m - m_ref).exp(), s_ref):
            raise AssertionError(f"{what}: {OTHER_REFERENCE}")
        assert_close(m, m_ref, f"m returned by {what} (the larger of m1 and m2: torch.maximum(m1, m2))")
    if not bool(torch.isfinite(s).all()) and bool(torch.isfinite(s_ref).all()):
        big = max(m1.abs().max().item(), m2.abs().max().item())
        if big > 80:
            raise AssertionError(f"{what}: {OVERFLOW}")
    assert_close(s, s_ref, f"s returned by {what}", atol=1e-5, rtol=1e-4,
                 hints={message: merged(m1, s1, m2, s2, variant)[1] for variant, message in HINTS})


# --- graded cells ---------------------------------------------------------------------------------

def online_softmax_merge_values(k):
    """Two blocks of rows (either may hold the maximum), as (..., 1) columns, as plain (...) tensors, as 0-dim
    tensors, in float64, and with maxima in the hundreds: m and s of the whole row."""
    g = seeded(1101)
    cases = [  # shape of the rows, where the first block ends, scale, shift, dtype, keepdim
        ((3, 4, 10), 4, 3.0, 0.0, torch.float32, True),
        ((2, 5, 7), 3, 3.0, 0.0, torch.float32, False),
        ((6,), 2, 2.0, 0.0, torch.float32, False),
        ((2, 3, 9), 5, 4.0, 0.0, torch.float64, True),
        ((4, 8), 3, 60.0, 300.0, torch.float32, True),
    ]
    for shape, split, scale, shift, dtype, keepdim in cases:
        x = torch.randn(*shape, generator=g, dtype=dtype) * scale + shift
        x[..., 0] += scale * 4 * (torch.arange(x[..., 0].numel()).reshape(x[..., 0].shape) % 2)  # max in block 1
        (m1, s1), (m2, s2) = stats(x[..., :split], keepdim), stats(x[..., split:], keepdim)      # in half the rows
        what = f"{NAME}(m1, s1, m2, s2) with m1, s1, m2, s2 of shape {tuple(m1.shape)} ({dtype})"
        if shift:
            what += ", scores around 300"
        got = call(k, what, m1, s1, m2, s2)
        judge_pair(got, m1, s1, m2, s2, what)
        m, s = stats(x, keepdim)  # and the whole row's, as the exercise states it
        assert_close(got[1], s, f"s returned by {what} (the sum of exp(x − m) over the whole row)",
                     atol=1e-9 if dtype == torch.float64 else 1e-5)


def online_softmax_merge_masked(k):
    """A block with maximum −inf and sum 0 (all its scores masked) leaves the other unchanged, on either side;
    two of them give (−inf, 0), without NaN; rows of each kind side by side."""
    g = seeded(1102)
    x = torch.randn(4, 6, generator=g) * 3
    (m_a, s_a), (m_b, s_b) = stats(x[:, :2]), stats(x[:, 2:])
    empty_m, empty_s = torch.full_like(m_a, float("-inf")), torch.zeros_like(s_a)
    for (m1, s1, m2, s2), where in [((empty_m, empty_s, m_b, s_b), "the first block is empty"),
                                    ((m_a, s_a, empty_m, empty_s), "the second block is empty")]:
        what = f"{NAME}(m1, s1, m2, s2) where {where} (max -inf, sum 0)"
        m, s = call(k, what, m1, s1, m2, s2)
        if torch.isnan(m).any() or torch.isnan(s).any():
            raise AssertionError(f"{what} gives NaN: a block with no score has max -inf and sum 0, and must leave "
                                 f"the other block's (m, s) unchanged")
        keep = (m_b, s_b) if m1 is empty_m else (m_a, s_a)
        assert_close(m, keep[0], f"m returned by {what} (the other block's maximum)")
        assert_close(s, keep[1], f"s returned by {what} (the other block's sum)")
    what = f"{NAME}(m1, s1, m2, s2) where both blocks are empty (max -inf, sum 0)"
    m, s = call(k, what, empty_m, empty_s, empty_m, empty_s)
    if torch.isnan(s).any() or torch.isnan(m).any():
        raise AssertionError(f"{what}: {EMPTY_NAN}")
    if not bool((m == float("-inf")).all()):
        raise AssertionError(f"{what} gives m = {m.flatten()[0].item()}: the maximum of no score stays -inf, so "
                             f"that a block merged later brings its own maximum")
    assert_close(s, empty_s, f"s returned by {what} (no score: 0)")
    rows = torch.stack([m_a[:, 0], empty_m[:, 0]], 1), torch.stack([s_a[:, 0], empty_s[:, 0]], 1)
    other = torch.stack([empty_m[:, 0], empty_m[:, 0]], 1), torch.stack([empty_s[:, 0], empty_s[:, 0]], 1)
    what = f"{NAME}(m1, s1, m2, s2) on (4, 2) rows where the second block is empty everywhere and the first in column 1"
    got = call(k, what, *rows, *other)
    if torch.isnan(got[0]).any() or torch.isnan(got[1]).any():
        raise AssertionError(f"{what}: {EMPTY_NAN}")
    judge_pair(got, *rows, *other, what)


def online_softmax_merge_order(k):
    """The blocks of a row (sizes 1 to 8, one of them empty) merged one after another from the empty state
    (−inf, 0), left to right and right to left, and as a tree, with the function's own results fed back: every
    order gives the whole row's m and s. The arguments are left as they were."""
    g = seeded(1103)
    x = torch.randn(3, 23, generator=g) * 4
    x[0, 3] += 12.0  # each row's maximum in another block: 1, 4 and 5
    x[1, 15] += 12.0
    x[2, 20] += 12.0
    cuts = [0, 1, 8, 11, 11, 19, 23]  # one empty block (11:11)
    blocks = [stats(x[:, a:b]) if b > a else (torch.full((3, 1), float("-inf")), torch.zeros(3, 1))
              for a, b in zip(cuts, cuts[1:])]
    m_all, s_all = stats(x)
    what = f"{NAME}(m1, s1, m2, s2) on (3, 1) columns"
    judge_pair(call(k, what, *blocks[4], *blocks[1]), *blocks[4], *blocks[1], what)  # a slip of two blocks, in
    given = [t.clone() for t in (*blocks[1], *blocks[4])]                                # the first part's words
    m, s, args = call(k, what, *given, args_after=True)
    judge_pair((m, s), *blocks[1], *blocks[4], what)
    for before, after, name in zip((*blocks[1], *blocks[4]), args or (), ("m1", "s1", "m2", "s2")):
        if torch.is_tensor(after) and not torch.equal(before, after):
            raise AssertionError(f"{what} changes its argument {name} in place: return new tensors and leave the "
                                 f"arguments as they were (the caller may still need them)")

    def fold(order):
        state = (torch.full((3, 1), float("-inf")), torch.zeros(3, 1))
        for i in order:
            state = call(k, what, *state, *blocks[i])
        return state

    def tree(part):
        if len(part) == 1:
            return blocks[part[0]]
        half = len(part) // 2
        return call(k, what, *tree(part[:half]), *tree(part[half:]))

    n = len(blocks)
    for name, (m, s) in [("left to right, starting from (-inf, 0)", fold(range(n))),
                         ("right to left, starting from (-inf, 0)", fold(reversed(range(n)))),
                         ("as a tree (pairs of blocks, then pairs of pairs)", tree(list(range(n)))),
                         ("in the order 4, 0, 5, 2, 1, 3", fold([4, 0, 5, 2, 1, 3]))]:
        what_all = f"merging the blocks of 23 scores (sizes 1, 7, 3, 0, 8, 4) {name}"
        assert_close(m, m_all, f"m after {what_all} (the whole row's maximum)")
        assert_close(s, s_all, f"s after {what_all} (the whole row's sum of exp(x − m))")
