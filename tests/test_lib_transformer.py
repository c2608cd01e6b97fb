"""The reference decoder layer and encoder-decoder of notebook 08 (lib/decoder.py,
lib/transformer.py) agree with PyTorch's built-ins and have the properties the
notebook states; the training and decoding helpers of lib/translate.py behave."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lib.decoder import DecoderLayer
from lib.masking import causal_mask, padding_mask
from lib.transformer import Transformer, beam_search, greedy_decode
from lib.translate import corpus_scores, lr_at, make_batches, train, translation_loss

D, H, D_FF = 16, 4, 32


def _copy_attention(ours, theirs):
    d = ours.w_q.weight.shape[0]
    with torch.no_grad():
        for i, name in enumerate(("w_q", "w_k", "w_v")):
            getattr(ours, name).weight.copy_(theirs.in_proj_weight[i * d:(i + 1) * d])
            getattr(ours, name).bias.copy_(theirs.in_proj_bias[i * d:(i + 1) * d])
        ours.w_o.load_state_dict(theirs.out_proj.state_dict())


def _twins(norm_first, seed=0):
    torch.manual_seed(seed)
    theirs = nn.TransformerDecoderLayer(D, H, D_FF, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    with torch.no_grad():
        for name, p in theirs.named_parameters():
            if "norm" in name:
                p.copy_(torch.rand(p.shape) + 0.5 if name.endswith("weight") else torch.randn(p.shape) * 0.3)
    ours = DecoderLayer(D, H, D_FF, dropout=0.1, norm_first=norm_first).eval()
    _copy_attention(ours.self_attn, theirs.self_attn)
    _copy_attention(ours.cross_attn, theirs.multihead_attn)
    ours.ff.linear1.load_state_dict(theirs.linear1.state_dict())
    ours.ff.linear2.load_state_dict(theirs.linear2.state_dict())
    for n in (1, 2, 3):
        getattr(ours, f"norm{n}").load_state_dict(getattr(theirs, f"norm{n}").state_dict())
    return ours, theirs


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_equals_torch(norm_first):
    ours, theirs = _twins(norm_first)
    x, memory = torch.randn(2, 5, D), torch.randn(2, 7, D)
    tgt = torch.tensor([[4, 5, 6, 7, 8], [4, 5, 6, 0, 0]])
    src = torch.tensor([[4, 5, 6, 7, 8, 9, 10], [4, 5, 6, 7, 0, 0, 0]])
    tgt_mask = causal_mask(5) & padding_mask(tgt, 0)            # (B, T, T)
    memory_mask = padding_mask(src, 0)                          # (B, 1, S)
    with torch.no_grad():
        assert torch.allclose(ours(x, memory), theirs(x, memory), atol=1e-5)
        expected = theirs(x, memory, tgt_mask=~causal_mask(5), tgt_is_causal=False,
                          tgt_key_padding_mask=~padding_mask(tgt, 0)[:, 0],
                          memory_key_padding_mask=~memory_mask[:, 0])
        actual = ours(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask)
    # rows of padded queries differ only in how torch treats them; compare the real tokens
    real = tgt != 0
    assert torch.allclose(actual[real], expected[real], atol=1e-5)
    # with full (B*h, T, S) masks torch takes exactly ours, inverted
    with torch.no_grad():
        expected = theirs(x, memory, tgt_mask=~tgt_mask.repeat_interleave(H, 0),
                          memory_mask=~memory_mask.expand(2, 5, 7).repeat_interleave(H, 0))
    assert torch.allclose(actual, expected, atol=1e-5)


def test_decoder_layer_structure_and_dropout():
    layer = DecoderLayer(D, H, D_FF)
    assert len({id(getattr(layer, f"norm{n}")) for n in (1, 2, 3)}) == 3
    assert layer.self_attn is not layer.cross_attn
    x, memory = torch.randn(2, 3, D), torch.randn(2, 4, D)
    assert not torch.equal(layer(x, memory), layer(x, memory))
    layer.eval()
    assert torch.equal(layer(x, memory), layer(x, memory))


def _model(seed=0, **kw):
    torch.manual_seed(seed)
    return Transformer(20, 24, d_model=32, n_heads=4, n_layers=2, d_ff=64, **kw).eval()


def test_transformer_shapes_and_masks():
    model = _model()
    src, tgt = torch.randint(3, 20, (3, 7)), torch.randint(3, 24, (3, 5))
    assert model(src, tgt).shape == (3, 5, 24)
    assert model.pad_id == 0 and len(model.encoder_layers) == 2 and len(model.decoder_layers) == 2
    params = [p for p in model.parameters()]
    assert len({id(p) for p in params}) == len(params)


def test_decoder_output_at_t_does_not_see_later_targets():
    model = _model()
    src, tgt = torch.randint(3, 20, (2, 6)), torch.randint(3, 24, (2, 8))
    out = model(src, tgt)
    for t in range(8):
        changed = tgt.clone()
        changed[:, t + 1:] = torch.randint(3, 24, changed[:, t + 1:].shape)
        assert torch.allclose(model(src, changed)[:, :t + 1], out[:, :t + 1], atol=1e-5)


def test_source_padding_does_not_change_real_outputs():
    model = _model(pad_id=1)
    src, tgt = torch.randint(3, 20, (2, 6)), torch.randint(3, 24, (2, 5))
    padded = torch.cat([src, torch.ones(2, 4, dtype=torch.long)], dim=1)
    assert torch.allclose(model(src, tgt), model(padded, tgt), atol=1e-5)
    # target padding at the end leaves the real positions alone too
    tgt_padded = torch.cat([tgt, torch.ones(2, 3, dtype=torch.long)], dim=1)
    assert torch.allclose(model(src, tgt_padded)[:, :5], model(src, tgt), atol=1e-5)


def test_model_overfits_a_small_batch():
    torch.manual_seed(0)
    model = Transformer(12, 12, d_model=32, n_heads=4, n_layers=2, d_ff=64, dropout=0.0)
    src = torch.randint(3, 12, (8, 6))
    tgt = torch.cat([torch.ones(8, 1, dtype=torch.long), src.flip(1), torch.full((8, 1), 2)], dim=1)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(150):
        loss = translation_loss(model(src, tgt[:, :-1]), tgt[:, 1:], 0, label_smoothing=0.0)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05
    model.eval()
    out = greedy_decode(model, src, 10, 1, 2)
    assert torch.equal(out, tgt[:, 1:])
    assert torch.equal(beam_search(model, src, 10, 1, 2, beam_size=3), tgt[:, 1:])


def test_greedy_decode_stops_pads_and_matches_forward():
    model = _model()
    src = torch.randint(3, 20, (4, 6))
    out = greedy_decode(model, src, 9, 1, 2)
    assert out.shape[0] == 4 and out.shape[1] <= 9
    # each token is the argmax of the model's own forward pass on the prefix
    ys = torch.cat([torch.ones(4, 1, dtype=torch.long), out], dim=1)
    logits = model(src, ys[:, :-1])
    for row in range(4):
        for t in range(out.shape[1]):
            if t > 0 and (out[row, :t] == 2).any():
                assert out[row, t] == 0   # finished: padding
            else:
                assert out[row, t] == logits[row, t].argmax()


def test_greedy_decode_stops_when_every_row_is_done():
    model = _model()
    with torch.no_grad():
        model.output.bias.fill_(-100.0)
        model.output.bias[2] = 100.0    # always eos
    assert greedy_decode(model, torch.randint(3, 20, (3, 5)), 10, 1, 2).tolist() == [[2], [2], [2]]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_search_with_one_beam_is_greedy(seed):
    model = _model(seed)
    src = torch.randint(3, 20, (5, 7))
    assert torch.equal(beam_search(model, src, 12, 1, 2, beam_size=1), greedy_decode(model, src, 12, 1, 2))


def test_beam_search_finds_at_least_as_likely_translations():
    model = _model(3)
    src = torch.randint(3, 20, (6, 5))

    def logp(out):
        ys = torch.cat([torch.ones(6, 1, dtype=torch.long), out], dim=1)
        lp = torch.log_softmax(model(src, ys[:, :-1]), -1).gather(-1, ys[:, 1:, None])[..., 0]
        return (lp * (out != 0) + 0).sum(-1)

    greedy, beam = greedy_decode(model, src, 8, 1, 2), beam_search(model, src, 8, 1, 2, beam_size=5,
                                                                  length_penalty=0.0)
    assert (logp(beam) >= logp(greedy) - 1e-4).all()


def test_schedule_batches_and_scores():
    lrs = [lr_at(s, 1000, 1e-3, 100) for s in range(1000)]
    assert lrs[0] == pytest.approx(1e-5) and max(lrs) == pytest.approx(1e-3) and lrs[99] == pytest.approx(1e-3)
    assert lrs[-1] < 1e-6
    src = [[5] * n for n in range(1, 40)]
    tgt = [[1] + [6] * n + [2] for n in range(1, 40)]
    batches = make_batches(src, tgt, max_tokens=100)
    assert sum(s.shape[0] for s, _ in batches) == 39
    assert all(s.numel() + t.numel() <= 100 or s.shape[0] == 1 for s, t in batches)
    scores = corpus_scores(["der Hund sieht den Ball", "ich weiß"], ["der Hund sieht den Ball", "ich weiß es"])
    assert scores["exact_match"] == 50.0 and 0 < scores["bleu"] < 100
    smoothed = translation_loss(torch.zeros(1, 1, 4), torch.tensor([[3]]), 0, label_smoothing=0.1)
    assert smoothed.item() == pytest.approx(F.cross_entropy(torch.zeros(1, 4), torch.tensor([3])).item())


def test_train_runs_its_steps_unless_a_time_cap_stops_it(capsys):
    batches = [(torch.randint(3, 20, (4, 5)), torch.randint(3, 24, (4, 6))) for _ in range(3)]
    full = train(_model(), batches, steps=7, warmup_steps=2)
    assert full["steps"] == full["planned"] == 7 and not full["stopped_early"] and len(full["losses"]) == 7
    assert "7/7" in capsys.readouterr().out                     # the progress bar, on stdout
    capped = train(_model(), batches, steps=7, warmup_steps=2, max_seconds=0.0, progress=False)
    assert capped["steps"] == 0 and capped["planned"] == 7 and capped["stopped_early"]
