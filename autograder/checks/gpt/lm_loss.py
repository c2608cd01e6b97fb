"""lm_loss(logits, targets, pad_id=None): the mean cross-entropy of next-token prediction. logits (B, T, V) were
computed from targets (B, T), so position t's logits predict targets[:, t + 1]: the last position predicts nothing
and the first token is never predicted. Positions whose target is pad_id are left out of the mean."""
import torch

from lib.testing import assert_close

from ..kernel import StudentError

NAME = "lm_loss"


def expected(logits, targets, pad_id=None, shift=1, pad_side="targets", reduce="mean", log=True, pad_default=None):
    """The loss as the exercise asks, or with one mistake put in on purpose; None if that cannot run."""
    try:
        if shift == 1:
            lg, tg, before = logits[:, :-1], targets[:, 1:], targets[:, :-1]
        elif shift == 0:
            lg, tg, before = logits, targets, targets
        else:  # the logits shifted the wrong way: logits[:, 1:] against targets[:, :-1]
            lg, tg, before = logits[:, 1:], targets[:, :-1], targets[:, 1:]
        p = lg.double()
        log_probs = p - p.logsumexp(-1, keepdim=True) if log else torch.softmax(p, -1)
        nll = -log_probs.gather(-1, tg.unsqueeze(-1)).squeeze(-1)
        pad_id = pad_default if pad_id is None else pad_id
        keep = torch.ones_like(nll, dtype=torch.bool)
        if pad_id is not None and pad_side is not None:
            keep = (tg if pad_side == "targets" else before) != pad_id
        if reduce == "mean":
            out = nll[keep].mean()
        elif reduce == "sum":
            out = nll[keep].sum()
        elif reduce == "all_T":   # the sum divided by B * T, the positions before the shift
            out = nll[keep].sum() / logits.shape[0] / logits.shape[1]
        elif reduce == "rows":    # a mean per sequence, then the mean of those
            out = ((nll * keep).sum(-1) / keep.sum(-1)).mean()
        else:                     # the padding zeroed, but counted in the mean
            out = (nll * keep).mean()
        return out.to(logits.dtype)
    except (RuntimeError, IndexError):
        return None


def _hints(logits, targets, pad_id):
    hints = {
        "no shift: position t's logits are scored against targets[:, t], the token they were computed from. They "
        "predict the next one: compare logits[:, :-1] with targets[:, 1:]": dict(shift=0),
        "the shift goes the wrong way: logits[:, 1:] are scored against targets[:, :-1], so each position predicts "
        "the token before it. Compare logits[:, :-1] with targets[:, 1:]": dict(shift=-1),
        "the loss is a sum over positions: take the mean over the positions that count": dict(reduce="sum"),
        "the sum is divided by B * T, but a row of T tokens makes T - 1 predictions: take the mean over the "
        "positions that count after the shift, nll.mean()": dict(reduce="all_T"),
        "the loss takes minus the probability of the right token, not minus its log-probability: "
        "cross-entropy is -log p": dict(log=False),
    }
    if pad_id is not None:
        hints.update({
            "padding is not left out: positions whose target is pad_id must not count": dict(pad_side=None),
            "the padding is read off the inputs (targets[:, :-1]), not off what is predicted (targets[:, 1:]): "
            "leave out the positions whose *target* is pad_id": dict(pad_side="inputs"),
            "the loss is a mean per sequence, then a mean over sequences, which weighs the tokens of short "
            "sequences more: take one mean over all the positions that count": dict(reduce="rows"),
            "the padded positions are zeroed but still counted in the mean: divide by the number of positions "
            "that count, not by all of them": dict(reduce="zeroed"),
        })
    else:
        hints["pad id 0 is left out although pad_id=None: with no pad_id, every position counts"] = \
            dict(pad_default=0)
    found = {}
    for message, kwargs in hints.items():
        got = expected(logits, targets, pad_id, **kwargs)
        if got is not None:
            found[message] = got
    return found


