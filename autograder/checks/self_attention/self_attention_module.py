"""SelfAttention(d_model, d_k=None): bias-free projections w_q, w_k, w_v; forward(x, mask) -> (out, weights)."""
import math

import torch

from lib.testing import assert_close, assert_shape

from ..common import ADDED_MASK, ALWAYS_CAUSAL, added_mask, linear_problem, module, seeded, unpack_pair
from . import expected_attention


def SelfAttention_module(k):
    """Bias-free projections of the right sizes; output equals attention over the projected q, k, v; mask
    passed on."""
    cls = k.student("SelfAttention")
    trusted = {"softmax": k.reference("lib.self_attention.softmax"),
               "scaled_dot_product_attention": k.reference("lib.self_attention.scaled_dot_product_attention")}
    g = seeded(5)
    for d_model, d_k in [(8, None), (8, 4)]:
        d = d_model if d_k is None else d_k
        made = f"SelfAttention({d_model}, d_k={d_k})"
        layer = k.call(made, cls, d_model, d_k, inject=trusted, seed=0)
        info = module(k, layer, made)
        for attr in ("w_q", "w_k", "w_v"):
            problem = linear_problem(info, attr, d_model, d, made, bias=False)
            if problem:
                raise AssertionError(problem)
        weights = {f"{attr}.weight": torch.randn(d, d_model, generator=g) / math.sqrt(d_model)
                   for attr in ("w_q", "w_k", "w_v")}
        k.load(layer, weights)
        x = torch.randn(2, 5, d_model, generator=g) * 2
        q, key, v = (x @ weights[f"{a}.weight"].T for a in ("w_q", "w_k", "w_v"))
        causal = torch.ones(5, 5, dtype=torch.bool).tril()
        for mask in (None, causal):
            out_ref, w_ref = expected_attention(q, key, v, mask)
            what = f"{made}(x, mask={'None' if mask is None else 'causal'})"
            out, w = unpack_pair(k.call(what, layer, x, mask=mask, inject=trusted), what)
            hints = {
                "queries and keys are swapped (scores are K Q^T)": expected_attention(key, q, v, mask)[1],
                "the values use the wrong projection: v = w_v(x)": expected_attention(q, key, q, mask)[0],
            }
            if mask is not None:
                hints["the mask is ignored: pass it on to scaled_dot_product_attention"] = expected_attention(q, key, v)[1]
                hints[ADDED_MASK] = added_mask(q @ key.transpose(-2, -1) / math.sqrt(d), mask)
            else:  # a decoder-only model's attention (nanoGPT's, say) hides the future whatever it is given
                hints[ALWAYS_CAUSAL] = expected_attention(q, key, v, causal)[1]
            if d != d_model:
                scores = (q @ key.transpose(-2, -1) / math.sqrt(d_model))
                scores = scores if mask is None else scores.masked_fill(~mask, float("-inf"))
                hints["the scores are divided by sqrt(d_model), the input's width; divide by sqrt(d_k), the size of "
                      "the queries and keys (the head size)"] = torch.softmax(scores, -1)
            assert_shape(out, (2, 5, d), f"output of {what}")
            assert_close(w, w_ref, f"weights of {what}", hints=hints)
            assert_close(out, out_ref, f"output of {what}", hints=hints)
