"""Notebook 11's lib code: the online softmax merge and tiled attention (lib/tiled_attention.py), grouped-query
attention (lib/grouped_query.py) and the largest-tensor measure (lib/memory.py), against PyTorch's built-ins and the
references of notebooks 01 and 05."""
import itertools

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lib.grouped_query import GroupedQueryAttention
from lib.masking import causal_mask, padding_mask
from lib.memory import largest_tensor, largest_tensor_bytes
from lib.multi_head import MultiHeadAttention
from lib.self_attention import scaled_dot_product_attention
from lib.tiled_attention import online_softmax_merge, tiled_attention

INF = float("inf")


def stats(x):
    """(max, sum of exp(x - max)) over the last axis, keepdim; (-inf, 0) for an empty or all -inf row."""
    m = x.amax(-1, keepdim=True) if x.shape[-1] else x.new_full((*x.shape[:-1], 1), -INF)
    safe = m.masked_fill(m == -INF, 0.0)
    return m, (x - safe).exp().sum(-1, keepdim=True)


# --- online softmax merge --------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(7,), (3, 5, 11), (2, 4, 6, 9)])
def test_merge_gives_the_whole_rows_statistics(shape):
    torch.manual_seed(0)
    x = 5 * torch.randn(shape, dtype=torch.float64)
    for cut in (1, shape[-1] // 2, shape[-1] - 1):
        m, s = online_softmax_merge(*stats(x[..., :cut]), *stats(x[..., cut:]))
        whole_m, whole_s = stats(x)
        assert torch.equal(m, whole_m)
        assert torch.allclose(s, whole_s, rtol=1e-12)
        assert torch.allclose(s, torch.logsumexp(x, -1, keepdim=True).sub(whole_m).exp(), rtol=1e-12)


def test_merge_in_any_order_and_as_a_tree():
    torch.manual_seed(1)
    row = 3 * torch.randn(4, 60, dtype=torch.float64) + torch.linspace(0, 5, 60, dtype=torch.float64)
    parts = [stats(b) for b in row.split(7, dim=-1)]
    whole = stats(row)
    for order in itertools.islice(itertools.permutations(range(len(parts))), 0, 5000, 997):
        m, s = stats(row[..., :0])                                   # start empty
        for i in order:
            m, s = online_softmax_merge(m, s, *parts[i])
        assert torch.equal(m, whole[0]) and torch.allclose(s, whole[1], rtol=1e-12)
    while len(parts) > 1:
        parts = [online_softmax_merge(*parts[i], *parts[i + 1]) for i in range(0, len(parts) - 1, 2)] + \
            parts[len(parts) - len(parts) % 2:]
    assert torch.equal(parts[0][0], whole[0]) and torch.allclose(parts[0][1], whole[1], rtol=1e-12)


def test_merge_with_empty_blocks():
    m1, s1 = torch.tensor([-INF, 2.0, -INF]), torch.tensor([0.0, 1.5, 0.0])
    m2, s2 = torch.tensor([4.0, -INF, -INF]), torch.tensor([2.5, 0.0, 0.0])
    for m, s in (online_softmax_merge(m1, s1, m2, s2), online_softmax_merge(m2, s2, m1, s1)):
        assert torch.equal(m, torch.tensor([4.0, 2.0, -INF]))
        assert torch.equal(s, torch.tensor([2.5, 1.5, 0.0]))     # no NaN in the all-empty entry


def test_merge_is_stable_for_large_scores():
    m, s = online_softmax_merge(*torch.tensor([[3000.0], [1.0], [1000.0], [5.0]]))
    assert m.item() == 3000.0 and s.item() == 1.0


# --- tiled attention --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("lead, t_q, t_k, d_k, d_v, block", [
    ((), 5, 5, 4, 4, 2), ((2,), 10, 37, 8, 5, 16), ((2, 3), 13, 13, 8, 8, 1), ((2, 3), 7, 20, 4, 6, 100),
    ((1, 2, 2), 9, 64, 8, 8, 64), ((3,), 1, 50, 16, 3, 7)])
def test_tiled_equals_torch_and_notebook_01(lead, t_q, t_k, d_k, d_v, block):
    torch.manual_seed(2)
    q = torch.randn(*lead, t_q, d_k, dtype=torch.float64)
    k = torch.randn(*lead, t_k, d_k, dtype=torch.float64)
    v = torch.randn(*lead, t_k, d_v, dtype=torch.float64)
    out = tiled_attention(q, k, v, block=block)
    assert out.shape == (*lead, t_q, d_v) and out.dtype == torch.float64
    assert torch.allclose(out, F.scaled_dot_product_attention(q, k, v), atol=1e-10)
    assert torch.allclose(out, scaled_dot_product_attention(q, k, v)[0], atol=1e-10)
    out32 = tiled_attention(q.float(), k.float(), v.float(), block=block)
    assert torch.allclose(out32, scaled_dot_product_attention(q.float(), k.float(), v.float())[0], atol=1e-5)


