"""Thirty independent, correct solutions of notebook 01's four code exercises, and a copier's disguise.

Each solution was written as a different student would write it (terse or verbose, einsum or matmul,
masked_fill, torch.where or an additive mask, helpers, asserts, the styles of The Annotated Transformer,
nanoGPT and d2l, ...), each from the release's stubs, none by renaming another. They keep full marks
(tests/test_similar.py grades every cell of each) and are what ``python -m autograder similar`` must not
flag at its default threshold; ``disguise`` is what it must see through.
"""
import ast
import io
import keyword
import random
import tokenize

AID = "01_self_attention"

# The API the notebook asks for: names a copier cannot change without losing marks.
API = {"softmax", "simple_self_attention", "scaled_dot_product_attention", "SelfAttention", "x", "dim", "q", "k",
       "v", "mask", "d_model", "d_k", "self", "forward", "w_q", "w_k", "w_v", "torch", "nn", "F", "math",
       "super", "__init__"}
WORDS = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "theta", "kappa", "lam", "rho", "tau", "phi", "psi",
         "zeta", "eta", "chi", "nu", "xi", "mu", "iota"]


def _locals(code: str) -> list:
    """Names the student chose: variables they assign, their helpers and those helpers' parameters."""
    names = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return sorted(n for n in names if n not in API and not keyword.iskeyword(n) and not hasattr(__builtins__, n))


def disguise(cells: dict, seed: int = 0) -> dict:
    """A copy of ``cells`` (grade id -> code) as a copier hands it in: every name of their own changed (the
    same way in every cell), each comment reworded, blank lines added between statements."""
    rng = random.Random(seed)
    names = sorted({n for code in cells.values() for n in _locals(code)})
    words = rng.sample(WORDS, len(WORDS))
    new = {n: f"{words[i % len(words)]}_{i}" for i, n in enumerate(names)}
    return {gid: _rewrite(code, new, rng) for gid, code in cells.items()}


def _rewrite(code: str, new: dict, rng) -> str:
    lines = code.splitlines(keepends=True)
    edits = []  # (row, col, end col, text), applied right to left
    previous, depth = None, 0
    tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        following = tokens[i + 1].string if i + 1 < len(tokens) else ""
        if tok.type == tokenize.NAME and tok.string in new and previous != "." and not (depth and following == "="):
            edits.append((tok.start[0], tok.start[1], tok.end[1], new[tok.string]))
        elif tok.type == tokenize.COMMENT:
            edits.append((tok.start[0], tok.start[1], tok.end[1], rng.choice(["# here", "# next step", "# ok",
                                                                              "# compute", "# see lecture"])))
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            previous = tok.string
    for row, start, end, text in sorted(edits, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:start] + text + line[end:]
    out = []
    for line in lines:
        out.append(line)
        if line.strip() and not line.rstrip().endswith((":", ",", "(", "[", "\\")) and rng.random() < 0.3:
            out.append("\n")
    return "".join(out)


SOLUTIONS = []

# ---------------------------------------------------------------------------
# A01 -- terse, one-liner person (amax, .mT, masked_fill)
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": '''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    e = (x - x.amax(dim, keepdim=True)).exp()
    return e / e.sum(dim, keepdim=True)
''',
"simple_self_attention": '''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    return softmax(x @ x.mT) @ x
''',
"scaled_dot_product_attention": '''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    s = q @ k.mT / math.sqrt(q.shape[-1])
    w = softmax(s if mask is None else s.masked_fill(~mask, float("-inf")))
    return w @ v, w
''',
"SelfAttention": '''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        d_k = d_k or d_model
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_k, bias=False)

    def forward(self, x, mask=None):
        return scaled_dot_product_attention(self.w_q(x), self.w_k(x), self.w_v(x), mask)
''',
})

# ---------------------------------------------------------------------------
# A02 -- verbose beginner: lots of comments, one step per line
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": '''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    # Step 1: find the biggest value along the dimension we normalise over.
    # torch.max with a dim gives back (values, indices); we only need values.
    # keepdim=True keeps the shape so that broadcasting works in step 2.
    max_result = torch.max(x, dim=dim, keepdim=True)
    biggest_values = max_result.values

    # Step 2: subtract the maximum. This does not change the answer
    # (it cancels out in the fraction) but it stops exp() from overflowing.
    shifted_x = x - biggest_values

    # Step 3: exponentiate. Now every entry is in (0, 1].
    exponentials = torch.exp(shifted_x)

    # Step 4: add up the exponentials along the same dimension.
    total = torch.sum(exponentials, dim=dim, keepdim=True)

    # Step 5: divide so that each slice sums to 1.
    probabilities = exponentials / total
    return probabilities
''',
"simple_self_attention": '''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    # Transpose only the last two dimensions so batch dimensions are untouched.
    x_transposed = x.transpose(-2, -1)            # (..., d, T)

    # Dot product of every row with every other row.
    similarity_scores = x @ x_transposed          # (..., T, T)

    # Turn each row of scores into weights that sum to 1.
    attention_weights = softmax(similarity_scores, dim=-1)

    # Weighted average of the rows of x.
    result = attention_weights @ x                # (..., T, d)
    return result
''',
"scaled_dot_product_attention": '''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    # d_k is the size of the last dimension of the queries
    d_k = q.shape[-1]

    # compute raw scores between every query and every key
    k_transposed = k.transpose(-2, -1)            # (..., d_k, T_k)
    raw_scores = q @ k_transposed                 # (..., T_q, T_k)

    # scale them down so the softmax does not become too peaky
    scaling_factor = math.sqrt(d_k)
    scaled_scores = raw_scores / scaling_factor

    # apply the mask if we got one:
    # where mask is False we are NOT allowed to attend, so put -infinity there
    # (exp(-inf) = 0, so those positions get zero weight)
    if mask is not None:
        not_allowed = mask == False  # noqa: E712
        scaled_scores = scaled_scores.masked_fill(not_allowed, float("-inf"))

    # softmax over the keys (last dimension)
    attention_weights = softmax(scaled_scores, dim=-1)

    # weighted sum of the values
    output = attention_weights @ v                # (..., T_q, d_v)

    return output, attention_weights
''',
"SelfAttention": '''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        # if no d_k is given we use the same size as the model
        if d_k is None:
            d_k = d_model

        # three linear layers without bias: one for queries, keys and values
        self.w_q = nn.Linear(d_model, d_k, bias=False)  # query projection
        self.w_k = nn.Linear(d_model, d_k, bias=False)  # key projection
        self.w_v = nn.Linear(d_model, d_k, bias=False)  # value projection

    def forward(self, x, mask=None):
        # project the input three times
        queries = self.w_q(x)   # (B, T, d_k)
        keys = self.w_k(x)      # (B, T, d_k)
        values = self.w_v(x)    # (B, T, d_k)

        # use the function from the previous exercise
        output, weights = scaled_dot_product_attention(queries, keys, values, mask=mask)

        return output, weights
''',
})

# ---------------------------------------------------------------------------
# A03 -- einsum enthusiast (torch.where mask, ** 0.5)
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": '''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    m = x.max(dim=dim, keepdim=True)[0]
    num = (x - m).exp()
    den = num.sum(dim=dim, keepdim=True)
    return num / den
''',
"simple_self_attention": '''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    a = softmax(torch.einsum("...id,...jd->...ij", x, x), dim=-1)
    return torch.einsum("...ij,...jd->...id", a, x)
