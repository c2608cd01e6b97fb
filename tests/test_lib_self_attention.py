"""The reference components of notebook 01 equal PyTorch's built-ins."""
import math

import pytest
import torch
import torch.nn.functional as F

from lib import self_attention as ref


@pytest.mark.parametrize("shape,dim", [((7,), -1), ((3, 4), 0), ((2, 3, 5), 1), ((2, 3, 5), -1)])
def test_softmax_matches_torch(shape, dim):
    x = torch.randn(shape) * 5
    torch.testing.assert_close(ref.softmax(x, dim), torch.softmax(x, dim))


def test_softmax_is_stable():
    x = torch.tensor([[1000.0, 1001.0], [-1000.0, -1001.0], [0.0, float("-inf")]])
    torch.testing.assert_close(ref.softmax(x), torch.softmax(x, -1))


def test_simple_self_attention_is_permutation_equivariant():
    x = torch.randn(2, 6, 4)
    perm = torch.randperm(6)
    torch.testing.assert_close(ref.simple_self_attention(x[:, perm]), ref.simple_self_attention(x)[:, perm])


@pytest.mark.parametrize("lead", [(), (2,), (2, 3)])
def test_attention_matches_torch(lead):
    q, k, v = torch.randn(*lead, 4, 8), torch.randn(*lead, 6, 8), torch.randn(*lead, 6, 5)
    mask = torch.rand(*lead, 4, 6) > 0.3
    mask[..., 0] = True  # no query sees nothing
    for m in (None, mask):
        out, w = ref.scaled_dot_product_attention(q, k, v, m)
        torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=m))
        torch.testing.assert_close(w.sum(-1), torch.ones(*lead, 4))


def test_attention_scale_is_sqrt_dk():
    q, k, v = torch.randn(3, 16), torch.randn(5, 16), torch.randn(5, 2)
    _, w = ref.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(w, torch.softmax(q @ k.T / math.sqrt(16), -1))


def test_self_attention_module():
    layer = ref.SelfAttention(8, d_k=4)
    assert all(getattr(layer, n).bias is None for n in ("w_q", "w_k", "w_v"))
    x = torch.randn(2, 5, 8)
    out, w = layer(x, torch.ones(5, 5, dtype=torch.bool).tril())
    assert out.shape == (2, 5, 4) and w.shape == (2, 5, 5)
    assert (w[:, 0, 1:] == 0).all()
    expected = F.scaled_dot_product_attention(layer.w_q(x), layer.w_k(x), layer.w_v(x), is_causal=True)
    torch.testing.assert_close(out, expected)
