"""Notebook 09's lib code: rotary positions (lib/rotary.py), greedy decoding with a key/value cache
(lib/kv_cache.py), sliding-window attention band by band (lib/banded_attention.py) and the
length-generalisation experiment (lib/length_generalisation.py)."""
import pytest
import torch

from lib.banded_attention import banded_attention
from lib.kv_cache import greedy_decode_cached
from lib.length_generalisation import SCHEMES, TEST_LENGTHS, compare_schemes, train_scheme
from lib.local_attention import sliding_window_mask
from lib.rotary import apply_rotary
from lib.self_attention import scaled_dot_product_attention
from lib.transformer import Transformer, greedy_decode


# --- rotary --------------------------------------------------------------------

def test_rotary_scores_depend_only_on_the_distance():
    torch.manual_seed(0)
    q, k = torch.randn(16), torch.randn(16)
    positions = torch.arange(40)
    rq, rk = apply_rotary(q.expand(40, 16), positions), apply_rotary(k.expand(40, 16), positions)
    scores = rq @ rk.T                                          # scores[i, j] = q at i . k at j
    for offset in (-7, 0, 3, 25):
        diagonal = torch.diagonal(scores, offset)               # all pairs with j - i = offset
        assert torch.allclose(diagonal, diagonal[0].expand_as(diagonal), atol=1e-4), offset
    # and not on the absolute positions: shifting both by 1000 changes nothing
    shifted = apply_rotary(q.expand(40, 16), positions + 1000) @ apply_rotary(k.expand(40, 16), positions + 1000).T
    assert torch.allclose(shifted, scores, atol=1e-3)


def test_rotary_equals_multiplying_complex_numbers():
    torch.manual_seed(1)
    x = torch.randn(2, 3, 10, 8, dtype=torch.float64)
    positions = torch.arange(10) * 1.5 - 4                      # any real positions
    theta = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    z = torch.view_as_complex(x.unflatten(-1, (4, 2)).contiguous())           # pairs (2i, 2i+1) -> a + ib
    expected = torch.view_as_real(z * torch.polar(torch.ones(10, 4, dtype=torch.float64),
                                                  positions[:, None] * theta)).flatten(-2)
    actual = apply_rotary(x, positions)
    assert actual.dtype == torch.float64
    assert torch.allclose(actual, expected, atol=1e-6)


def test_rotary_shapes_norms_and_positions_per_row():
    torch.manual_seed(2)
    x = torch.randn(3, 5, 6)
    assert torch.equal(apply_rotary(x, torch.zeros(5)), x)                   # position 0: no rotation
    out = apply_rotary(x, torch.arange(5))
    assert out.shape == x.shape and torch.allclose(out.norm(dim=-1), x.norm(dim=-1), atol=1e-5)
    per_row = torch.stack([torch.arange(5) + s for s in range(3)])          # (B, T) positions
    assert torch.allclose(apply_rotary(x, per_row)[1], apply_rotary(x[1], torch.arange(5) + 1))


def test_rotary_odd_size_is_an_error():
    with pytest.raises(ValueError, match="even"):
        apply_rotary(torch.randn(4, 7), torch.arange(4))


# --- KV cache ------------------------------------------------------------------

def _eos_ending_at_different_steps(model, src, steps=25):
    """A token that the sentences of src first produce at different steps (after the first), to use as eos."""
    rows = greedy_decode(model, src, steps, 1, -1).tolist()           # eos -1: never ends
    first = lambda token: {row.index(token) if token in row else steps for row in rows}
    candidates = [t for t in sorted({t for row in rows for t in row}) if len(first(t)) > 1 and min(first(t)) > 0]
    assert candidates, "no token ends the sentences at different steps: pick another seed"
    return candidates[0]


@pytest.mark.parametrize("seed, pad, norm_first", [(0, 0, False), (2, 4, False), (7, 0, False),
                                                    (3, 0, True), (5, 4, True), (6, 4, True)])
