"""simple_self_attention(x): softmax(X X^T) X, with no parameters."""
import math

import torch

from lib.testing import assert_close

from ..common import seeded
from . import BATCH_HINT

# torch.bmm and transpose(1, 2) need exactly 3-D (batched) input
UNBATCHED_HINT = ("x may be a single sequence (T, d), 2-D, or have more leading dims: torch.bmm and "
                  "transpose(1, 2) need exactly 3-D input; use x @ x.transpose(-2, -1), which works for any "
                  "number of leading dims")


def _hints(x):
    scores = x @ x.transpose(-2, -1)
    unbatched = {} if x.dim() != 2 else {
        "given one sequence (T, d), it returns x unchanged: each row became a batch of its own and attends only "
        "to itself (code for (B, T, d) only?); use x @ x.transpose(-2, -1), which works for any number of "
        "leading dims": x}
    return unbatched | {
        "you returned the attention weights: multiply them by X to get the outputs": torch.softmax(scores, -1),
        "the softmax is over the queries (dim -2); each row of weights must sum to 1 over the keys (dim -1)":
            torch.softmax(scores, -2) @ x,
        "the parameter-free version has no scaling: softmax(X X^T) X, not divided by sqrt(d)":
            torch.softmax(scores / math.sqrt(x.shape[-1]), -1) @ x,
    }


def simple_self_attention_reference(k):
    """Equals softmax(X X^T) X for one sequence, a batch, and a batch of heads; is permutation equivariant."""
    fn = k.student("simple_self_attention")
    trusted = {"softmax": k.reference("lib.self_attention.softmax")}
    g = seeded(2)
    for shape in [(4, 3), (2, 5, 3), (2, 3, 4, 5)]:
        x = torch.randn(shape, generator=g)
        expected = torch.softmax(x @ x.transpose(-2, -1), -1) @ x
        what = f"simple_self_attention(x of shape {shape})"
        actual = k.call(what, fn, x, hint=UNBATCHED_HINT if len(shape) != 3 else BATCH_HINT, inject=trusted)
        assert_close(actual, expected, what, hints=_hints(x))
    x = torch.randn(2, 6, 4, generator=g)
    perm = torch.randperm(6, generator=g)
    out = k.call("simple_self_attention(x)", fn, x, inject=trusted)
    out_perm = k.call("simple_self_attention(x[:, perm])", fn, x[:, perm], inject=trusted)
    assert_close(out_perm, out[:, perm], "output for permuted inputs (permutation equivariance)")
