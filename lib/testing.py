"""Readable assertions for the notebooks' checks.

Every failure says what is wrong in a student's terms: the expected and the
actual shape, the first entry that differs, and, where the checks know a
common mistake that would produce exactly this output, its likely cause.
"""
import builtins
import traceback

import torch


PLAIN = (torch.Tensor, torch.nn.Parameter)


class AssertionError(builtins.AssertionError):  # noqa: A001 - the same name, so messages read as before
    """The checks' failure. A notebook shows its traceback without the frames of this module, which would only
    stand between the line of the check cell that failed and the message."""

    def _render_traceback_(self) -> list:  # IPython prints what this returns in place of its own traceback
        frames = [f for f in traceback.extract_tb(self.__traceback__) if f.filename != __file__]
        return ["Traceback (most recent call last):", *(line.rstrip("\n") for line in traceback.format_list(frames)),
                f"AssertionError: {self}"]


def _describe(t) -> str:
    if torch.is_tensor(t):
        return f"shape {tuple(t.shape)}"
    return getattr(t, "description", None) or f"a {type(t).__name__}"  # the grader's objects say what they hold


def _plain(actual, name: str) -> None:
    """Only plain tensors are compared: a subclass could redefine what 'equal' means."""
    if torch.is_tensor(actual) and type(actual) not in PLAIN:
        raise AssertionError(f"{name} is a {type(actual).__name__}, a subclass of torch.Tensor: "
                             f"return a plain torch.Tensor")


def assert_shape(actual, shape, name: str = "output") -> None:
    """Fail unless ``actual`` is a tensor of exactly ``shape``."""
    if not torch.is_tensor(actual):
        raise AssertionError(f"{name} should be a tensor of shape {tuple(shape)}, got {_describe(actual)}")
    _plain(actual, name)
    if tuple(actual.shape) != tuple(shape):
        raise AssertionError(f"{name} has shape {tuple(actual.shape)}, expected {tuple(shape)}")


def first_difference(actual, expected, atol, rtol):
    """Index, actual value and expected value of the first entry outside tolerance, or None."""
    a, e = actual.detach().double().cpu(), expected.detach().double().cpu()
    bad = ~torch.isclose(a, e, atol=atol, rtol=rtol, equal_nan=False)
    if not bad.any():
        return None
    idx = tuple(int(i) for i in bad.nonzero()[0])
    return idx, a[idx].item(), e[idx].item()


def is_close(actual, expected, atol=1e-5, rtol=1e-4) -> bool:
    """True when ``actual`` is a tensor shaped like ``expected`` and equal to it within tolerance."""
    return (
        type(actual) in PLAIN
        and actual.device.type != "meta" and expected.device.type != "meta"
        and actual.shape == expected.shape
        and first_difference(actual, expected, atol, rtol) is None
    )


def assert_close(actual, expected, name: str = "output", atol=1e-5, rtol=1e-4, hints=None, diagnose=None) -> None:
    """Fail unless ``actual`` equals ``expected`` (shape and values, within tolerance).

    ``hints`` maps a message to the output a known mistake produces; when
    ``actual`` matches one of them, the failure names that mistake. ``diagnose``,
    for a class of mistakes no single output stands for, takes ``actual`` (right
    shape and dtype, values wrong) and returns a message naming the cause, or None.
    """
    hints = hints or {}
    if not torch.is_tensor(actual):
        raise AssertionError(f"{name} should be a tensor of shape {tuple(expected.shape)}, got {_describe(actual)}")
    _plain(actual, name)
    if actual.device.type == "meta" and expected.device.type != "meta":
        raise AssertionError(f"{name} is on the 'meta' device (a tensor with no values): make it on the "
                             f"device of the inputs")
    for message, wrong in hints.items():
        if is_close(actual, wrong, atol, rtol) and not is_close(wrong, expected, atol, rtol):
            raise AssertionError(f"{name} is wrong: {message}")
    assert_shape(actual, expected.shape, name)
    if actual.dtype != expected.dtype:
        raise AssertionError(f"{name} has dtype {actual.dtype}, expected {expected.dtype}")
    if not torch.isfinite(actual).all() and torch.isfinite(expected).all():
        raise AssertionError(f"{name} contains NaN or inf where the expected values are all finite")
    diff = first_difference(actual, expected, atol, rtol)
    if diff is not None:
        why = diagnose(actual) if diagnose is not None else None
        if why:
            raise AssertionError(f"{name} is wrong: {why}")
        idx, a, e = diff
        raise AssertionError(f"{name} differs from the expected value: first at index {idx}, got {a:.6g}, expected {e:.6g}")


def report_not_finite(values: dict, cause: str) -> bool:
    """For a demo cell: print which of ``values`` ({label: number or tensor}) are NaN or inf, and ``cause``, the
    likely reason, so that a plot does not silently drop those points. True when all are finite."""
    bad = [label for label, v in values.items()
           if not (torch.isfinite(v).all() if torch.is_tensor(v) else torch.isfinite(torch.tensor(float(v))))]
    if bad:
        print(f"NaN or inf in {', '.join(map(str, bad))}: the plot leaves these points out. {cause}")
    return not bad