def test_cached_decoding_equals_greedy_decode(seed, pad, norm_first):
    torch.manual_seed(seed)
    model = Transformer(24, 24, d_model=16, n_heads=4, n_layers=2, d_ff=32, max_len=40, pad_id=pad).eval()
    for layer in model.decoder_layers:
        layer.norm_first = norm_first
    with torch.no_grad():                                       # outputs that vary with the sentence and step
        model.output.weight.mul_(3.0)
        model.output.bias.zero_()
    src = torch.randint(5, 24, (7, 9))
    src[1, 4:], src[3, 1:], src[5, 7:] = pad, pad, pad          # source padding
    eos = _eos_ending_at_different_steps(model, src)
    expected = greedy_decode(model, src, 25, 1, eos)
    actual = greedy_decode_cached(model, src, 25, 1, eos)
    assert torch.equal(actual, expected)
    assert expected.shape[1] < 25 or (expected == model.pad_id).any()   # sentences ended, at different steps


def test_cached_decoding_stops_like_greedy_decode():
    torch.manual_seed(7)
    model = Transformer(20, 20, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=16).eval()
    src = torch.randint(3, 20, (3, 5))
    with torch.no_grad():
        model.output.bias[2] = 100.0                            # eos at once
    assert greedy_decode_cached(model, src, 10, 1, 2).tolist() == [[2], [2], [2]]
    assert greedy_decode_cached(model, src, 50, 1, 2).tolist() == [[2], [2], [2]]   # max_len > the model's 16
    with torch.no_grad():
        model.output.bias[2] = -100.0                           # never eos: max_len steps
    assert torch.equal(greedy_decode_cached(model, src, 16, 1, 2), greedy_decode(model, src, 16, 1, 2))
    with pytest.raises(ValueError, match="longer than max_len 16"):                  # as greedy_decode does
        greedy_decode_cached(model, src, 17, 1, 2)


# --- banded attention ----------------------------------------------------------

@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("t, window", [(12, 2), (12, 0), (5, 9), (33, 6)])
def test_banded_attention_equals_masked_full_attention(t, window, causal):
    torch.manual_seed(t + window)
    q, k, v = torch.randn(2, 3, t, 8), torch.randn(2, 3, t, 8), torch.randn(2, 3, t, 5)
    expected, full_weights = scaled_dot_product_attention(q, k, v, sliding_window_mask(t, window, causal))
    out, weights = banded_attention(q, k, v, window, causal)
    assert out.shape == expected.shape
    assert torch.allclose(out, expected, atol=1e-5)
    width = window + 1 if causal else 2 * window + 1
    assert weights.shape == (2, 3, t, width)
    # band entry (i, o) is the weight of key i - window + o; outside the sequence it is 0
    key = torch.arange(t)[:, None] - window + torch.arange(width)
    inside = (key >= 0) & (key < t)
    gathered = full_weights.gather(-1, key.clamp(0, t - 1).expand(2, 3, t, width))
    assert torch.allclose(weights, torch.where(inside, gathered, 0.0), atol=1e-6)


def test_banded_attention_negative_window_is_an_error():
    q = torch.randn(4, 8)
    with pytest.raises(ValueError):
        banded_attention(q, q, q, -1)


# --- length generalisation -----------------------------------------------------

def test_length_generalisation_fast_mode_structure():
    threads = torch.get_num_threads()
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    results = compare_schemes(apply_rotary, fast=True, verbose=False)
    assert list(results) == list(SCHEMES)
    for scheme, by_length in results.items():
        assert list(by_length) == list(TEST_LENGTHS), scheme
        assert all(isinstance(a, float) and 0.0 <= a <= 1.0 for a in by_length.values()), scheme
    assert torch.get_num_threads() == threads                   # one thread inside, restored after
    assert torch.equal(torch.rand(1), before)                   # the caller's random state untouched


def test_length_generalisation_repeats_and_needs_a_rotation():
    run = lambda: train_scheme("rotary", apply_rotary, seed=3, steps=10, test_lengths=(16, 64))
    assert run() == run()
    with pytest.raises(ValueError, match="rotate"):
        train_scheme("rotary", fast=True)
    with pytest.raises(ValueError, match="scheme"):
        train_scheme("alibi", fast=True)