def run(k, what, logits, targets, pad_id=None):
    kwargs = {} if pad_id is None else {"pad_id": pad_id}
    try:
        out = k.call(what, k.student(NAME), logits, targets, **kwargs)
    except StudentError as e:
        text = str(e)
        if not {"NotImplementedError", "ForbiddenCall"} & set(e.types) and "view size is not compatible" in e.raw:
            text = text.rstrip(".") + (". targets[:, 1:] and logits[:, :-1] are slices, not contiguous in memory, "
                                       "so .view cannot flatten them: use .reshape(-1) (or .contiguous().view(-1))")
        elif not {"NotImplementedError", "ForbiddenCall"} & set(e.types) and "shape" in e.raw:
            text += (". logits[:, :-1] is (B, T-1, V) and targets[:, 1:] is (B, T-1): gather the log-probability of "
                     "each target, log_probs.gather(-1, targets.unsqueeze(-1)), or flatten both first")
        raise AssertionError(text) from None
    if not torch.is_tensor(out):
        kind = getattr(out, "description", None) or f"a {type(out).__name__}"
        raise AssertionError(f"{what} should return a tensor (a scalar, so that .backward() works), got {kind}")
    if out.dim() != 0:
        raise AssertionError(f"{what} returns shape {tuple(out.shape)}: return the mean loss, one number "
                             f"(a 0-dim tensor)")
    return out


def compare(k, what, logits, targets, pad_id=None, atol=1e-5):
    out = run(k, what, logits, targets, pad_id)
    assert_close(out, expected(logits, targets, pad_id), what, atol=atol, hints=_hints(logits, targets, pad_id))


def _case(g, b, t, v, scale=2.0, dtype=torch.float32):
    logits = (torch.randn(b, t, v, generator=g, dtype=torch.float64) * scale).to(dtype)
    targets = torch.randint(0, v, (b, t), generator=g)
    return logits, targets


# --- graded cells ---------------------------------------------------------------------------------

def lm_loss_values(k):
    """Equals the mean cross-entropy of logits[:, :-1] against targets[:, 1:], computed here: several shapes,
    T = 2 (one prediction per row), float64, and logits in the hundreds (a stable log-softmax)."""
    g = torch.Generator().manual_seed(1001)
    for b, t, v, scale, dtype in [(2, 6, 11, 2.0, torch.float32), (3, 2, 5, 1.0, torch.float32),
                                  (1, 9, 7, 3.0, torch.float64), (2, 5, 13, 300.0, torch.float32)]:
        logits, targets = _case(g, b, t, v, scale, dtype)
        what = f"{NAME}(logits {tuple(logits.shape)} in {dtype}" + (", in the hundreds" if scale > 10 else "") + \
            f", targets {tuple(targets.shape)})"
        if scale > 10:
            out = run(k, what, logits, targets)
            if not torch.isfinite(out):
                raise AssertionError(f"{what} is {out.item()}: the log-softmax is not computed stably. With logits "
                                     f"in the hundreds, exp overflows to inf, or the softmax of an unlikely token "
                                     f"underflows to 0 and log(0) = -inf. Take it as logits - logits.logsumexp(-1, "
                                     f"keepdim=True) (or subtract the row's maximum before exp)")
        compare(k, what, logits, targets, atol=1e-9 if dtype == torch.float64 else 1e-4)


def lm_loss_pad(k):
    """Positions whose target is pad_id do not count (pad_id 0 and 3, padding at the end of rows of different
    lengths); a pad token among the inputs only, at position 0, changes nothing; pad_id=None counts every position."""
    g = torch.Generator().manual_seed(1002)
    for pad_id, lengths in [(0, [6, 3, 5]), (3, [2, 6, 4])]:
        logits, targets = _case(g, 3, 6, 9)
        targets = targets.masked_fill(targets == pad_id, (pad_id + 1) % 9)
        for row, n in enumerate(lengths):
            targets[row, n:] = pad_id
        compare(k, f"{NAME}(logits {tuple(logits.shape)}, targets with padding at the end, pad_id={pad_id})",
                logits, targets, pad_id)
    logits, targets = _case(g, 2, 5, 7)
    targets[:, 0] = 4
    compare(k, f"{NAME}(logits {tuple(logits.shape)}, targets whose first token is pad_id=4, pad_id=4)",
            logits, targets, 4)
    targets = targets.masked_fill(targets == 0, 1)
    targets[0, 3] = 0
    compare(k, f"{NAME}(logits {tuple(logits.shape)}, targets holding a 0, pad_id=None)", logits, targets)
