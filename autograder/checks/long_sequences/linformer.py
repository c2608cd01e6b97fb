"""LinformerSelfAttention(d_model, seq_len, k): bias-free w_q, w_k, w_v, parameters E and F of shape (k, seq_len);
forward(x) -> (out (B, T, d_model), weights (B, T, k)), keys and values projected along the sequence axis."""
import math

import torch

from lib.testing import assert_close, assert_shape, is_close

from ..common import linear_problem, module, seeded, unpack_pair

AXIS_HINT = ("E and F mix positions, not features: apply them along the sequence axis, E @ K with E (k, T) and the "
             "keys K (B, T, d) gives (B, k, d) (torch.matmul broadcasts E over the batch)")


def linformer(x, w, swap=False, dim=-1, scale=None):
    """(out, weights) of Linformer attention computed here, or with one mistake put in on purpose."""
    E, F = (w["F"], w["E"]) if swap else (w["E"], w["F"])
    q, key, v = (x @ w[f"{a}.weight"].T for a in ("w_q", "w_k", "w_v"))
    key, v = E @ key, F @ v                                      # (B, k, d)
    scores = q @ key.transpose(-2, -1) / (math.sqrt(q.shape[-1]) if scale is None else scale)
    weights = torch.softmax(scores, dim)
    return weights @ v, weights


def _make(k, d_model, seq_len, kk):
    made = f"LinformerSelfAttention({d_model}, seq_len={seq_len}, k={kk})"
    layer = k.call(made, k.student("LinformerSelfAttention"), d_model, seq_len, kk, seed=0)
    return made, layer, module(k, layer, made)


def _structure_problem(info, made, d_model, seq_len, kk):
    for attr in ("w_q", "w_k", "w_v"):
        problem = linear_problem(info, attr, d_model, d_model, made, bias=False)
        if problem:
            return problem
    for name in ("E", "F"):
        if name == "F" and "E" in info.params and "F" not in {*info.params, *info.buffers, *info.tensors}:
            return (f"{made} has no projection F, only E: keys and values each get their own learned "
                    f"projection (one E shared by both is Linformer's share_kv variant, not this layer): "
                    f"self.F = nn.Parameter(torch.randn(k, seq_len) / math.sqrt(k))")
        if name not in info.params:
            where = ("a buffer" if name in info.buffers else "a plain tensor attribute" if name in info.tensors
                     else None)
            return (f"{made}.{name} should be an nn.Parameter (it is learned)" + (f", it is {where}" if where else
                    f": create it with self.{name} = nn.Parameter(torch.randn(k, seq_len) / math.sqrt(k))"))
        shape = info.params[name].shape
        if shape == (seq_len, kk) and seq_len != kk:
            return (f"{made}.{name} has shape (seq_len, k) = {shape}, expected (k, seq_len) = {(kk, seq_len)}: "
                    f"{name} maps the seq_len positions to k, so that {name} @ K is (k, d)")
        if shape != (kk, seq_len):
            return f"{made}.{name} has shape {shape}, expected (k, seq_len) = {(kk, seq_len)}"
    e, f = info.params.get("E"), info.params.get("F")
    if e is not None and f is not None and e.oid and e.oid == f.oid:
        return (f"{made}.E and {made}.F are one parameter, shared by the keys and the values (Linformer's "
                f"'key-value sharing'): this exercise asks for two separate projections, so that keys and values "
                f"learn their own; create E and F as two nn.Parameter")
    extra = [name for name in info.all_params() if name not in ("w_q.weight", "w_k.weight", "w_v.weight", "E", "F")]
    if extra:
        return (f"{made} has parameters the layer does not have: {', '.join(extra)}. E and F are plain (k, seq_len) "
                f"matrices, with no bias, and w_q, w_k, w_v have no bias either")
    return None


def _weights(g, d_model, seq_len, kk):
    w = {f"{a}.weight": torch.randn(d_model, d_model, generator=g) / math.sqrt(d_model) for a in ("w_q", "w_k", "w_v")}
    w["E"] = torch.randn(kk, seq_len, generator=g) / math.sqrt(kk)
    w["F"] = torch.randn(kk, seq_len, generator=g) / math.sqrt(kk)
    return w


def _load(k, layer, made, w):
    problems = k.load(layer, w)
    if problems:
        raise AssertionError(f"cannot copy weights into {made}: {problems[0]}")


def LinformerSelfAttention_structure(k):
    """Bias-free nn.Linear w_q, w_k, w_v (d_model -> d_model) and parameters E and F of shape (k, seq_len)."""
    for d_model, seq_len, kk in [(8, 12, 3), (6, 5, 5)]:
        made, _, info = _make(k, d_model, seq_len, kk)
        problem = _structure_problem(info, made, d_model, seq_len, kk)
        if problem:
            raise AssertionError(problem)