def _masks(b, h, t):
    torch.manual_seed(3)
    tokens = torch.randint(1, 9, (b, t))
    tokens[1, t // 2:] = 0
    pad = padding_mask(tokens, 0)                                      # (B, 1, T)
    random = torch.rand(b, h, t, t) > 0.4
    random[..., 0] = True                                              # every query keeps one key
    return {"causal (T, T)": causal_mask(t), "padding (B, 1, 1, T)": pad.unsqueeze(1),
            "causal & padding (B, 1, T, T)": (causal_mask(t) & pad).unsqueeze(1), "per head (B, h, T, T)": random,
            "query rows (T, 1)": torch.ones(t, 1, dtype=torch.bool)}


@pytest.mark.parametrize("block", [1, 3, 8, 64])
def test_tiled_with_masks_equals_torch(block):
    b, h, t = 2, 3, 17
    q, k, v = torch.randn(3, b, h, t, 8, dtype=torch.float64).unbind(0)
    for name, mask in _masks(b, h, t).items():
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)   # bool: True = may attend, like ours
        assert torch.allclose(tiled_attention(q, k, v, mask, block), expected, atol=1e-10), name


def test_tiled_fully_masked_row_gives_zero_and_the_rest_is_right():
    torch.manual_seed(4)
    q, k, v = torch.randn(2, 6, 5), torch.randn(2, 9, 5), torch.randn(2, 9, 4)
    mask = torch.rand(2, 6, 9) > 0.5
    mask[..., 0] = True
    mask[0, 2] = False
    mask[1, :, 4:] = False                                             # whole blocks masked for every row
    out = tiled_attention(q, k, v, mask, block=4)
    assert torch.isfinite(out).all() and torch.equal(out[0, 2], torch.zeros(4))
    rows = mask.any(-1)
    assert torch.allclose(out[rows], scaled_dot_product_attention(q, k, v, mask)[0][rows], atol=1e-6)
    assert torch.allclose(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=1e-6)   # 0 there too
    assert torch.equal(tiled_attention(q, k, v, torch.zeros(6, 9, dtype=torch.bool)), torch.zeros(2, 6, 4))


def test_tiled_is_stable_for_large_scores():
    torch.manual_seed(5)
    q, k, v = torch.randn(3, 2, 12, 8).unbind(0)
    out = tiled_attention(1000 * q, k, v, block=5)
    assert torch.isfinite(out).all()
    assert torch.allclose(out, F.scaled_dot_product_attention(1000 * q, k, v), atol=1e-4)


def test_tiled_attention_keeps_one_block_of_scores():
    q, k, v = torch.randn(3, 1, 2, 256, 16).unbind(0)
    assert largest_tensor(tiled_attention, q, k, v, block=32).numel == 2 * 256 * 32
    assert largest_tensor(tiled_attention, q, k, v, causal_mask(256), 32).numel == 2 * 256 * 32


# --- the largest-tensor measure -------------------------------------------------------------------------------

def test_largest_tensor_is_quadratic_for_full_and_linear_for_tiled():
    full, tiled = {}, {}
    for t in (128, 256, 512):
        q, k, v = torch.randn(3, 1, 1, t, 64).unbind(0)
        full[t] = largest_tensor_bytes(scaled_dot_product_attention, q, k, v)
        tiled[t] = largest_tensor_bytes(tiled_attention, q, k, v, block=64)
    assert full == {t: 4 * t * t for t in full}
    assert tiled == {t: 4 * t * 64 for t in tiled}
    assert full[512] / tiled[512] == 8


def test_largest_tensor_ignores_views_and_in_place_results():
    x = torch.randn(100, 100)
    assert largest_tensor_bytes(lambda: (x.t(), x[:10], x.view(-1), x.mul_(1.0))) == 0
    big = largest_tensor(lambda: x[:10] @ x[:, :20])
    assert (big.shape, big.bytes, big.op) == ((10, 20), 800, "mm.default")


# --- grouped-query attention ----------------------------------------------------------------------------------

def _copy_into_mha(gqa, mha):
    """Load gqa's weights into a MultiHeadAttention, each kv head repeated for the query heads of its group."""
    group, d_head = gqa.n_heads // gqa.n_kv_heads, gqa.w_q.out_features // gqa.n_heads
    with torch.no_grad():
        for name in ("w_q", "w_o"):
            getattr(mha, name).load_state_dict(getattr(gqa, name).state_dict())
        for name in ("w_k", "w_v"):
            for what in ("weight", "bias"):      # rows of kv head i -> rows of query heads i*group ... (i+1)*group - 1
                rows = getattr(getattr(gqa, name), what).unflatten(0, (-1, d_head))
                getattr(getattr(mha, name), what).copy_(rows.repeat_interleave(group, 0).flatten(0, 1))


