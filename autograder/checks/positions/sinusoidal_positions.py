"""sinusoidal_positions(max_len, d_model): the (max_len, d_model) float32 table; ValueError for an odd d_model."""
import torch

from lib.testing import assert_close, assert_shape

from ..common import scaled
from ..kernel import StudentError
from . import expected_table, table


def _hints(max_len, d_model):
    t = lambda **kw: table(max_len, d_model, **kw).float()  # noqa: E731
    return {
        "sin and cos are swapped: sin goes on the even dimensions (0, 2, 4, ...) and cos on the odd ones":
            t(first="cos"),
        "sin fills the first half of the dimensions and cos the second half (the common slide erratum): "
        "interleave them, PE[p, 2i] = sin and PE[p, 2i+1] = cos":
            t(layout="halves"),
        "cos fills the first half of the dimensions and sin the second half: interleave them, "
        "PE[p, 2i] = sin and PE[p, 2i+1] = cos":
            t(layout="halves", first="cos"),
        "every dimension is a sine: the odd dimensions 2i+1 hold cos, with the frequency of dimension 2i":
            t(first="sin only", freq="k"),
        "the exponent uses i instead of 2i: divide by 10000^(2i/d_model), where 2i is the even dimension's index":
            t(freq="i"),
        "dimension 2i+1 must use the same frequency as dimension 2i, 10000^(2i/d_model), "
        "not 10000^((2i+1)/d_model): a sin/cos pair shares one frequency":
            t(freq="k"),
        "every dimension j gets a frequency of its own, 10000^(2j/d_model) with j the dimension's index: the "
        "exponent is 2i/d_model with i the index of the sin/cos pair, so dimensions 2i and 2i+1 share one frequency "
        "(for dimension j, 2 * (j // 2) / d_model)":
            t(freq="2k"),
        "the frequencies start one pair too late: i runs from 0, so dimensions 0 and 1 are sin(p) and cos(p)":
            t(freq="2i+2"),
        "every pair turns at the same frequency 1: was 2i / d_model computed with integer division (//)? "
        "It is a fraction between 0 and 1":
            t(freq="none"),
        "positions start at 0, not 1: the first row must be sin(0) = 0 and cos(0) = 1":
            t(start=1),
        "p is multiplied by 10000^(2i/d_model); divide it instead (the wavelengths grow with the dimension)":
            t(op="multiply"),
        "the table is transposed: rows are positions (max_len), columns are dimensions (d_model)":
            t().T,
    }


def sinusoidal_positions_formula(k):
    """Equals PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(same), in float32, for several sizes."""
    fn = k.student("sinusoidal_positions")
    # a small case first, where every known mistake is far from the right table
    # (loose tolerance: float32 rounding of large angles must not hide a hint)
    cases = [((5, 4), 1e-3), ((50, 16), 1e-4), ((1, 2), 1e-4), ((20, 6), 1e-4), ((64, 64), 1e-4), ((12, 10), 1e-4)]
    for (max_len, d_model), atol in cases:
        what = f"sinusoidal_positions({max_len}, {d_model})"
        pe = k.call(what, fn, max_len, d_model)
        if torch.is_tensor(pe) and pe.dtype != torch.float32 and pe.is_floating_point():
            raise AssertionError(f"{what} has dtype {pe.dtype}: build the table in float32, PyTorch's default "
                                 f"(for example from torch.arange(max_len, dtype=torch.float32))")
        _layout(pe, what, d_model)
        expected = expected_table(max_len, d_model)
        assert_close(pe, expected, what, atol=atol, hints=_hints(max_len, d_model), diagnose=scaled(
            expected, {"sqrt(d_model)": d_model ** 0.5, "d_model": float(d_model)},
            "the table is sin and cos themselves, between -1 and 1, with no scale (a scale such as sqrt(d_model) "
            "goes on the token embeddings, if anywhere)"))


def _layout(pe, what, d_model):
    """Position 0 has angle 0 everywhere, so its row shows where the sines (0) and the cosines (1) sit, whatever
    the frequencies: [0, 1, 0, 1, ...] here; [0, ..., 0, 1, ..., 1] in the two-halves layout (tensor2tensor's, and
    some slides'); [1, 0, 1, 0, ...] with sin and cos swapped."""
    if not torch.is_tensor(pe) or pe.dim() != 2 or pe.shape[1] != d_model or d_model < 4 or pe.dtype.is_complex:
        return
    row = pe[0].double()
    half = d_model // 2
    halves = torch.cat([torch.zeros(half), torch.ones(d_model - half)]).double()
    if torch.allclose(row, halves, atol=1e-4):
        raise AssertionError(f"{what}: row 0 is {[round(v, 3) for v in row.tolist()]}: the sines fill the first half "
                             f"of the features and the cosines the second (concatenated halves). Interleave them: "
                             f"sin at the even columns 2i, cos at the odd columns 2i+1, both of frequency i")


def sinusoidal_positions_odd(k):
    """A ValueError for an odd d_model; even sizes (including d_model = 2) still work."""
    fn = k.student("sinusoidal_positions")
    for max_len, d_model in [(4, 2), (3, 8)]:
        what = f"sinusoidal_positions({max_len}, {d_model})"
        assert_shape(k.call(what, fn, max_len, d_model), (max_len, d_model), what)
    for max_len, d_model in [(10, 7), (3, 1)]:
        what = f"sinusoidal_positions({max_len}, {d_model})"
        try:
            out = k.call(what, fn, max_len, d_model)
        except StudentError as e:
            if "ValueError" in e.types:
                continue
            if "NotImplementedError" in e.types or "ForbiddenCall" in e.types:
                raise
            instead = f"raised {e.kind} ({e.raw})"
        else:
            instead = f"returned {'a tensor of shape ' + str(tuple(out.shape)) if torch.is_tensor(out) else _kind(out)}"
        raise AssertionError(
            f"{what} {instead}. sin and cos come in pairs, so an odd d_model has no valid table: "
            f"check it first and raise a ValueError that says d_model must be even")


def _kind(value) -> str:
    return getattr(value, "description", None) or f"a {type(value).__name__}"