def LinformerSelfAttention_output(k):
    """With given weights, the output and the (B, T, k) weights equal Linformer attention computed here: keys and
    values projected by E and F along the sequence axis, scores scaled by 1/sqrt(d_model), softmax over the k
    projected keys."""
    g = seeded(91)
    for d_model, seq_len, kk, b in [(8, 12, 3, 2), (6, 7, 4, 1), (4, 6, 6, 3)]:
        made, layer, info = _make(k, d_model, seq_len, kk)
        problem = _structure_problem(info, made, d_model, seq_len, kk)
        if problem:
            raise AssertionError(problem)
        w = _weights(g, d_model, seq_len, kk)
        _load(k, layer, made, w)
        x = torch.randn(b, seq_len, d_model, generator=g) * 2
        what = f"{made}(x of shape {tuple(x.shape)})"
        out, weights = unpack_pair(k.call(what, layer, x, hint=AXIS_HINT, no_grad=True), what)
        out_ref, w_ref = linformer(x, w)
        if torch.is_tensor(weights) and tuple(weights.shape) == (b, seq_len, seq_len) and kk != seq_len:
            raise AssertionError(f"the weights of {what} have shape (B, T, T) = {tuple(weights.shape)}: with keys "
                                 f"projected to k = {kk} positions each query has k weights, (B, T, k) = "
                                 f"{(b, seq_len, kk)}")
        if torch.is_tensor(out) and tuple(out.shape) == (b, kk, d_model) and kk != seq_len:
            raise AssertionError(f"the output of {what} has shape (B, k, d) = {tuple(out.shape)}: only the keys and "
                                 f"values are projected to k positions; the queries stay one per token, so the output "
                                 f"is (B, T, d) = {(b, seq_len, d_model)}")
        swapped = linformer(x, w, swap=True)
        if torch.is_tensor(weights) and is_close(weights, swapped[1]) and not is_close(swapped[1], w_ref):
            raise AssertionError(f"the weights of {what} are wrong: E projects the values and F the keys; the other "
                                 f"way round: K' = E K, V' = F V")
        hints = {
            "the softmax is over the queries (dim -2); each query's weights must sum to 1 over the k projected keys "
            "(dim -1)": linformer(x, w, dim=-2)[1],
            "the scores are not scaled: divide them by sqrt(d_model), the size of the query and key vectors":
                linformer(x, w, scale=1.0)[1],
            f"the scores are divided by sqrt(k) = sqrt({kk}); divide by sqrt(d_model), the size of the query and "
            f"key vectors (k only counts the projected keys)": linformer(x, w, scale=math.sqrt(kk))[1],
        }
        assert_shape(weights, (b, seq_len, kk), f"weights of {what}")
        assert_close(weights, w_ref, f"weights of {what}", hints=hints)
        assert_shape(out, (b, seq_len, d_model), f"output of {what}")
        assert_close(out, out_ref, f"output of {what}",
                     hints={"the values are projected with E: V' = F V (E is for the keys)":
                            w_ref @ (w["E"] @ (x @ w["w_v.weight"].T)),
                            "the values are the projected keys (keys and values share one projection, lucidrains' "
                            "share_kv), so w_v and F are never used: V' = F w_v(x), K' = E w_k(x)":
                            w_ref @ (w["E"] @ (x @ w["w_k.weight"].T))})


def LinformerSelfAttention_cost(k):
    """No T x T matrix is ever made: with E applied to the keys first, the scores are (B, T, k), and the cost grows
    like T * k (checked on the shapes of the operators the forward runs)."""
    g = seeded(92)
    d_model, seq_len, kk, b = 8, 24, 4, 2
    made, layer, info = _make(k, d_model, seq_len, kk)
    problem = _structure_problem(info, made, d_model, seq_len, kk)
    if problem:
        raise AssertionError(problem)
    _load(k, layer, made, _weights(g, d_model, seq_len, kk))
    x = torch.randn(b, seq_len, d_model, generator=g)
    what = f"{made}(x of shape {tuple(x.shape)})"
    trace = k.trace(what, layer, x, hint=AXIS_HINT, watch=True, no_grad=True)
    for op, _, shape in trace.ops:
        if shape and len(shape) >= 2 and shape[-1] == seq_len and shape[-2] == seq_len:
            raise AssertionError(
                f"{what} makes a T x T tensor (operator '{op}', shape {tuple(shape)}): that is the quadratic cost "
                f"Linformer removes. Project the keys and values first (E @ K and F @ V are (B, k, d)), then compare "
                f"the queries with the k projected keys, and multiply the (B, T, k) weights with F @ V: never form "
                f"Q K^T or the weights times F")