''',
"scaled_dot_product_attention": '''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    dk = q.shape[-1]
    logits = torch.einsum("...qd,...kd->...qk", q, k) / dk ** 0.5
    if mask is not None:
        logits = torch.where(mask, logits, torch.tensor(float("-inf"), dtype=logits.dtype, device=logits.device))
    attn = softmax(logits, dim=-1)
    out = torch.einsum("...qk,...kv->...qv", attn, v)
    return out, attn
''',
"SelfAttention": '''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        dk = d_model if d_k is None else d_k
        self.w_q = nn.Linear(d_model, dk, bias=False)
        self.w_k = nn.Linear(d_model, dk, bias=False)
        self.w_v = nn.Linear(d_model, dk, bias=False)

    def forward(self, x, mask=None):
        q, k, v = self.w_q(x), self.w_k(x), self.w_v(x)
        return scaled_dot_product_attention(q, k, v, mask)
''',
})

# ---------------------------------------------------------------------------
# A04 -- torch.* functional calls everywhere (matmul, torch.sqrt, unsqueeze)
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": '''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    # reduce, then put the reduced axis back with unsqueeze for broadcasting
    row_max = torch.max(x, dim).values.unsqueeze(dim)
    exp_x = torch.exp(torch.sub(x, row_max))
    normaliser = torch.sum(exp_x, dim).unsqueeze(dim)
    return torch.div(exp_x, normaliser)
''',
"simple_self_attention": '''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    scores = torch.matmul(x, x.transpose(-1, -2))
    weights = softmax(scores, dim=-1)
    return torch.matmul(weights, x)
''',
"scaled_dot_product_attention": '''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    d_k = q.size(-1)
    denom = torch.sqrt(torch.tensor(d_k, dtype=q.dtype, device=q.device))
    scores = torch.div(torch.matmul(q, k.transpose(-1, -2)), denom)

    if mask is not None:
        scores = torch.masked_fill(scores, torch.logical_not(mask), -torch.inf)

    weights = softmax(scores, dim=-1)
    output = torch.matmul(weights, v)
    return output, weights
''',
"SelfAttention": '''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        out_features = d_k if d_k is not None else d_model
        self.w_q = nn.Linear(in_features=d_model, out_features=out_features, bias=False)
        self.w_k = nn.Linear(in_features=d_model, out_features=out_features, bias=False)
        self.w_v = nn.Linear(in_features=d_model, out_features=out_features, bias=False)

    def forward(self, x, mask=None):
        query = self.w_q(x)
        key = self.w_k(x)
        value = self.w_v(x)
        output, weights = scaled_dot_product_attention(query, key, value, mask)
        return output, weights
''',
})

# ---------------------------------------------------------------------------
# A05 -- low-level: movedim softmax, bmm with flattened batch dims, additive mask
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": '''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    # Work on the last axis only: move `dim` there, normalise, move it back.
    y = x.movedim(dim, -1)
    y = y - y.max(-1, keepdim=True).values
    y = y.exp()
    y = y / y.sum(-1, keepdim=True)
    return y.movedim(-1, dim)
''',
"simple_self_attention": '''def _flatten_batch(t):
    """(..., R, C) -> (N, R, C) plus the leading shape to undo it."""
    lead = t.shape[:-2]
    return t.reshape(-1, t.shape[-2], t.shape[-1]), lead


def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    xb, lead = _flatten_batch(x)                       # (N, T, d)
    scores = torch.bmm(xb, xb.transpose(1, 2))         # (N, T, T)
    out = torch.bmm(softmax(scores, dim=-1), xb)       # (N, T, d)
    return out.reshape(*lead, *out.shape[-2:])
''',
"scaled_dot_product_attention": '''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    # bring q, k, v to a common batch shape, then flatten it for bmm
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    q = q.expand(*batch, *q.shape[-2:]).reshape(-1, *q.shape[-2:])
    k = k.expand(*batch, *k.shape[-2:]).reshape(-1, *k.shape[-2:])
    v = v.expand(*batch, *v.shape[-2:]).reshape(-1, *v.shape[-2:])

    d_k = q.shape[-1]
    scores = torch.bmm(q, k.transpose(1, 2)) * (1.0 / math.sqrt(d_k))
    scores = scores.reshape(*batch, *scores.shape[-2:])   # back to (..., T_q, T_k)

    if mask is not None:
        # additive mask: 0 where we may attend, -inf where we may not
        bias = torch.zeros(mask.shape, dtype=scores.dtype, device=scores.device)
        bias[~mask] = float("-inf")
        scores = scores + bias

    weights = softmax(scores, dim=-1)
    w_flat = weights.reshape(-1, *weights.shape[-2:])
    out = torch.bmm(w_flat, v)
    out = out.reshape(*weights.shape[:-2], out.shape[-2], out.shape[-1])
    return out, weights
''',
"SelfAttention": '''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        if d_k is None:
            d_k = d_model
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_k, bias=False)

    def forward(self, x, mask=None):
        if mask is not None and mask.dim() == 2:
            mask = mask.unsqueeze(0)  # (T, T) -> (1, T, T), same for every batch
        return scaled_dot_product_attention(
            self.w_q(x),
            self.w_k(x),
            self.w_v(x),
            mask=mask,
        )
''',
})

# ---------------------------------------------------------------------------
# A06 -- defensive: type hints, helper functions, shape asserts, swapaxes
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": '''def _shift_by_max(t: torch.Tensor, axis: int) -> torch.Tensor:
    """Subtract the per-slice maximum so the largest entry becomes 0."""
    peak, _ = t.max(dim=axis, keepdim=True)
    return t - peak


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    assert -x.ndim <= dim < max(x.ndim, 1), f"dim {dim} out of range for {x.ndim}-d input"
    z: torch.Tensor = _shift_by_max(x, dim).exp()
    out: torch.Tensor = z / z.sum(dim=dim, keepdim=True)
    assert out.shape == x.shape
    return out
''',
"simple_self_attention": '''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    assert x.ndim >= 2, "need at least (T, d)"
    T: int = x.shape[-2]
    gram: torch.Tensor = x @ x.swapaxes(-1, -2)
    assert gram.shape[-2:] == (T, T)
    y: torch.Tensor = softmax(gram, dim=-1) @ x
    assert y.shape == x.shape
    return y
''',
"scaled_dot_product_attention": '''from typing import Optional, Tuple


def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    assert q.shape[-1] == k.shape[-1], "q and k must share d_k"
    assert k.shape[-2] == v.shape[-2], "k and v must share T_k"
    T_q, d_k = q.shape[-2], q.shape[-1]
    T_k = k.shape[-2]

    inv_scale: float = 1.0 / math.sqrt(d_k)
    scores: torch.Tensor = (q @ k.swapaxes(-2, -1)) * inv_scale
    assert scores.shape[-2:] == (T_q, T_k)

    if mask is not None:
        assert mask.dtype == torch.bool, "mask must be boolean"
        scores = scores.masked_fill(mask.logical_not(), -math.inf)

    weights: torch.Tensor = softmax(scores, dim=-1)
    output: torch.Tensor = weights @ v
    assert output.shape[-2:] == (T_q, v.shape[-1])
    return output, weights
