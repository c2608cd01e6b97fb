"""The reference components of notebooks 02-06 (in lib/) agree with PyTorch's
built-ins and with the properties the lectures state."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lib.encoder import EncoderLayer
from lib.feed_forward import FeedForward
from lib.guard import ForbiddenCall, forbid, trusted
from lib.layer_norm import LayerNorm, layer_norm
from lib.masking import causal_mask, padding_mask
from lib.multi_head import MultiHeadAttention, merge_heads, split_heads
from lib.positions import LearnedPositions, SinusoidalPositions, sinusoidal_positions


def test_sinusoidal_positions_formula():
    pe = sinusoidal_positions(50, 16)
    assert pe.shape == (50, 16)
    p, i = 7, 3
    assert math.isclose(pe[p, 2 * i].item(), math.sin(p / 10000 ** (2 * i / 16)), abs_tol=1e-6)
    assert math.isclose(pe[p, 2 * i + 1].item(), math.cos(p / 10000 ** (2 * i / 16)), abs_tol=1e-6)
    assert torch.equal(pe[0, 0::2], torch.zeros(8)) and torch.equal(pe[0, 1::2], torch.ones(8))
    with pytest.raises(ValueError):
        sinusoidal_positions(10, 7)


@pytest.mark.parametrize("cls", [SinusoidalPositions, LearnedPositions])
def test_position_modules_add_and_refuse_long_inputs(cls):
    layer = cls(10, 8)
    x = torch.randn(2, 6, 8)
    table = layer(torch.zeros(1, 10, 8))[0]
    assert torch.allclose(layer(x), x + table[:6])
    with pytest.raises(ValueError, match="11.*10"):
        layer(torch.randn(1, 11, 8))


def test_learned_positions_are_learned_and_sinusoidal_are_not():
    assert sum(p.numel() for p in LearnedPositions(10, 8).parameters()) == 80
    assert not list(SinusoidalPositions(10, 8).parameters())


def test_feed_forward_is_position_wise():
    ff = FeedForward(8, 32)
    assert (ff.linear1.in_features, ff.linear1.out_features, ff.linear2.out_features) == (8, 32, 8)
    x = torch.randn(2, 5, 8)
    perm = torch.randperm(5)
    assert torch.allclose(ff(x)[:, perm], ff(x[:, perm]), atol=1e-6)
    assert torch.allclose(ff(x), ff.linear2(F.relu(ff.linear1(x))))


def test_masks():
    m = causal_mask(4)
    assert m.dtype == torch.bool and m[2, 2] and m[2, 0] and not m[0, 2]
    tokens = torch.tensor([[5, 6, 0], [7, 0, 0]])
    pm = padding_mask(tokens, 0)
    assert pm.shape == (2, 1, 3) and pm.tolist() == [[[True, True, False]], [[True, False, False]]]
    assert (causal_mask(3) & pm).shape == (2, 3, 3)


def test_split_merge_round_trip():
    x = torch.randn(2, 5, 12)
    h = split_heads(x, 3)
    assert h.shape == (2, 3, 5, 4)
    assert torch.equal(h[:, 1], x[..., 4:8])
    assert torch.equal(merge_heads(h), x)


def _torch_mha(mha, d, h, bias=True):
    theirs = nn.MultiheadAttention(d, h, bias=bias, batch_first=True)
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([mha.w_q.weight, mha.w_k.weight, mha.w_v.weight]))
        theirs.out_proj.weight.copy_(mha.w_o.weight)
        if bias:
            theirs.in_proj_bias.copy_(torch.cat([mha.w_q.bias, mha.w_k.bias, mha.w_v.bias]))
            theirs.out_proj.bias.copy_(mha.w_o.bias)
    return theirs


@pytest.mark.parametrize("bias", [True, False])
def test_multi_head_attention_equals_pytorch(bias):
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, bias=bias)
    theirs = _torch_mha(mha, 16, 4, bias)
    q, kv = torch.randn(2, 3, 16), torch.randn(2, 5, 16)
    mask = padding_mask(torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]), 0).expand(2, 3, 5)
    out, w = mha(q, kv, kv, mask)
    out_t, w_t = theirs(q, kv, kv, attn_mask=(~mask).repeat_interleave(4, 0), average_attn_weights=False)
    assert w.shape == (2, 4, 3, 5)
    assert torch.allclose(out, out_t, atol=1e-5) and torch.allclose(w, w_t, atol=1e-6)
    with pytest.raises(ValueError):
        MultiHeadAttention(10, 3)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_equals_pytorch(norm_first):
    torch.manual_seed(0)
    ours = EncoderLayer(16, 4, 32, dropout=0.0, norm_first=norm_first)
    theirs = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True, norm_first=norm_first)
    with torch.no_grad():
        theirs.self_attn.load_state_dict(_torch_mha(ours.self_attn, 16, 4).state_dict())
        theirs.linear1.load_state_dict(ours.ff.linear1.state_dict())
        theirs.linear2.load_state_dict(ours.ff.linear2.state_dict())
        for n in (1, 2):
            getattr(ours, f"norm{n}").weight.uniform_(0.5, 1.5)
            getattr(ours, f"norm{n}").bias.uniform_(-0.5, 0.5)
            getattr(theirs, f"norm{n}").load_state_dict(getattr(ours, f"norm{n}").state_dict())
    x = torch.randn(2, 5, 16)
    mask = causal_mask(5)
    assert torch.allclose(ours(x, mask), theirs(x, src_mask=~mask), atol=1e-5)


def test_layer_norm_equals_pytorch_on_tiny_variance_rows():
    x = torch.randn(3, 4, 8)
    x[0, 0] = 5.0 + 1e-4 * torch.randn(8)  # variance far below eps
    w, b = torch.randn(8), torch.randn(8)
    assert torch.allclose(layer_norm(x, w, b), F.layer_norm(x, (8,), w, b), atol=1e-5)
    norm = LayerNorm(8)
    assert torch.equal(norm.weight, torch.ones(8)) and torch.equal(norm.bias, torch.zeros(8))
    assert torch.allclose(norm(x), F.layer_norm(x, (8,)), atol=1e-5)


def test_trusted_class_runs_with_the_ban_lifted():
    x = torch.randn(2, 3, 8)
    expected = F.layer_norm(x, (8,))
    with forbid(ops=("layer_norm",), references=("LayerNorm", "layer_norm")):
        with pytest.raises(ForbiddenCall):
            LayerNorm(8)(x)
        norm = trusted(LayerNorm)(8)
        assert isinstance(norm, LayerNorm) and torch.allclose(norm(x), expected, atol=1e-5)
