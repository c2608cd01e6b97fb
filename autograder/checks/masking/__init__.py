"""Hidden tests of notebook 04 (masking), one module per exercise.

A mask is checked three ways: its values against the reference (with the
usual mistakes named), its effect inside attention (PyTorch's
``F.scaled_dot_product_attention``, run here in the grader on the student's
mask: nothing leaks from the future, padding changes nothing for real
tokens, the shapes broadcast with heads), and its device (the data-free
'meta' device: the kernel records the device of every tensor the code makes).
"""
import torch
import torch.nn.functional as F

from lib.testing import first_difference

from ..kernel import Bans, Remote, StudentError

REFERENCES = {  # exercise -> its references in lib.masking, in the notebook's order
    "causal_mask": ("causal_mask",),
    "padding_mask": ("padding_mask",),
}
# No PyTorch operator builds these masks for you; only the course's references must stay off.
BANS = Bans(references=tuple(n for v in REFERENCES.values() for n in v))

DTYPE_HINT = ("a mask must be boolean (dtype=torch.bool), True = may attend. A float 0/1 mask is not a boolean "
              "mask: attention functions such as F.scaled_dot_product_attention add a float mask to the scores, "
              "so 0 and 1 block nothing, and masked_fill refuses anything but bool. Create it with "
              "dtype=torch.bool or end with .bool()")


def as_tensor(result, what):
    if not torch.is_tensor(result):
        kind = result.description if isinstance(result, Remote) else f"a {type(result).__name__}"
        raise AssertionError(f"{what} should return a tensor, got {kind}")
    return result


def additive_problem(mask, what):
    """An additive float mask (0 to keep, -inf or a large negative number to hide: PyTorch's float attn_mask,
    Hugging Face's extended attention mask), named whatever its shape; or None."""
    if mask.is_floating_point() and mask.numel() and bool((mask <= 0).all()) and bool((mask < -1e3).any()):
        return (f"{what} is an additive float mask (0 to keep, {mask.min().item():.3g} to hide), the form PyTorch's "
                f"float attn_mask and Hugging Face's extended attention mask take. Here a mask is boolean, "
                f"True = may attend, shaped as the exercise asks; attention fills the hidden scores itself")
    return None


def form_problem(mask, shape, what):
    """What is wrong with a mask's shape, dtype or device (the CPU by default), or None."""
    additive = additive_problem(mask, what)
    if additive:
        return additive
    if tuple(mask.shape) != tuple(shape):
        return f"{what} has shape {tuple(mask.shape)}, expected {tuple(shape)}"
    if mask.dtype != torch.bool:
        return f"{what} has dtype {mask.dtype}: {DTYPE_HINT}"
    if mask.device.type != "cpu":
        return f"{what} is on the {mask.device} device, expected the CPU (device=None means the CPU)"
    return None


def mismatch(actual, expected, what):
    idx, a, e = first_difference(actual, expected, 0, 0)
    return f"{what} differs from the expected mask: first at index {idx}, got {bool(a)}, expected {bool(e)}"


def qkv(g, lead, t, d=4):
    return tuple(torch.randn(*lead, t, d, generator=g) for _ in range(3))


def sdpa(q, k, v, mask, what, suffix=""):
    """PyTorch's attention with the student's mask; a mask that does not broadcast is the student's failure."""
    try:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    except RuntimeError as e:
        raise AssertionError(
            f"{what} of shape {tuple(mask.shape)} cannot be used against attention scores of shape "
            f"{tuple(q.shape[:-1]) + (k.shape[-2],)}: {str(e).splitlines()[0]}{suffix}") from None


def device_check(k, fn, args, kwargs, what, target, hint):
    """The mask comes back on ``target`` (the 'meta' device), and no operator made a tensor of data on the CPU."""
    try:
        trace = k.trace(what, fn, *args, hint=hint, watch=True, **kwargs)
    except StudentError as e:
        if "NotImplementedError" in e.types and e.raw:  # a meta tensor refused to give its (missing) data
            raise AssertionError(f"{what} raised {e.kind}: {e.raw.splitlines()[0]} (a tensor made on the CPU "
                                 f"cannot take values from one on another device). {hint}") from None
        raise
    mask = as_tensor(trace.value, what)
    if mask.device.type != target:
        raise AssertionError(f"{what} returned a mask on the {mask.device} device, expected '{target}': {hint}")
    on_cpu = [(op, shape) for op, dev, shape in trace.ops if dev == "cpu" and shape]
    if on_cpu:
        op, shape = on_cpu[0]
        raise AssertionError(
            f"{what} made a tensor of shape {tuple(shape)} on the CPU (operator '{op}') and moved it: {hint}. On a "
            f"GPU, building on the CPU and copying costs a transfer at every call")