''',
"SelfAttention": '''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        assert d_model > 0
        width: int = d_model if d_k is None else d_k
        self.w_q: nn.Linear = nn.Linear(d_model, width, bias=False)
        self.w_k: nn.Linear = nn.Linear(d_model, width, bias=False)
        self.w_v: nn.Linear = nn.Linear(d_model, width, bias=False)

    def forward(self, x, mask=None):
        assert x.ndim == 3, f"expected (B, T, d_model), got {tuple(x.shape)}"
        assert x.shape[-1] == self.w_q.in_features
        out, attn = scaled_dot_product_attention(self.w_q(x), self.w_k(x), self.w_v(x), mask)
        assert attn.shape == (x.shape[0], x.shape[1], x.shape[1])
        return out, attn
''',
})

# ---------------------------------------------------------------------------
# A07 -- "functional" style: small lambdas, scale q before the product,
#        setattr loop for the projections
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": '''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    exps = torch.exp(x - torch.amax(x, dim=dim, keepdim=True))
    return exps / torch.sum(exps, dim=dim, keepdim=True)
''',
"simple_self_attention": '''_T = lambda t: t.transpose(-1, -2)  # swap the last two axes


def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    return torch.matmul(softmax(torch.matmul(x, _T(x))), x)
''',
"scaled_dot_product_attention": '''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    # scale the queries first (same result, smaller numbers in the product)
    scores = torch.matmul(q / math.sqrt(q.shape[-1]), k.transpose(-1, -2))
    apply_mask = (lambda s: s) if mask is None else (lambda s: s.masked_fill(mask.logical_not(), float("-inf")))
    p = softmax(apply_mask(scores), dim=-1)
    return torch.matmul(p, v), p
''',
"SelfAttention": '''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        size = d_model if d_k is None else d_k
        for name in ("w_q", "w_k", "w_v"):
            setattr(self, name, nn.Linear(d_model, size, bias=False))

    def forward(self, x, mask=None):
        q, k, v = (proj(x) for proj in (self.w_q, self.w_k, self.w_v))
        return scaled_dot_product_attention(q, k, v, mask=mask)
''',
})

# ---------------------------------------------------------------------------
# A08 -- permute-based transpose, d_k ** -0.5 multiply, torch.where with a
#        neg-inf scalar, method chaining
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": '''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    numerator = x.sub(x.max(dim=dim, keepdim=True).values).exp_()
    return numerator.div(numerator.sum(dim=dim, keepdim=True))
''',
"simple_self_attention": '''def swap_last_two(t):
    order = list(range(t.dim()))
    order[-1], order[-2] = order[-2], order[-1]
    return t.permute(*order)


def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    affinity = x.matmul(swap_last_two(x))
    return softmax(affinity, -1).matmul(x)
''',
"scaled_dot_product_attention": '''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    head_dim = q.shape[-1]
    att = q.matmul(swap_last_two(k)).mul(head_dim ** -0.5)
    if mask is not None:
        neg_inf = torch.full((), float("-inf"), dtype=att.dtype, device=att.device)
        att = torch.where(mask.bool(), att, neg_inf)
    att = softmax(att, -1)
    return att.matmul(v), att
''',
"SelfAttention": '''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        head = d_k if d_k else d_model
        make = lambda: nn.Linear(d_model, head, bias=False)
        self.w_q = make()
        self.w_k = make()
        self.w_v = make()

    def forward(self, x, mask=None):
        out, att = scaled_dot_product_attention(
            q=self.w_q(x), k=self.w_k(x), v=self.w_v(x), mask=mask
        )
        return out, att
''',
})

# ---------------------------------------------------------------------------
# A09 -- Java/C++ background: camelCase, torch.transpose(...) calls,
#        clone + boolean-index assignment for the mask, stores sizes
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": '''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    maxVals, _ = torch.max(x, dim=dim, keepdim=True)
    expVals = torch.exp(x - maxVals)
    sumExp = expVals.sum(dim=dim, keepdim=True)
    result = expVals / sumExp
    return result
''',
"simple_self_attention": '''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    xTransposed = torch.transpose(x, -2, -1)
    dotProducts = torch.matmul(x, xTransposed)
    weightMatrix = softmax(dotProducts, dim=-1)
    weightedSum = torch.matmul(weightMatrix, x)
    return weightedSum
''',
"scaled_dot_product_attention": '''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    keyDim = q.shape[-1]
    attentionScores = torch.matmul(q, torch.transpose(k, -2, -1))
    attentionScores = attentionScores / math.sqrt(keyDim)

    if mask is not None:
        # make the mask the same shape as the scores so it can index them
        fullMask = torch.broadcast_to(mask, attentionScores.shape)
        attentionScores = attentionScores.clone()
        attentionScores[~fullMask] = float("-inf")

    attentionWeights = softmax(attentionScores, dim=-1)
    attentionOutput = torch.matmul(attentionWeights, v)
    return attentionOutput, attentionWeights
''',
"SelfAttention": '''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        self.dModel = d_model
        self.dK = d_model if d_k is None else d_k
        self.w_q = nn.Linear(self.dModel, self.dK, bias=False)
        self.w_k = nn.Linear(self.dModel, self.dK, bias=False)
        self.w_v = nn.Linear(self.dModel, self.dK, bias=False)

    def forward(self, x, mask=None):
        queryMatrix = self.w_q(x)
        keyMatrix = self.w_k(x)
        valueMatrix = self.w_v(x)
        attentionOutput, attentionWeights = scaled_dot_product_attention(
            queryMatrix, keyMatrix, valueMatrix, mask
        )
        return attentionOutput, attentionWeights
''',
})

# ---------------------------------------------------------------------------
# A10 -- math-notation student: short Greek-ish names, log-domain softmax
#        (still shifts by the max), swapdims, mask cast to bool, early returns
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": '''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    # softmax(x)_i = exp(x_i - c) / sum_j exp(x_j - c)   with c = max_j x_j
    c = x.max(dim=dim, keepdim=True).values
    z = x - c                                  # z <= 0, so exp(z) <= 1
    log_Z = z.exp().sum(dim=dim, keepdim=True).log()
    return (z - log_Z).exp()
''',
"simple_self_attention": '''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    X = x
    A = softmax(X @ X.swapdims(-1, -2), dim=-1)   # A_ij = softmax_j(<x_i, x_j>)
    return A @ X
''',
"scaled_dot_product_attention": '''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    Q, K, V = q, k, v
    d = Q.shape[-1]
    S = (Q @ K.swapdims(-1, -2)) / math.sqrt(d)          # S_ij = <q_i, k_j> / sqrt(d)
    if mask is not None:
        M = mask.to(torch.bool)
        S = torch.where(M, S, S.new_tensor(-math.inf))    # forbid j for i where M_ij = 0
    P = softmax(S, dim=-1)                                # rows of P sum to 1
    return P @ V, P
''',
"SelfAttention": '''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        if d_k is None:
            d_k = d_model
        # W_Q, W_K, W_V : R^{d_model} -> R^{d_k}
        self.w_q, self.w_k, self.w_v = (
            nn.Linear(d_model, d_k, bias=False),
            nn.Linear(d_model, d_k, bias=False),
            nn.Linear(d_model, d_k, bias=False),
        )

    def forward(self, x, mask=None):
        Q = self.w_q(x)
        K = self.w_k(x)
        V = self.w_v(x)
        return scaled_dot_product_attention(Q, K, V, mask=mask)