@pytest.mark.parametrize("n_kv", [8, 4, 2, 1])
def test_gqa_equals_mha_with_kv_weights_tied_in_groups(n_kv):
    torch.manual_seed(6)
    gqa, mha = GroupedQueryAttention(32, 8, n_kv).eval(), MultiHeadAttention(32, 8).eval()
    _copy_into_mha(gqa, mha)
    x, memory = torch.randn(2, 5, 32), torch.randn(2, 7, 32)
    with torch.no_grad():
        for q_in, kv_in in ((x, x), (x, memory)):
            out, w = gqa(q_in, kv_in, kv_in)
            out_m, w_m = mha(q_in, kv_in, kv_in)
            assert w.shape == (2, 8, q_in.shape[1], kv_in.shape[1])
            assert torch.allclose(out, out_m, atol=1e-6) and torch.allclose(w, w_m, atol=1e-6)
    if n_kv == 8:   # with as many kv heads as query heads it is MultiHeadAttention with the very same state dict
        mha2 = MultiHeadAttention(32, 8)
        mha2.load_state_dict(gqa.state_dict())
        with torch.no_grad():
            assert torch.equal(gqa(x, memory, memory)[0], mha2(x, memory, memory)[0])


def test_gqa_with_one_kv_head_is_multi_query_attention():
    torch.manual_seed(7)
    layer = GroupedQueryAttention(24, 6, 1).eval()
    x = torch.randn(3, 9, 24)
    with torch.no_grad():
        out, w = layer(x, x, x, causal_mask(9))
        q = layer.w_q(x).view(3, 9, 6, 4).transpose(1, 2)              # (B, 6, T, 4)
        k, v = layer.w_k(x)[:, None], layer.w_v(x)[:, None]           # (B, 1, T, 4): one key/value head for all
        scores = (q @ k.transpose(-2, -1) / 2.0).masked_fill(~causal_mask(9), -INF)
        weights = scores.softmax(-1)
        expected = layer.w_o((weights @ v).transpose(1, 2).reshape(3, 9, 24))
    assert torch.allclose(w, weights, atol=1e-6) and torch.allclose(out, expected, atol=1e-5)


def test_gqa_consecutive_query_heads_share_a_kv_head():
    layer = GroupedQueryAttention(4, 4, 2).eval()
    with torch.no_grad():
        for lin in (layer.w_q, layer.w_k, layer.w_v, layer.w_o):
            lin.weight.zero_()
            lin.bias.zero_()
        layer.w_v.weight[0, 0] = layer.w_v.weight[1, 1] = 1.0
        layer.w_o.weight.copy_(torch.eye(4))
        x = torch.tensor([[[2.0, 10.0, 0.0, 0.0], [4.0, 20.0, 0.0, 0.0]]])
        out, _ = layer(x, x, x)
    assert torch.equal(out, torch.tensor([[[3.0, 3.0, 15.0, 15.0]] * 2]))


def test_gqa_masks_of_every_shape():
    torch.manual_seed(8)
    b, h, t_q, t_k = 2, 4, 5, 6
    gqa, mha = GroupedQueryAttention(16, h, 2).eval(), MultiHeadAttention(16, h).eval()
    _copy_into_mha(gqa, mha)
    x, memory = torch.randn(b, t_q, 16), torch.randn(b, t_k, 16)
    full = torch.rand(b, h, t_q, t_k) > 0.3
    full[..., 0] = True
    masks = [full[0, 0], full[:, :1, :1].squeeze(1), full[:, 0], full[:, :1], full]   # (Tq,Tk) (B,1,Tk) (B,Tq,Tk) ...
    with torch.no_grad():
        for mask in masks:
            out, w = gqa(x, memory, memory, mask)
            out_m, w_m = mha(x, memory, memory, mask)
            assert torch.allclose(out, out_m, atol=1e-6) and torch.allclose(w, w_m, atol=1e-6), tuple(mask.shape)


@pytest.mark.parametrize("args", [(10, 3, 1), (16, 4, 3), (16, 4, 8), (16, 4, 0), (16, 0, 1)])
def test_gqa_value_errors(args):
    with pytest.raises(ValueError):
        GroupedQueryAttention(*args)


def test_gqa_layers_and_dropout():
    layer = GroupedQueryAttention(32, 8, 2, dropout=0.5)
    shapes = {name: (getattr(layer, name).weight.shape, getattr(layer, name).bias.shape) for name in
              ("w_q", "w_k", "w_v", "w_o")}
    assert shapes == {"w_q": ((32, 32), (32,)), "w_k": ((8, 32), (8,)), "w_v": ((8, 32), (8,)),
                      "w_o": ((32, 32), (32,))}
    assert (layer.n_heads, layer.n_kv_heads) == (8, 2) and isinstance(layer.dropout, nn.Dropout)
    x = torch.randn(2, 6, 32)
    layer.eval()
    assert torch.equal(layer(x, x, x)[0], layer(x, x, x)[0])
    layer.train()
    torch.manual_seed(9)
    (out1, w1), (out2, w2) = layer(x, x, x), layer(x, x, x)
    assert not torch.equal(out1, out2)
    assert torch.allclose(w1, w2) and torch.allclose(w1.sum(-1), torch.ones(2, 8, 6))   # weights before dropout
