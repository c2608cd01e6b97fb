"""Helpers every judge uses: checking the shape of an answer, describing modules, masks for torch."""
import torch

from .kernel import Kernel, ModuleInfo, Remote, StudentError


# A mask whose polarity is PyTorch's: one wording for every judge that meets it
INVERTED_MASK = ("the mask's polarity is inverted: True is taken as 'masked', the convention of PyTorch's attn_mask "
                 "and key_padding_mask (nn.MultiheadAttention, nn.Transformer*). In this course True means 'may "
                 "attend'")
ADDED_MASK = ("the boolean mask is added to the scores (True counts as 1, False as 0), the way an additive float "
              "mask is used (timm's and Hugging Face's attention add theirs): a masked key keeps its weight. Fill the "
              "scores where the mask is False with -inf instead")


def added_mask(scores, mask):
    """The weights attention gives when it adds a boolean ``mask`` to ``scores`` (the slip ``ADDED_MASK`` names)."""
    return torch.softmax(scores + mask.to(scores.dtype), -1)


ALWAYS_CAUSAL = ("a causal mask is applied although none was given (mask=None): a decoder-only model's attention "
                 "(nanoGPT's, say) always hides the future, but this layer masks only with the mask it is given")


def unpack_pair(result, what: str):
    """Attention functions return (output, weights): check that shape of the answer."""
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise AssertionError(f"{what} should return a pair (output, weights), got {_kind(result)}")
    return result


def plain(value, what: str):
    """``value`` if it holds only lists, tuples, dicts, strings and numbers (an object the kernel kept, such as
    a str subclass whose == is always true, is refused)."""
    if isinstance(value, Remote):
        raise AssertionError(f"{what} contains {value.description}; expected lists, tuples, dicts, strings and "
                             f"numbers only")
    if type(value) in (list, tuple, set, frozenset):
        for v in value:
            plain(v, what)
    elif isinstance(value, dict):
        for k, v in value.items():
            plain(k, what)
            plain(v, what)
    return value


def _kind(value) -> str:
    return value.description if isinstance(value, Remote) else f"a {type(value).__name__}"


def module(k: Kernel, obj, what: str) -> ModuleInfo:
    """The description of ``obj``, which must be an nn.Module built by the student's class."""
    if not isinstance(obj, Remote) or not obj.module:
        raise AssertionError(f"{what} should be an nn.Module (class ...(nn.Module)), got {_kind(obj)}")
    return k.describe(obj)


def load_reference(k: Kernel, model, info: ModuleInfo, reference, what: str, attributes: str) -> None:
    """Copy ``reference``'s parameters into the student's ``model`` by name (extra buffers of the student's are
    fine); when they do not fit, fail naming the attributes the exercise asks for."""
    weights = reference.state_dict()
    problems = k.load(model, weights)
    extra = [name for name in info.all_params() if name not in weights]
    if problems or extra:
        raise AssertionError(
            f"{what}: the reference's parameters do not fit yours. Use exactly the attributes of the exercise "
            f"({attributes}). " + (f"Yours: {'; '.join(problems[:3])}. " if problems else "")
            + (f"Yours has parameters the reference does not: {', '.join(extra[:4])}." if extra else ""))


def linear_problem(info: ModuleInfo | None, name: str, d_in: int, d_out: int, what: str, bias: bool | None = False):
    """Why ``info.<name>`` is not an nn.Linear(d_in, d_out), or None. ``bias``: True (must have one),
    False (must not), None (either)."""
    lin = info.children.get(name) if info is not None else None
    if lin is None or not lin.isa("torch.nn.modules.linear.Linear"):
        return f"{what} should have an nn.Linear `{name}`" + (f", got {lin.name}" if lin is not None else "")
    shape = (lin.attrs.get("in_features"), lin.attrs.get("out_features"))
    if shape != (d_in, d_out):
        return f"{what}.{name} maps {shape[0]} -> {shape[1]} features, expected {d_in} -> {d_out}"
    if bias is True and "bias" not in lin.params:
        return f"{what}.{name} has no bias: keep the default bias=True"
    if bias is False and "bias" in lin.params:
        return f"{what}.{name} has a bias: create it with nn.Linear(..., bias=False)"
    return None


def torch_mask(mask, b: int, h: int, t_q: int, t_k: int | None = None):
    """Our boolean mask (True = may attend), broadcastable to (B, T_q, T_k) -> the (B*h, T_q, T_k) mask
    of torch's attention modules, where True = blocked."""
    if mask is None:
        return None
    return ~mask.expand(b, t_q, t_k or t_q).repeat_interleave(h, 0)


def seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def raises_value_error(k: Kernel, what: str, target, *args, why: str, **kwargs) -> None:
    """``target(*args, **kwargs)`` must raise ValueError (``why``: what is wrong with the arguments)."""
    try:
        k.call(what, target, *args, **kwargs)
    except StudentError as e:
        if "ValueError" in e.types:
            return
        if "AssertionError" in e.types:
            raise AssertionError(f"{what} raised AssertionError: raise ValueError(...) instead of using assert "
                                 f"(asserts vanish under python -O, and callers catch ValueError)") from None
        if {"NotImplementedError", "ForbiddenCall"} & set(e.types):
            raise
        raise AssertionError(f"{e}; it should raise ValueError") from None
    raise AssertionError(f"{what} did not raise ValueError: {why}")


def scaled(expected, named: dict, fix: str):
    """For ``assert_close``'s diagnose: an answer that is the expected one times a constant c != 1 (least squares,
    within 1e-3 relative). ``named`` maps a factor's name to its value ({"sqrt(d_model)": 8.0}); a c that is one of
    them or its inverse is said by name. ``fix`` says what to do."""
    def why(actual):
        e, a = expected.double().flatten(), actual.double().flatten()
        if not torch.isfinite(a).all() or e.norm() == 0:
            return None
        c = (a @ e / (e @ e)).item()
        if abs(c) < 1e-6 or abs(c - 1) < 1e-3 or (a - c * e).norm() > 1e-3 * a.norm().clamp(min=1e-12):
            return None
        said = f"{c:.4g} times the expected values"
        for name, value in named.items():
            if abs(c - value) < 1e-3 * value:
                said = f"the expected values multiplied by {name} = {value:.4g}"
            elif abs(c * value - 1) < 1e-3:
                said = f"the expected values divided by {name} = {value:.4g}"
        return f"every value is {said}: {fix}"
    return why