''',
})


# ---------------------------------------------------------------------------
# B01 -- comes from NumPy: axis-style names, shape comments everywhere
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": r'''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    axis = dim
    # like np.max(x, axis=axis, keepdims=True)
    x_max = x.max(dim=axis, keepdim=True).values      # same ndim as x, size 1 on axis
    e_x = torch.exp(x - x_max)                          # same shape as x, all in (0, 1]
    return e_x / e_x.sum(dim=axis, keepdim=True)
''',
"simple_self_attention": r'''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    x_T = x.transpose(-2, -1)          # (..., d, T)   (np.swapaxes(x, -1, -2))
    gram = x @ x_T                     # (..., T, T)
    w = softmax(gram, dim=-1)          # (..., T, T), rows sum to 1
    return w @ x                       # (..., T, d)
''',
"scaled_dot_product_attention": r'''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)          # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))      # (..., T_q, T_k)
    weights = softmax(scores, dim=-1)                          # (..., T_q, T_k)
    output = weights @ v                                       # (..., T_q, d_v)
    return output, weights
''',
"SelfAttention": r'''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        if d_k is None:
            d_k = d_model
        self.w_q = nn.Linear(d_model, d_k, bias=False)   # W_q: (d_k, d_model)
        self.w_k = nn.Linear(d_model, d_k, bias=False)   # W_k: (d_k, d_model)
        self.w_v = nn.Linear(d_model, d_k, bias=False)   # W_v: (d_k, d_model)

    def forward(self, x, mask=None):
        # x: (B, T, d_model)
        q = self.w_q(x)    # (B, T, d_k)
        k = self.w_k(x)    # (B, T, d_k)
        v = self.w_v(x)    # (B, T, d_k)
        out, w = scaled_dot_product_attention(q, k, v, mask)   # (B, T, d_k), (B, T, T)
        return out, w
''',
})

# ---------------------------------------------------------------------------
# B02 -- functional-programming fan: tiny lambdas and composition
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": r'''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    shift = lambda t: t - t.amax(dim=dim, keepdim=True)
    normalise = lambda t: t / t.sum(dim=dim, keepdim=True)
    return normalise(torch.exp(shift(x)))
''',
"simple_self_attention": r'''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    T_ = lambda t: t.transpose(-1, -2)
    attend = lambda a, b: softmax(a @ T_(b))
    return attend(x, x) @ x
''',
"scaled_dot_product_attention": r'''def _scaled_scores(q, k):
    return torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.size(-1))


def _apply_mask(scores, mask):
    if mask is None:
        return scores
    return torch.where(mask, scores, torch.full_like(scores, -math.inf))


def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    weights = softmax(_apply_mask(_scaled_scores(q, k), mask), dim=-1)
    return torch.matmul(weights, v), weights
''',
"SelfAttention": r'''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        out_dim = d_model if d_k is None else d_k
        make = lambda: nn.Linear(d_model, out_dim, bias=False)
        self.w_q, self.w_k, self.w_v = make(), make(), make()

    def forward(self, x, mask=None):
        q, k, v = map(lambda proj: proj(x), (self.w_q, self.w_k, self.w_v))
        return scaled_dot_product_attention(q, k, v, mask=mask)
''',
})

# ---------------------------------------------------------------------------
# B03 -- defensive: type checks, asserts, dtype handling
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": r'''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"softmax expects a torch.Tensor, got {type(x).__name__}")
    if x.dim() == 0:
        raise ValueError("softmax needs at least one dimension")
    if not -x.dim() <= dim < x.dim():
        raise IndexError(f"dim {dim} out of range for tensor with {x.dim()} dims")
    if not torch.is_floating_point(x):
        # integer / bool input: exp would fail, so promote first
        x = x.to(torch.get_default_dtype())

    row_max, _ = torch.max(x, dim=dim, keepdim=True)
    exps = torch.exp(x - row_max)
    total = torch.sum(exps, dim=dim, keepdim=True)
    result = exps / total

    assert result.shape == x.shape
    return result
''',
"simple_self_attention": r'''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    assert isinstance(x, torch.Tensor), "x must be a tensor"
    assert x.dim() >= 2, f"expected (..., T, d), got shape {tuple(x.shape)}"

    similarity = torch.matmul(x, x.transpose(-2, -1))
    assert similarity.shape[-2:] == (x.shape[-2], x.shape[-2])
    attn = softmax(similarity, dim=-1)
    out = torch.matmul(attn, x)
    assert out.shape == x.shape
    return out
''',
"scaled_dot_product_attention": r'''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a tensor")
        if t.dim() < 2:
            raise ValueError(f"{name} must have at least 2 dims, got {t.dim()}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k disagree on d_k: {q.shape[-1]} vs {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v disagree on T_k: {k.shape[-2]} vs {v.shape[-2]}")

    d_k = q.shape[-1]
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)

    if mask is not None:
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must be boolean, got {mask.dtype}")
        scores = scores.masked_fill(mask.logical_not(), float("-inf"))

    weights = softmax(scores, dim=-1)
    output = torch.matmul(weights, v)
    return output, weights
''',
"SelfAttention": r'''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        if d_k is None:
            d_k = d_model
        if d_model <= 0 or d_k <= 0:
            raise ValueError(f"d_model and d_k must be positive, got {d_model}, {d_k}")
        self.d_model = d_model
        self.d_k = d_k
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_k, bias=False)

    def forward(self, x, mask=None):
        if x.shape[-1] != self.d_model:
            raise ValueError(
                f"last dim of x should be d_model={self.d_model}, got {x.shape[-1]}"
            )
        query = self.w_q(x)
        key = self.w_k(x)
        value = self.w_v(x)
        output, weights = scaled_dot_product_attention(query, key, value, mask=mask)
        assert weights.shape[-1] == x.shape[-2]
        return output, weights
''',
})

# ---------------------------------------------------------------------------
# B04 -- copies the maths literally: Q, K, V, QK, A; exp / sum written out
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": r'''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    # softmax(x)_i = exp(x_i - m) / sum_j exp(x_j - m),  m = max_j x_j
    m = torch.max(x, dim=dim, keepdim=True).values
    numerator = torch.exp(x - m)
    denominator = torch.sum(numerator, dim=dim, keepdim=True)
    return numerator / denominator
''',
"simple_self_attention": r'''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    X = x
    XXt = torch.matmul(X, X.transpose(-2, -1))
    A = softmax(XXt, dim=-1)
    Y = torch.matmul(A, X)
    return Y
''',
"scaled_dot_product_attention": r'''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    Q, K, V = q, k, v
    d_k = Q.shape[-1]
    QK = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        # additive mask M: 0 where allowed, -inf where not
        M = torch.zeros_like(QK).masked_fill(~mask, float("-inf"))
        QK = QK + M
    A = softmax(QK, dim=-1)
    Z = torch.matmul(A, V)
    return Z, A
''',
"SelfAttention": r'''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        d_k = d_k or d_model
        # Q = X W_Q,  K = X W_K,  V = X W_V
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_k, bias=False)

    def forward(self, x, mask=None):
        X = x
        Q = self.w_q(X)
        K = self.w_k(X)
        V = self.w_v(X)
        Z, A = scaled_dot_product_attention(Q, K, V, mask)
        return Z, A
''',
})

# ---------------------------------------------------------------------------
# B05 -- unsqueeze / squeeze instead of keepdim, normalises dim up front
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": r'''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    d = dim % x.ndim   # turn -1 etc. into a positive index
    biggest = x.max(d).values.unsqueeze(d)
    ex = (x - biggest).exp()
    return ex / ex.sum(d).unsqueeze(d)
