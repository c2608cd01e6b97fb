"""FeedForward's dropout: on the hidden units, with probability `dropout`, survivors scaled by 1/(1 - p),
in train mode only; default dropout=0.0."""
import torch

from lib.testing import assert_shape, is_close

from ..common import seeded
from .feed_forward_module import build, linears, randomize, set_weights


def _dropout_case(k, p, g):
    """FeedForward(6, 6, dropout=p) with identity weights, b1 = 1, b2 = 10, and a positive input x,
    so every hidden unit is x + 1 > 0 and the dropout mask can be read off the output."""
    d = 6
    ff, what, info = build(k, d, d, dropout=p)
    l1, l2 = linears(info, d, d, what)
    values = {"linear1.weight": torch.eye(d), "linear1.bias": torch.ones(d),
              "linear2.weight": torch.eye(d), "linear2.bias": torch.full((d,), 10.0)}
    _, b1, _, b2 = set_weights(k, ff, what, l1, l2, values)
    x = 0.5 + torch.rand(4, 50, d, generator=g)
    return ff, what, x, 1.0 if b1 is not None else 0.0, 10.0 if b2 is not None else 0.0


def _modes(k, ff, what, x, seed):
    """Two outputs in eval mode, then two in train mode, each call with its own seed."""
    k.call(f"{what}.eval()", ff.attr("eval"))
    e1 = k.call(f"{what} in eval mode", ff, x, seed=seed)
    e2 = k.call(f"{what} in eval mode", ff, x, seed=seed + 1)
    k.call(f"{what}.train()", ff.attr("train"))
    t1 = k.call(f"{what} in train mode", ff, x, seed=seed + 2)
    t2 = k.call(f"{what} in train mode", ff, x, seed=seed + 3)
    for out in (e1, e2, t1, t2):
        assert_shape(out, x.shape, f"output of {what}")
    return e1, e2, t1, t2


def _close_to(a, b, tol=1e-4):
    return (a - b).abs() <= tol * (1 + b.abs())


def FeedForward_dropout(k):
    """Dropout on the hidden units (after the ReLU, before linear2) with probability `dropout`,
    survivors scaled by 1/(1 - p), in train mode only; default dropout=0.0."""
    g = seeded(35)
    for p in (0.5, 0.2):
        ff, what, x, b1, b2 = _dropout_case(k, p, g)
        e1, e2, t1, t2 = _modes(k, ff, what, x, seed=int(p * 100))
        if not torch.equal(e1, e2):
            raise AssertionError(
                f"{what}: two calls in eval mode give different outputs. Dropout must be off in eval mode: use "
                f"nn.Dropout (it follows model.train() / model.eval()) or F.dropout(h, p, training=self.training)")
        if is_close(t1, e1) and is_close(t2, e1):
            raise AssertionError(
                f"{what}: train mode gives the same output as eval mode, so dropout is missing or ignores the "
                f"dropout argument. Create nn.Dropout(dropout) in __init__ and apply it to the hidden units in forward")
        if torch.equal(t1, t2):
            raise AssertionError(f"{what}: two calls in train mode give the same output: dropout must draw a new "
                                 f"random mask on every call")
        base = e1 - b2                   # what linear2 makes of the hidden units, without its bias
        for t in (t1, t2):
            ratio = (t - b2) / base      # per entry: 0 if the hidden unit was dropped, 1/(1 - p) if kept
            dropped = _close_to(ratio, torch.zeros_like(ratio))
            kept = _close_to(ratio, torch.full_like(ratio, 1 / (1 - p)))
            if (dropped | kept).all():
                frac = dropped.double().mean().item()
                if abs(frac - p) > 0.08:
                    raise AssertionError(f"{what}: in train mode {frac:.0%} of the hidden units are dropped, "
                                         f"expected {p:.0%}: pass the dropout argument to nn.Dropout")
                continue
            _diagnose(what, t, ratio, dropped, e1, x, b1, b2, p)
    d_model, d_ff = 6, 24
    ff, what, info = build(k, d_model, d_ff)
    l1, l2 = linears(info, d_model, d_ff, what)
    randomize(k, ff, what, l1, l2, d_model, d_ff, g)
    x = torch.randn(2, 5, d_model, generator=g)
    e1, _, t1, t2 = _modes(k, ff, what, x, seed=3)
    if not (is_close(t1, e1) and is_close(t2, e1)):
        raise AssertionError(f"{what}: without a dropout argument, train mode must give the eval-mode output: "
                             f"the default is dropout=0.0")


def _diagnose(what, t, ratio, dropped, e1, x, b1, b2, p):
    """Name the usual dropout mistakes from a train-mode output that is not 'each hidden unit zeroed or
    scaled by 1/(1 - p)'."""
    place = "; dropout belongs on the hidden units, between the ReLU and linear2"
    if (_close_to(t, torch.zeros_like(t)) | _close_to(t, e1 / (1 - p))).all():
        raise AssertionError(f"{what}: dropout is applied to the output of linear2{place}")
    zeroed, undone = _close_to(t, torch.zeros_like(t)), (t * (1 - p) - b2) / (e1 - b2)  # the output's dropout undone
    if zeroed.any() and (zeroed | _close_to(undone, torch.zeros_like(t))
                         | _close_to(undone, torch.full_like(t, 1 / (1 - p)))).all():
        raise AssertionError(f"{what}: dropout is applied twice, to the hidden units and again to the output of "
                             f"linear2{place}")
    if (_close_to(t, torch.full_like(t, b1 + b2)) | _close_to(t, x / (1 - p) + b1 + b2)).all():
        raise AssertionError(f"{what}: dropout is applied to the input x, before linear1{place}")
    if (dropped | _close_to(ratio, torch.ones_like(ratio))).all():
        raise AssertionError(f"{what}: the dropped hidden units are zeroed, but the kept ones are not multiplied by "
                             f"1/(1 - p) = {1 / (1 - p):.3g}: use nn.Dropout or F.dropout, which do both")
    kept_ratio = ratio[~dropped]
    uniform = kept_ratio.numel() and (kept_ratio - kept_ratio[0]).abs().max() < 1e-4 * kept_ratio[0].abs()
    if uniform and kept_ratio[0] > 1:
        c = kept_ratio[0].item()
        raise AssertionError(f"{what}: the kept hidden units are multiplied by {c:.3g}, as dropout with probability "
                             f"{1 - 1 / c:.2g} would; with dropout={p} it is 1/(1 - {p}) = {1 / (1 - p):.3g}: "
                             f"pass the dropout argument to nn.Dropout")
    raise AssertionError(f"{what}: in train mode each hidden unit should be either zeroed or multiplied by "
                         f"1/(1 - p) = {1 / (1 - p):.3g}, and the output is not of that form{place}")
