"""softmax(x, dim=-1): numerically stable, from exp and sum."""
import torch

from lib.testing import assert_close

from ..common import seeded


def _hints(x, dim):
    hints = {}
    for other in range(x.dim()):
        if other != dim % x.dim():
            hints[f"the values sum to 1 along dim {other}, not along dim={dim}: "
                  f"take the max and the sum over the `dim` argument"] = torch.softmax(x, other)
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    s = e.sum(dim=dim)
    if x.dim() == 2 and dim % 2 == 1 and x.shape[0] == x.shape[1]:
        hints["the sum lost its dimension and broadcast along the wrong axis: "
              "use .sum(dim=dim, keepdim=True)"] = e / s
    hints["this is exp(x) without dividing by the sum"] = e
    return hints


def not_a_distribution(dim):
    """For ``assert_close``'s diagnose: an answer whose slices along ``dim`` do not sum to 1 (something else in the
    denominator, as in Burn's quiet softmax, which adds exp(-max): room for attending to nothing)."""
    def why(actual):
        sums = actual.double().sum(dim)
        if not torch.isfinite(sums).all() or (sums - 1).abs().max() <= 1e-3:
            return None
        low, high = sums.min().item(), sums.max().item()
        spread = f"{low:.3g}" if high - low < 1e-3 else f"between {low:.3g} and {high:.3g}"
        return (f"the values along dim={dim} sum to {spread}, not 1: a softmax divides each exp(x_i - max) by the "
                f"sum of those exponentials over dim, and by nothing else")
    return why


def softmax_reference(k):
    """softmax equals torch.softmax on random inputs, any dim, any dtype."""
    softmax = k.student("softmax")
    g = seeded(1)
    cases = [((5,), -1), ((4, 4), -1), ((4, 4), 0), ((2, 3, 6), -1), ((2, 3, 6), 1), ((3, 5, 5), -1)]
    for shape, dim in cases:
        x = torch.randn(shape, generator=g) * 3
        what = f"softmax(x of shape {shape}, dim={dim})"
        actual = k.call(what, softmax, x, dim=dim)
        assert_close(actual, torch.softmax(x, dim), what, hints=_hints(x, dim), diagnose=not_a_distribution(dim))
    x = torch.randn(3, 4, generator=g, dtype=torch.float64)
    actual = k.call("softmax on a float64 tensor", softmax, x)
    assert_close(actual, torch.softmax(x, -1), "softmax on a float64 tensor (keep the input's dtype)", atol=1e-9)
    x = torch.randn(2, 3, 4, generator=g)
    actual = k.call("softmax(x of shape (2, 3, 4)), dim left out", softmax, x)
    assert_close(actual, torch.softmax(x, -1), "softmax(x of shape (2, 3, 4)) with dim left out", hints={
        f"with dim left out it normalizes dim {other}: the default must be dim=-1, the last dimension":
            torch.softmax(x, other) for other in (0, 1)})


def softmax_stable(k):
    """No overflow for large inputs; -inf entries get weight 0."""
    softmax = k.student("softmax")
    inf = float("inf")
    probes = [  # input, what it is, what a NaN or inf in the answer means
        ([[1000.0, 1001.0, 1002.0]], "softmax([[1000, 1001, 1002]])",
         "softmax gives NaN or inf for large inputs such as [1000, 1001, 1002]: exp(1000) overflows. "
         "Subtract the maximum along `dim` before exp; the result does not change"),
        ([[0.0, 1.0, 2.0], [-1000.0, -999.0, -998.0]], "softmax([[0, 1, 2], [-1000, -999, -998]])",
         "softmax gives NaN for a row of large negative values when another row is near 0: "
         "subtract the max of each row (x.amax(dim=dim, keepdim=True)), not the max of the whole tensor"),
        ([[0.0, -inf, 1.0]], "softmax([[0, -inf, 1]])",
         "softmax gives NaN when a score is -inf: a -inf score must get weight exactly 0"),
    ]
    for values, what, nan_message in probes:
        x = torch.tensor(values)
        out = k.call(what, softmax, x, dim=-1)
        if torch.is_tensor(out) and out.shape == x.shape and not torch.isfinite(out).all():
            raise AssertionError(nan_message)
        assert_close(out, torch.softmax(x, -1), what, hints=_hints(x, -1), diagnose=not_a_distribution(-1))