''',
"simple_self_attention": r'''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    # broadcast: (..., T, 1, d) * (..., 1, T, d) summed over d -> (..., T, T)
    dots = (x.unsqueeze(-2) * x.unsqueeze(-3)).sum(-1)
    probs = softmax(dots, dim=-1)
    return probs @ x
''',
"scaled_dot_product_attention": r'''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    dk = q.shape[-1]
    logits = (q @ k.transpose(-1, -2)) * (dk ** -0.5)
    if mask is not None:
        logits = logits.masked_fill(mask == False, float("-inf"))  # noqa: E712
    attn = softmax(logits, dim=-1)
    return attn @ v, attn
''',
"SelfAttention": r'''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        self.d_k = d_model if d_k is None else d_k
        self.w_q = nn.Linear(d_model, self.d_k, bias=False)
        self.w_k = nn.Linear(d_model, self.d_k, bias=False)
        self.w_v = nn.Linear(d_model, self.d_k, bias=False)

    def forward(self, x, mask=None):
        squeeze_back = x.dim() == 2       # allow a single unbatched sequence (T, d_model)
        if squeeze_back:
            x = x.unsqueeze(0)
            if mask is not None and mask.dim() == 2:
                mask = mask.unsqueeze(0)
        out, weights = scaled_dot_product_attention(self.w_q(x), self.w_k(x), self.w_v(x), mask)
        if squeeze_back:
            out, weights = out.squeeze(0), weights.squeeze(0)
        return out, weights
''',
})

# ---------------------------------------------------------------------------
# B06 -- einsum everywhere, .amax for the max
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": r'''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    z = x - torch.amax(x, dim=dim, keepdim=True)
    p = torch.exp(z)
    return p / p.sum(dim=dim, keepdim=True)
''',
"simple_self_attention": r'''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    sim = torch.einsum("...id,...jd->...ij", x, x)
    a = softmax(sim)
    return torch.einsum("...ij,...jd->...id", a, x)
''',
"scaled_dot_product_attention": r'''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    scale = 1.0 / math.sqrt(q.shape[-1])
    sc = torch.einsum("...qd,...kd->...qk", q, k) * scale
    if mask is not None:
        sc = sc.masked_fill(~mask.bool(), -float("inf"))
    att = softmax(sc, dim=-1)
    out = torch.einsum("...qk,...kv->...qv", att, v)
    return out, att
''',
"SelfAttention": r'''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        if d_k is None:
            d_k = d_model
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_k, bias=False)

    def forward(self, x, mask=None):
        # nn.Linear stores weight as (out, in), so x W^T is "btm,km->btk"
        q = torch.einsum("btm,km->btk", x, self.w_q.weight)
        k = torch.einsum("btm,km->btk", x, self.w_k.weight)
        v = torch.einsum("btm,km->btk", x, self.w_v.weight)
        return scaled_dot_product_attention(q, k, v, mask)
''',
})

# ---------------------------------------------------------------------------
# B07 -- method chaining, new_tensor / new_full for the -inf fill
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": r'''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    e = x.sub(x.max(dim, keepdim=True)[0]).exp()
    return e.div(e.sum(dim, keepdim=True))
''',
"simple_self_attention": r'''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    return softmax(x.matmul(x.mT), dim=-1).matmul(x)
''',
"scaled_dot_product_attention": r'''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    s = q.matmul(k.mT).div(math.sqrt(q.size(-1)))
    if mask is not None:
        s = torch.where(mask, s, s.new_tensor(float("-inf")))
    w = softmax(s, dim=-1)
    return w.matmul(v), w
''',
"SelfAttention": r'''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        d_out = d_k if d_k is not None else d_model
        for name in ("w_q", "w_k", "w_v"):
            setattr(self, name, nn.Linear(d_model, d_out, bias=False))

    def forward(self, x, mask=None):
        return scaled_dot_product_attention(
            self.w_q(x), self.w_k(x), self.w_v(x), mask=mask
        )
''',
})

# ---------------------------------------------------------------------------
# B08 -- step-by-step, a comment per step, nothing chained
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": r'''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    # Step 1: find the largest entry in every slice along dim
    maxima = torch.max(x, dim=dim, keepdim=True)[0]

    # Step 2: shift so that the largest entry becomes 0 (no overflow in exp)
    shifted = x - maxima

    # Step 3: exponentiate
    exponentials = torch.exp(shifted)

    # Step 4: divide by the sum along dim so every slice sums to 1
    sums = exponentials.sum(dim=dim, keepdim=True)
    probabilities = exponentials / sums

    return probabilities
''',
"simple_self_attention": r'''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    # Step 1: dot product of every token with every other token
    x_transposed = torch.transpose(x, -2, -1)
    dot_products = torch.matmul(x, x_transposed)

    # Step 2: turn each row of dot products into weights
    attention_weights = softmax(dot_products, dim=-1)

    # Step 3: weighted average of the rows of x
    result = torch.matmul(attention_weights, x)
    return result
''',
"scaled_dot_product_attention": r'''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    # Step 1: raw similarity between each query and each key
    key_dim = q.size(-1)
    raw_scores = torch.matmul(q, torch.transpose(k, -2, -1))

    # Step 2: scale by sqrt(d_k) so the softmax does not saturate
    scaled_scores = raw_scores / math.sqrt(key_dim)

    # Step 3: forbid the positions where mask is False
    if mask is not None:
        blocked = torch.logical_not(mask)
        scaled_scores = scaled_scores.masked_fill(blocked, -math.inf)

    # Step 4: normalise every row
    attention_weights = softmax(scaled_scores, dim=-1)

    # Step 5: weighted sum of the values
    attention_output = torch.matmul(attention_weights, v)

    return attention_output, attention_weights
''',
"SelfAttention": r'''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        # when no d_k is given, keep the model width
        if d_k is None:
            d_k = d_model

        # three separate projections, no bias
        self.w_q = nn.Linear(in_features=d_model, out_features=d_k, bias=False)
        self.w_k = nn.Linear(in_features=d_model, out_features=d_k, bias=False)
        self.w_v = nn.Linear(in_features=d_model, out_features=d_k, bias=False)

    def forward(self, x, mask=None):
        # Step 1: queries -- what each token is looking for
        queries = self.w_q(x)

        # Step 2: keys -- what each token offers to be matched on
        keys = self.w_k(x)

        # Step 3: values -- what each token hands over when attended to
        values = self.w_v(x)

        # Step 4: scaled dot-product attention over the three projections
        attention_output, attention_weights = scaled_dot_product_attention(
            queries, keys, values, mask=mask
        )

        return attention_output, attention_weights
''',
})

# ---------------------------------------------------------------------------
# B09 -- log-domain thinker: shift, then subtract log of the normaliser
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": r'''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    # work in log space: log p = (x - c) - log sum exp(x - c), c = max
    c = x.detach().amax(dim, keepdim=True)   # the shift needs no gradient
    y = x - c
    log_norm = torch.log(torch.exp(y).sum(dim, keepdim=True))
    return torch.exp(y - log_norm)
''',
"simple_self_attention": r'''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    keys = x.swapaxes(-1, -2)
    weights = softmax(torch.matmul(x, keys), -1)
    mixed = torch.matmul(weights, x)
    return mixed
