"""Notebook 10's references: the GPT and its loss (lib/gpt.py), sampling and cached generation (lib/sampling.py),
against PyTorch's built-ins (nn.TransformerEncoderLayer in pre-norm, F.cross_entropy) and the properties the
notebook states."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lib.gpt import GPT, lm_loss
from lib.sampling import generate, sample_next


def small(vocab=31, **sizes):
    torch.manual_seed(0)
    sizes = {**dict(d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=24, dropout=0.0), **sizes}
    return GPT(vocab, **sizes).eval()


def test_gpt_equals_torchs_pre_norm_layers_with_the_same_weights():
    """Each block is nn.TransformerEncoderLayer(norm_first=True, activation='gelu') under a causal mask; then ln_f and
    the tied output layer."""
    model = small()
    idx = torch.randint(0, 31, (3, 11))
    x = model.positions(model.tok_emb(idx))
    mask = nn.Transformer.generate_square_subsequent_mask(11)
    for block in model.blocks:
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True, layer_norm_eps=1e-5).eval()
        with torch.no_grad():
            layer.self_attn.in_proj_weight.copy_(torch.cat([block.attn.w_q.weight, block.attn.w_k.weight,
                                                            block.attn.w_v.weight]))
            layer.self_attn.in_proj_bias.copy_(torch.cat([block.attn.w_q.bias, block.attn.w_k.bias,
                                                          block.attn.w_v.bias]))
            layer.self_attn.out_proj.weight.copy_(block.attn.w_o.weight)
            layer.self_attn.out_proj.bias.copy_(block.attn.w_o.bias)
            for mine, theirs in ((block.ln1, layer.norm1), (block.ln2, layer.norm2)):
                theirs.weight.copy_(mine.weight)
                theirs.bias.copy_(mine.bias)
            layer.linear1.load_state_dict(block.ff[0].state_dict())
            layer.linear2.load_state_dict(block.ff[2].state_dict())
        x = layer(x, src_mask=mask, is_causal=True)
    expected = F.layer_norm(x, (32,), model.ln_f.weight, model.ln_f.bias) @ model.tok_emb.weight.T
    with torch.no_grad():
        assert torch.allclose(model(idx), expected, atol=1e-5)


def test_the_output_layer_is_the_embedding_and_starts_near_uniform():
    model = small()
    assert model.head.weight is model.tok_emb.weight and model.head.bias is None
    untied = sum(p.numel() for p in model.parameters()) + model.tok_emb.weight.numel()
    assert sum(p.numel() for n, p in model.named_parameters()) == untied - 31 * 32
    idx = torch.randint(0, 31, (4, 20))
    with torch.no_grad():
        loss = lm_loss(model(idx), idx)
    assert abs(loss.item() - torch.log(torch.tensor(31.0)).item()) < 0.2   # GPT-2's initialization: about log V


def test_no_position_sees_the_future():
    model = small()
    idx = torch.randint(0, 31, (2, 12))
    changed = idx.clone()
    changed[:, 7:] = (changed[:, 7:] + 3) % 31
    with torch.no_grad():
        assert torch.allclose(model(idx)[:, :7], model(changed)[:, :7], atol=1e-6)
        assert not torch.allclose(model(idx)[:, 7], model(changed)[:, 7])


@pytest.mark.parametrize("pad_id", [None, 0, 5])
def test_lm_loss_is_cross_entropy_on_the_shifted_tokens(pad_id):
    torch.manual_seed(1)
    logits, targets = torch.randn(3, 9, 13) * 4, torch.randint(0, 13, (3, 9))
    if pad_id is not None:
        targets[1, 5:] = pad_id
        targets[2, 0] = pad_id
    expected = F.cross_entropy(logits[:, :-1].reshape(-1, 13), targets[:, 1:].reshape(-1),
                               ignore_index=-100 if pad_id is None else pad_id)
    assert torch.allclose(lm_loss(logits, targets, pad_id), expected, atol=1e-6)
    big = logits * 100                                                   # stable: no overflow to inf
    assert torch.isfinite(lm_loss(big, targets, pad_id))


def test_sampling_follows_the_kept_distribution():
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0])
    rows = logits.expand(40000, -1)
    g = torch.Generator().manual_seed(0)

    def freq(**kw):
        return torch.bincount(sample_next(rows, generator=g, **kw), minlength=5).double() / len(rows)

    p = torch.softmax(logits.double(), -1)
    assert torch.allclose(freq(), p, atol=0.01)
    assert torch.allclose(freq(temperature=0.5), torch.softmax(logits.double() / 0.5, -1), atol=0.01)
    top2 = torch.softmax(logits[:2].double(), -1)
    assert torch.allclose(freq(top_k=2)[:2], top2, atol=0.01) and freq(top_k=2)[2:].sum() == 0
    # cumulative probabilities 0.56, 0.77, 0.90, 0.97, 1: p = 0.8 keeps three tokens, p = 0.5 one; after top-3
    # (renormalized: 0.63, 0.86, 1) p = 0.8 keeps two
    assert (freq(top_p=0.8) > 0).tolist() == [True, True, True, False, False]
    assert freq(top_p=0.5)[0] == 1
    assert (freq(top_k=3, top_p=0.8) > 0).tolist() == [True, True, False, False, False]
    assert torch.equal(sample_next(rows[:3], temperature=0), torch.zeros(3, dtype=torch.long))
    same = [sample_next(rows[:100], generator=torch.Generator().manual_seed(5)) for _ in range(2)]
    assert torch.equal(*same)


def test_generate_with_the_cache_is_greedy_decoding_token_for_token():
    model = small()
    with torch.no_grad():    # far from the initialization, large position vectors: the greedy path changes often
        for name, p in model.named_parameters():
            p.normal_(0, 3.0 if name.startswith("positions") else 0.3)
    prompt = torch.randint(0, 31, (3, 5))
    out = generate(model, prompt, 19, temperature=0)
    ys = prompt
    with torch.no_grad():
        for _ in range(19):
            ys = torch.cat([ys, model(ys)[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(out, ys) and min(len(set(row[5:].tolist())) for row in out) >= 4
    assert torch.equal(generate(model, prompt, 0), prompt)
    with pytest.raises(ValueError, match="max_len"):
        generate(model, prompt, 20)
    g1, g2 = (generate(model, prompt, 8, top_p=0.9, generator=torch.Generator().manual_seed(3)) for _ in range(2))
    assert torch.equal(g1, g2)
