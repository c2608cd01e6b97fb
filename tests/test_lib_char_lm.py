"""The tiny character-level language model of notebook 04 (lib/char_lm.py)."""
import torch

from lib.char_lm import TEXT, CharLM, CharTokenizer, generate, get_batch, loss_per_position, train_char_lm

CAUSAL = torch.ones(16, 16, dtype=torch.bool).tril()


def small_model(vocab_size):
    torch.manual_seed(0)
    return CharLM(vocab_size, block_size=16, d_model=32, d_ff=64, n_layers=1)


def test_tokenizer_round_trip():
    tok = CharTokenizer()
    ids = tok.encode(TEXT)
    assert ids.dtype == torch.long and ids.shape == (len(TEXT),)
    assert tok.decode(ids) == TEXT
    assert tok.vocab_size == len(set(TEXT))


def test_batches_are_shifted_windows():
    data = torch.arange(100)
    x, y = get_batch(data, 8, 4, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (4, 8)
    assert torch.equal(y, x + 1)


def test_forward_shapes_and_the_mask_is_used():
    tok = CharTokenizer()
    model = small_model(tok.vocab_size)
    x = torch.randint(tok.vocab_size, (2, 16))
    logits = model(x, CAUSAL)
    assert logits.shape == (2, 16, tok.vocab_size)
    x2 = x.clone()
    x2[:, 10:] = (x2[:, 10:] + 1) % tok.vocab_size
    changed = (model(x2, CAUSAL) - logits).abs().amax(dim=(0, 2))
    assert changed[:10].max() == 0 and changed[10:].min() > 0  # the causal model never sees the future
    assert (model(x2) - model(x)).abs().amax(dim=(0, 2))[:10].min() > 0  # without a mask, it does


def test_training_lowers_the_loss_and_generation_is_seeded():
    tok = CharTokenizer()
    data = tok.encode(TEXT)
    model = small_model(tok.vocab_size)
    losses = train_char_lm(model, data, CAUSAL, steps=30, batch_size=16, lr=1e-2)
    assert len(losses) == 30 and sum(losses[-5:]) / 5 < losses[0] - 0.5
    assert loss_per_position(model, data, CAUSAL, n_windows=8).shape == (16,)
    prompt = tok.encode("the ")
    a = generate(model, prompt, 20, CAUSAL, seed=3)
    b = generate(model, prompt, 20, CAUSAL, seed=3)
    assert torch.equal(a, b) and a.shape == (24,) and torch.equal(a[:4], prompt)
    assert len(generate(model, prompt, 20, None)) == 24  # longer than block_size: the context is cut