''',
"scaled_dot_product_attention": r'''NEG_INF = float("-inf")


def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    *_, d_k = q.shape
    energy = torch.matmul(q / math.sqrt(d_k), k.swapaxes(-1, -2))
    if mask is not None:
        bias = torch.zeros(mask.shape, dtype=energy.dtype, device=energy.device)
        bias[~mask] = NEG_INF
        energy = energy + bias
    probs = softmax(energy, dim=-1)
    context = torch.matmul(probs, v)
    return context, probs
''',
"SelfAttention": r'''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        head_dim = d_model if d_k is None else int(d_k)
        self.w_q = nn.Linear(d_model, head_dim, bias=False)
        self.w_k = nn.Linear(d_model, head_dim, bias=False)
        self.w_v = nn.Linear(d_model, head_dim, bias=False)
        self.head_dim = head_dim

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}"

    def forward(self, x, mask=None):
        projections = [layer(x) for layer in (self.w_q, self.w_k, self.w_v)]
        context, probs = scaled_dot_product_attention(*projections, mask=mask)
        return context, probs
''',
})

# ---------------------------------------------------------------------------
# B10 -- moves the softmax dim to the end first; F.linear in forward
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": r'''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    # easier to think about rows: put `dim` last, do it there, put it back
    rows = torch.movedim(x, dim, -1)
    top = rows.max(dim=-1, keepdim=True).values
    unnorm = torch.exp(rows - top)
    probs = unnorm / unnorm.sum(dim=-1, keepdim=True)
    return torch.movedim(probs, -1, dim)
''',
"simple_self_attention": r'''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    T, d = x.shape[-2], x.shape[-1]
    batch = x.shape[:-2]
    flat = x.reshape(-1, T, d)                       # fold all batch dims into one
    mixing = softmax(torch.bmm(flat, flat.transpose(1, 2)), dim=-1)
    return torch.bmm(mixing, flat).reshape(*batch, T, d)
''',
"scaled_dot_product_attention": r'''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    n = q.shape[-1]
    similarity = q @ k.transpose(-2, -1)
    similarity = similarity / n ** 0.5
    if mask is not None:
        minus_inf = torch.tensor(-float("inf"), dtype=similarity.dtype,
                                 device=similarity.device)
        similarity = torch.where(mask.to(torch.bool), similarity, minus_inf)
    alpha = softmax(similarity, dim=-1)
    return alpha @ v, alpha
''',
"SelfAttention": r'''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        inner = d_k
        if inner is None:
            inner = d_model
        self.w_q = nn.Linear(d_model, inner, bias=False)
        self.w_k = nn.Linear(d_model, inner, bias=False)
        self.w_v = nn.Linear(d_model, inner, bias=False)

    def forward(self, x, mask=None):
        import torch.nn.functional as F

        Wq, Wk, Wv = self.w_q.weight, self.w_k.weight, self.w_v.weight
        queries = F.linear(x, Wq)
        keys = F.linear(x, Wk)
        values = F.linear(x, Wv)
        out, attn = scaled_dot_product_attention(queries, keys, values, mask)
        return out, attn
''',
})


# ---------------------------------------------------------------------------
# C01: learned from The Annotated Transformer (scores / p_attn / math.sqrt)
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": r'''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    # subtract the max first so exp() never overflows
    x = x - x.max(dim, keepdim=True)[0]
    x = x.exp()
    return x / x.sum(dim, keepdim=True)
''',
"simple_self_attention": r'''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    scores = torch.matmul(x, x.transpose(-2, -1))
    p_attn = softmax(scores, dim=-1)
    return torch.matmul(p_attn, x)
''',
"scaled_dot_product_attention": r'''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    "Compute 'Scaled Dot Product Attention'"
    d_k = q.size(-1)
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    p_attn = softmax(scores, dim=-1)
    return torch.matmul(p_attn, v), p_attn
''',
"SelfAttention": r'''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        if d_k is None:
            d_k = d_model
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_k, bias=False)
        self.attn = None

    def forward(self, x, mask=None):
        # 1) do the linear projections, 2) apply attention on the projected vectors
        query, key, value = self.w_q(x), self.w_k(x), self.w_v(x)
        x, self.attn = scaled_dot_product_attention(query, key, value, mask=mask)
        return x, self.attn
''',
})

# ---------------------------------------------------------------------------
# C02: learned from nanoGPT (att, y, B/T/C, 1.0 / math.sqrt(k.size(-1)))
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": r'''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    m, _ = torch.max(x, dim=dim, keepdim=True)
    e = torch.exp(x - m)
    return e / torch.sum(e, dim=dim, keepdim=True)
''',
"simple_self_attention": r'''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    att = x @ x.transpose(-2, -1)  # (..., T, d) x (..., d, T) -> (..., T, T)
    att = softmax(att, dim=-1)
    y = att @ x  # (..., T, T) x (..., T, d) -> (..., T, d)
    return y
''',
"scaled_dot_product_attention": r'''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    if mask is not None:
        att = att.masked_fill(~mask, float('-inf'))
    att = softmax(att, dim=-1)
    y = att @ v
    return y, att
''',
"SelfAttention": r'''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        d_k = d_model if d_k is None else d_k
        # key, query, value projections
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_k, bias=False)
        self.n_embd = d_model

    def forward(self, x, mask=None):
        B, T, C = x.size()  # batch size, sequence length, embedding dimensionality (n_embd)
        q = self.w_q(x)
        k = self.w_k(x)
        v = self.w_v(x)
        y, att = scaled_dot_product_attention(q, k, v, mask)
        return y, att
''',
})

# ---------------------------------------------------------------------------
# C03: learned from d2l.ai (X_exp / partition, masked_softmax helper)
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": r'''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    X = x
    X_exp = torch.exp(X - X.max(dim=dim, keepdim=True).values)
    partition = X_exp.sum(dim, keepdim=True)
    return X_exp / partition  # The broadcast mechanism is applied here
''',
"simple_self_attention": r'''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    # queries, keys and values are all just x here
    queries, keys, values = x, x, x
    scores = torch.matmul(queries, keys.transpose(-1, -2))
    attention_weights = softmax(scores, dim=-1)
    return torch.matmul(attention_weights, values)
''',
"scaled_dot_product_attention": r'''def masked_softmax(X, mask=None):
    """Perform softmax over the last axis, dropping the positions where mask is False."""
    if mask is None:
        return softmax(X, dim=-1)
    # masked elements are replaced by -inf so that their exponentials are 0
    X = X.masked_fill(torch.logical_not(mask), -float('inf'))
    return softmax(X, dim=-1)


def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    queries, keys, values = q, k, v
    d = queries.shape[-1]
    # Swap the last two dimensions of keys with keys.transpose(-1, -2)
    scores = torch.matmul(queries, keys.transpose(-1, -2)) / math.sqrt(d)
    attention_weights = masked_softmax(scores, mask)
    return torch.matmul(attention_weights, values), attention_weights
''',
"SelfAttention": r'''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        num_hiddens = d_model if d_k is None else d_k
        self.w_q = nn.Linear(d_model, num_hiddens, bias=False)
        self.w_k = nn.Linear(d_model, num_hiddens, bias=False)
        self.w_v = nn.Linear(d_model, num_hiddens, bias=False)

    def forward(self, x, mask=None):
        queries = self.w_q(x)
        keys = self.w_k(x)
        values = self.w_v(x)
        output, self.attention_weights = scaled_dot_product_attention(
            queries, keys, values, mask)
        return output, self.attention_weights
''',
})

# ---------------------------------------------------------------------------
# C04: torch.matmul + permute everywhere, additive -inf mask
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": r'''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    ndim = x.dim()
    dim = dim % ndim
    # swap `dim` with the last axis, work on the last axis, swap back
    perm = list(range(ndim))
    perm[dim], perm[-1] = perm[-1], perm[dim]
    y = x.permute(*perm)
    y = y - torch.amax(y, dim=-1, keepdim=True)
    y = torch.exp(y)
    y = y / torch.sum(y, dim=-1, keepdim=True)
    return y.permute(*perm)  # a single swap is its own inverse
''',
"simple_self_attention": r'''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    n = x.dim()
    order = list(range(n - 2)) + [n - 1, n - 2]
    x_t = x.permute(*order)                  # (..., d, T)
    a = softmax(torch.matmul(x, x_t), dim=-1)  # (..., T, T)
    return torch.matmul(a, x)
''',
"scaled_dot_product_attention": r'''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    n = k.dim()
    k_t = k.permute(*range(n - 2), n - 1, n - 2)   # (..., d_k, T_k)
    logits = torch.matmul(q, k_t) / math.sqrt(q.shape[-1])
    if mask is not None:
        # additive mask: 0 where allowed, -inf where not
        additive = torch.zeros(mask.shape, dtype=logits.dtype, device=logits.device)
        additive[~mask] = float("-inf")
        logits = logits + additive
    a = softmax(logits, dim=-1)
    return torch.matmul(a, v), a
''',
"SelfAttention": r'''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        if d_k is None:
            d_k = d_model
        self.w_q = nn.Linear(in_features=d_model, out_features=d_k, bias=False)
        self.w_k = nn.Linear(in_features=d_model, out_features=d_k, bias=False)
        self.w_v = nn.Linear(in_features=d_model, out_features=d_k, bias=False)

    def forward(self, x, mask=None):
        Q = self.w_q(x)   # (B, T, d_k)
        K = self.w_k(x)   # (B, T, d_k)
        V = self.w_v(x)   # (B, T, d_k)
        out, A = scaled_dot_product_attention(Q, K, V, mask=mask)
        return out, A
''',
})

# ---------------------------------------------------------------------------
# C05: loops over rows / batch elements, correctness first
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": r'''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    # Move the softmax axis to the end and flatten everything else into rows,
    # then handle one row at a time (slow but easy to check).
    moved = x.movedim(dim, -1)
    rows = moved.reshape(-1, moved.shape[-1])
    result = torch.empty_like(rows)
    for i in range(rows.shape[0]):
        row = rows[i]
        biggest = row.max()
        exps = torch.exp(row - biggest)
        total = exps.sum()
        result[i] = exps / total
    return result.reshape(moved.shape).movedim(-1, dim)
''',
"simple_self_attention": r'''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    batch_shape = x.shape[:-2]
    T, d = x.shape[-2], x.shape[-1]
    flat = x.reshape(-1, T, d)
    outputs = []
    for b in range(flat.shape[0]):
        xb = flat[b]                       # (T, d)
        dots = xb @ xb.T                   # (T, T)
        weights = softmax(dots, dim=-1)
        outputs.append(weights @ xb)       # (T, d)
    return torch.stack(outputs).reshape(*batch_shape, T, d)
''',
"scaled_dot_product_attention": r'''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    T_q, d_k = q.shape[-2], q.shape[-1]
    T_k, d_v = k.shape[-2], v.shape[-1]

    # work out the common batch shape and flatten it into one loop index
    shapes = [q.shape[:-2], k.shape[:-2], v.shape[:-2]]
    if mask is not None:
        shapes.append(mask.shape[:-2])
    batch_shape = torch.broadcast_shapes(*shapes)

    qs = q.expand(*batch_shape, T_q, d_k).reshape(-1, T_q, d_k)
    ks = k.expand(*batch_shape, T_k, d_k).reshape(-1, T_k, d_k)
    vs = v.expand(*batch_shape, T_k, d_v).reshape(-1, T_k, d_v)
    ms = None
    if mask is not None:
        ms = torch.broadcast_to(mask, (*batch_shape, T_q, T_k)).reshape(-1, T_q, T_k)

    scale = math.sqrt(d_k)
    outs, all_weights = [], []
    for b in range(qs.shape[0]):
        s = qs[b] @ ks[b].T / scale               # (T_q, T_k)
        if ms is not None:
            s = s.masked_fill(~ms[b], float("-inf"))
        w = softmax(s, dim=-1)
        outs.append(w @ vs[b])                    # (T_q, d_v)
        all_weights.append(w)

    output = torch.stack(outs).reshape(*batch_shape, T_q, d_v)
    weights = torch.stack(all_weights).reshape(*batch_shape, T_q, T_k)
    return output, weights
''',
"SelfAttention": r'''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        if d_k is None:
            d_k = d_model
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_k, bias=False)

    def forward(self, x, mask=None):
        queries = self.w_q(x)
        keys = self.w_k(x)
        values = self.w_v(x)
        output, weights = scaled_dot_product_attention(queries, keys, values, mask=mask)
        return output, weights
''',
})

# ---------------------------------------------------------------------------
# C06: as short as possible (walrus, .mT, chained calls)
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": r'''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    return (e := (x - x.amax(dim, keepdim=True)).exp()) / e.sum(dim, keepdim=True)
''',
"simple_self_attention": r'''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    return softmax(x @ x.mT) @ x
''',
"scaled_dot_product_attention": r'''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    s = q @ k.mT / q.shape[-1] ** 0.5
    return (w := softmax(s if mask is None else s.masked_fill(~mask, -math.inf))) @ v, w
''',
"SelfAttention": r'''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        self.w_q, self.w_k, self.w_v = (nn.Linear(d_model, d_k or d_model, bias=False) for _ in "qkv")

    def forward(self, x, mask=None):
        return scaled_dot_product_attention(self.w_q(x), self.w_k(x), self.w_v(x), mask)
''',
})

# ---------------------------------------------------------------------------
# C07: small private helpers (_scores, _project), type hints, kwargs dict
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": r'''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    kw = dict(dim=dim, keepdim=True)
    z = x.sub(x.amax(**kw))   # largest entry of every slice becomes 0
    z = z.exp()
    return z.div(z.sum(**kw))
''',
"simple_self_attention": r'''def _scores(q: torch.Tensor, k: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """Dot products of every query row with every key row, times `scale`."""
    return q.matmul(k.transpose(-1, -2)).mul(scale)


def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    weights = softmax(_scores(x, x), dim=-1)
    return weights.matmul(x)
''',
"scaled_dot_product_attention": r'''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    d_k: int = q.shape[-1]
    scores = _scores(q, k, scale=1.0 / math.sqrt(d_k))
    if mask is not None:
        blocked = mask.logical_not()
        scores = scores.masked_fill(blocked, -math.inf)
    weights = softmax(scores, dim=-1)
    output = weights.matmul(v)
    return output, weights
''',
"SelfAttention": r'''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        out_dim = d_k if d_k is not None else d_model
        self.w_q = self._make_proj(d_model, out_dim)
        self.w_k = self._make_proj(d_model, out_dim)
        self.w_v = self._make_proj(d_model, out_dim)

    @staticmethod
    def _make_proj(n_in: int, n_out: int) -> nn.Linear:
        return nn.Linear(n_in, n_out, bias=False)

    def _project(self, x: torch.Tensor):
        return self.w_q(x), self.w_k(x), self.w_v(x)

    def forward(self, x, mask=None):
        q, k, v = self._project(x)
        return scaled_dot_product_attention(q, k, v, mask=mask)
''',
})

# ---------------------------------------------------------------------------
# C08: einsum, functional torch.* calls, d_k stored as an attribute
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": r'''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    maxes = torch.max(x, dim, keepdim=True)[0]
    numerator = torch.exp(torch.sub(x, maxes))
    denominator = torch.sum(numerator, dim, keepdim=True)
    return torch.div(numerator, denominator)
''',
"simple_self_attention": r'''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    sim = torch.einsum("...id,...jd->...ij", x, x)
    alpha = softmax(sim, dim=-1)
    return torch.einsum("...ij,...jd->...id", alpha, x)
''',
"scaled_dot_product_attention": r'''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    dk = q.shape[-1]
    sim = torch.einsum("...qd,...kd->...qk", q, k)
    sim = torch.div(sim, math.sqrt(dk))
    if mask is not None:
        neg_inf = torch.tensor(float("-inf"), dtype=sim.dtype, device=sim.device)
        sim = sim.masked_fill(torch.logical_not(mask), neg_inf)
    alpha = softmax(sim, dim=-1)
    out = torch.einsum("...qk,...kd->...qd", alpha, v)
    return out, alpha
''',
"SelfAttention": r'''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        self.d_model = d_model
        self.d_k = d_model if d_k is None else d_k
        self.w_q = nn.Linear(self.d_model, self.d_k, bias=False)
        self.w_k = nn.Linear(self.d_model, self.d_k, bias=False)
        self.w_v = nn.Linear(self.d_model, self.d_k, bias=False)

    def forward(self, x, mask=None):
        assert x.shape[-1] == self.d_model, f"expected last dim {self.d_model}, got {x.shape[-1]}"
        q = self.w_q(x)
        k = self.w_k(x)
        v = self.w_v(x)
        out, alpha = scaled_dot_product_attention(q, k, v, mask)
        assert out.shape[-1] == self.d_k
        return out, alpha

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, d_k={self.d_k}"
''',
})

# ---------------------------------------------------------------------------
# C09: torch.where for the max guard and for the mask, setattr loop
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": r'''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    row_max = x.max(dim=dim, keepdim=True).values
    # if a whole slice is -inf, shift by 0 instead of by -inf (avoids -inf - -inf)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    unnorm = torch.exp(x - row_max)
    return unnorm / unnorm.sum(dim=dim, keepdim=True)
''',
"simple_self_attention": r'''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    gram = x.matmul(x.transpose(-1, -2))
    probs = softmax(gram, dim=-1)
    out = probs.matmul(x)
    return out
''',
"scaled_dot_product_attention": r'''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    d_k = q.shape[-1]
    logits = q.matmul(k.transpose(-1, -2)).div(math.sqrt(d_k))
    if mask is not None:
        minus_inf = torch.full_like(logits, float("-inf"))
        logits = torch.where(mask.bool(), logits, minus_inf)
    probs = softmax(logits, dim=-1)
    return probs.matmul(v), probs
''',
"SelfAttention": r'''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        width = d_model if d_k is None else d_k
        for name in ("w_q", "w_k", "w_v"):
            setattr(self, name, nn.Linear(d_model, width, bias=False))

    def forward(self, x, mask=None):
        projected = [layer(x) for layer in (self.w_q, self.w_k, self.w_v)]
        return scaled_dot_product_attention(*projected, mask=mask)
''',
})

# ---------------------------------------------------------------------------
# C10: numerically careful (log-domain normalisation, scale q before matmul,
#      shape checks, dtype kept as the input dtype)
# ---------------------------------------------------------------------------
SOLUTIONS.append({
"softmax": r'''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along `dim`.

    x: tensor of any shape. Returns a tensor of the same shape whose slices along
    `dim` are positive and sum to 1. Example: softmax(tensor([1., 2., 3.]))
    is tensor([0.0900, 0.2447, 0.6652]).
    """
    if not torch.is_floating_point(x):
        x = x.to(torch.get_default_dtype())
    # The max only shifts the input; softmax is invariant to it, so no gradient
    # needs to flow through it.
    shift = torch.amax(x, dim=dim, keepdim=True).detach()
    shifted = x - shift                      # every slice now has max 0
    # normalise in log space: log sum exp(shifted) is in [0, log n]
    log_norm = torch.log(torch.sum(torch.exp(shifted), dim=dim, keepdim=True))
    return torch.exp(shifted - log_norm)
''',
"simple_self_attention": r'''def simple_self_attention(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention: softmax(X X^T) X.

    x: (..., T, d). Returns (..., T, d): row i is the average of all rows of x,
    weighted by the softmax of x_i's dot products with them.
    """
    if x.dim() < 2:
        raise ValueError(f"expected x of shape (..., T, d), got {tuple(x.shape)}")
    similarity = torch.matmul(x, torch.transpose(x, -2, -1))  # (..., T, T)
    attn = softmax(similarity, dim=-1)
    result = torch.matmul(attn, x)
    assert result.shape == x.shape
    return result
''',
"scaled_dot_product_attention": r'''def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask.

    q: (..., T_q, d_k)   k: (..., T_k, d_k)   v: (..., T_k, d_v)
    mask: bool tensor broadcastable to (..., T_q, T_k); True = may attend.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    head_dim = q.shape[-1]
    if k.shape[-1] != head_dim:
        raise ValueError("q and k must have the same last dimension")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError("k and v must have the same number of positions")
    # Scale q *before* the product so the logits stay small in low precision.
    q_scaled = q * (1.0 / math.sqrt(head_dim))
    logits = torch.matmul(q_scaled, torch.transpose(k, -2, -1))
    if mask is not None:
        allowed = mask.to(dtype=torch.bool, device=logits.device)
        logits = logits.masked_fill(~allowed, float("-inf"))
    attn = softmax(logits, dim=-1)
    context = torch.matmul(attn, v)
    return context, attn
''',
"SelfAttention": r'''from torch import nn


class SelfAttention(nn.Module):
    """Single-head self-attention with learned, bias-free projections.

    x: (B, T, d_model), mask: bool, broadcastable to (B, T, T), True = may attend.
    forward returns (output (B, T, d_k), weights (B, T, T)).
    """

    def __init__(self, d_model: int, d_k: int | None = None):
        super().__init__()
        if d_k is None:
            d_k = d_model
        if d_model <= 0 or d_k <= 0:
            raise ValueError("d_model and d_k must be positive")
        self.w_q = nn.Linear(d_model, d_k, bias=False)  # queries
        self.w_k = nn.Linear(d_model, d_k, bias=False)  # keys
        self.w_v = nn.Linear(d_model, d_k, bias=False)  # values

    def forward(self, x, mask=None):
        if x.dim() < 2:
            raise ValueError(f"expected x of shape (B, T, d_model), got {tuple(x.shape)}")
        query = self.w_q(x)
        key = self.w_k(x)
        value = self.w_v(x)
        context, attn = scaled_dot_product_attention(query, key, value, mask=mask)
        return context, attn
''',
})


assert len(SOLUTIONS) == 30
