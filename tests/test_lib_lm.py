"""Notebook 10's support code (lib/lm.py): the corpus, the byte-level BPE, batches, the unigram and Kneser-Ney
baselines against brute-force Python, the perplexity of a model, and training a tiny lib.gpt.GPT."""
import math
from collections import Counter

import pytest
import torch
from torch import nn

from lib import lm

ODD = "déjà vu\t→ 東京 🐍\n\n  if x:\r\n\treturn 'ok'  # \x00 tail \u200b\n"
CODE = "".join(f"def f{i % 7}(x):\n    return x + {i % 5}\n\n" for i in range(300))


@pytest.fixture(scope="module")
def tok():
    return lm.train_tokenizer(CODE + ODD, vocab_size=300)


# --- corpus and tokenizer ---------------------------------------------------------------------------------------

def test_stdlib_files_are_found_sorted_and_skip_encodings():
    files = lm.stdlib_files(every=25)
    assert len(files) > 10 and all(p.suffix == ".py" for p in files)
    assert not any("encodings" in p.parts or "site-packages" in p.parts or "test" in p.parts for p in files)
    assert files == lm.stdlib_files(every=25)


def test_read_text(tmp_path):
    (tmp_path / "a.txt").write_text(ODD, encoding="utf-8", newline="")
    assert lm.read_text(tmp_path / "a.txt") == ODD.replace("\r\n", "\n")      # universal newlines


def test_tokenizer_round_trips_any_text(tok):
    assert tok.get_vocab_size() == 300
    for s in (ODD, CODE[:500], "", " ", "\n\n\n", "   leading spaces", "ünïcödé never seen: ∑ ∫ 𝔘 ☃",
              "\t\t\x7f"):
        ids = lm.encode(tok, s)
        assert ids.dtype == torch.long and ids.dim() == 1
        assert lm.decode(tok, ids) == s
        assert lm.decode(tok, ids.tolist()) == s


def test_tokenizer_merges_what_is_frequent(tok):
    assert len(lm.encode(tok, CODE)) < len(CODE.encode()) / 2          # the repeated text packs into few tokens
    assert len(lm.encode(tok, "Жук")) == len("Жук".encode())             # bytes never seen in training stay bytes


# --- split and batches ------------------------------------------------------------------------------------------

def test_split_holds_out_the_end():
    ids = torch.arange(100)
    train, valid = lm.split(ids, 0.1)
    assert torch.equal(train, ids[:90]) and torch.equal(valid, ids[90:])
    assert len(lm.split(ids, 0.0)[1]) == 0


def test_get_batch_gives_windows_of_the_data_repeatably():
    data = torch.arange(50)
    x = lm.get_batch(data, 8, 10, torch.Generator().manual_seed(3))
    assert x.shape == (8, 10) and x.dtype == torch.long
    assert torch.equal(x - x[:, :1], torch.arange(10).expand(8, 10))   # consecutive ids
    assert x.min() >= 0 and x.max() <= 49
    assert torch.equal(x, lm.get_batch(data, 8, 10, torch.Generator().manual_seed(3)))
    whole = lm.get_batch(torch.arange(10), 4, 10, torch.Generator().manual_seed(0))
    assert torch.equal(whole, torch.arange(10).expand(4, 10))           # length == len(data): the only window


# --- baselines --------------------------------------------------------------------------------------------------

TRAIN = [0, 1, 2, 0, 1, 3, 0, 2, 2, 1, 0, 1, 2, 0, 3, 3, 1]
VALID = [0, 1, 2, 4, 0, 3, 1, 4]                                       # 4 never occurs in train
V = 6                                                                  # 5 occurs nowhere


def brute_kn(train, v_size, d):
    """Interpolated Kneser-Ney bigram, written out with dicts."""
    pairs = Counter(zip(train, train[1:]))
    context = Counter(train[:-1])
    followers = Counter(v for v, _ in pairs)
    preceded = Counter(w for _, w in pairs)
    types = len(pairs)

    def p_cont(w):
        return max(preceded[w] - d, 0) / types + d * len(preceded) / types / v_size

    def p(w, v):
        if context[v] == 0:
            return p_cont(w)
        return max(pairs[(v, w)] - d, 0) / context[v] + d * followers[v] / context[v] * p_cont(w)
    return p


def test_unigram_perplexity_by_hand():
    counts = Counter(TRAIN)
    nll = [-math.log((counts[w] + 1) / (len(TRAIN) + V)) for w in VALID[1:]]
    got = lm.unigram_perplexity(torch.tensor(TRAIN), torch.tensor(VALID), V)
    assert got == pytest.approx(math.exp(sum(nll) / len(nll)), rel=1e-12)


@pytest.mark.parametrize("discount", [0.75, 0.5, 1.0])
def test_kneser_ney_bigram_by_hand(discount):
    p = brute_kn(TRAIN, V, discount)
    prob = lm.kneser_ney_bigram(torch.tensor(TRAIN), V, discount)
    prev, nxt = torch.arange(V).repeat_interleave(V), torch.arange(V).repeat(V)
    table = prob(prev, nxt).view(V, V)                                  # table[v, w] = p(w | v)
    for v in range(V):
        for w in range(V):
            assert table[v, w].item() == pytest.approx(p(w, v), rel=1e-12)
    assert torch.allclose(table.sum(1), torch.ones(V, dtype=torch.double), atol=1e-12)   # seen and unseen contexts
    assert (table > 0).all()
    nll = [-math.log(p(w, v)) for v, w in zip(VALID, VALID[1:])]
    got = lm.kneser_ney_bigram_perplexity(torch.tensor(TRAIN), torch.tensor(VALID), V, discount)
    assert got == pytest.approx(math.exp(sum(nll) / len(nll)), rel=1e-12)


def test_a_bigram_beats_a_unigram_on_text_with_structure(tok):
    train, valid = lm.split(lm.encode(tok, CODE), 0.2)
    vocab = tok.get_vocab_size()
    bigram = lm.kneser_ney_bigram_perplexity(train, valid, vocab)
    assert 1 < bigram < lm.unigram_perplexity(train, valid, vocab) / 2


# --- a model's perplexity ---------------------------------------------------------------------------------------

class Markov(nn.Module):
    """The exact next-token distribution of a Markov chain, as logits. Counts its calls in training mode."""

    def __init__(self, transition):
        super().__init__()
        self.logits = nn.Parameter(transition.log())
        self.train_calls = 0

    def forward(self, idx):
        self.train_calls += self.training
        return self.logits[idx]


def test_perplexity_of_the_true_distribution():
    torch.manual_seed(0)
    transition = torch.softmax(2 * torch.randn(5, 5, dtype=torch.double), -1)
    data = [0]
    g = torch.Generator().manual_seed(1)
    for _ in range(1002):
        data.append(int(torch.multinomial(transition[data[-1]], 1, generator=g)))
    data = torch.tensor(data)
    model = Markov(transition).train()
    windows = data[:1000].view(100, 10)                        # non-overlapping windows of 10, the tail left out
    nll = -transition[windows[:, :-1], windows[:, 1:]].log()
    expected = math.exp(nll.mean().item())
    assert lm.perplexity(model, data, 10, batch_size=7) == pytest.approx(expected, rel=1e-6)
    assert lm.perplexity(model, data, 10, batch_size=7, n_batches=2) == \
        pytest.approx(math.exp(nll[:14].mean().item()), rel=1e-6)
    assert model.training and model.train_calls == 0         # measured in eval mode, mode restored
    assert lm.perplexity(model.eval(), data, 10) == pytest.approx(expected, rel=1e-6) and not model.training


# --- initialization and training --------------------------------------------------------------------------------

def test_init_weights_is_gpt2s():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Embedding(300, 200), nn.Linear(200, 300), nn.LayerNorm(300))
    net.apply(lm.init_weights)
    for w in (net[0].weight, net[1].weight):
        assert abs(w.std().item() - 0.02) < 0.001 and abs(w.mean().item()) < 0.001
    assert torch.equal(net[1].bias, torch.zeros(300))
    assert torch.equal(net[2].weight, torch.ones(300))                # other modules keep theirs


def test_train_lowers_the_loss_of_a_tiny_gpt(tok):
    from lib.gpt import GPT, lm_loss

    ids = lm.encode(tok, CODE)
    train, valid = lm.split(ids, 0.1)
    torch.manual_seed(0)
    model = GPT(tok.get_vocab_size(), d_model=32, n_heads=2, n_layers=1, d_ff=64, max_len=16, dropout=0.0)
    before = lm.perplexity(model, valid, 16)
    assert before == pytest.approx(tok.get_vocab_size(), rel=0.2)    # GPT-2's initialization: about uniform
    losses, evals = lm.train(model, train, steps=60, batch_size=16, length=16, peak_lr=1e-2, warmup_steps=5,
                             loss_fn=lm_loss, progress=False, eval_every=30, valid=valid, eval_batches=2)
    assert len(losses) == 60 and [s for s, _ in evals] == [30, 60]
    assert sum(losses[-10:]) / 10 < 0.5 * sum(losses[:5]) / 5
    after = lm.perplexity(model, valid, 16)
    assert after < before / 10 and not model.training
    again = GPT(tok.get_vocab_size(), d_model=32, n_heads=2, n_layers=1, d_ff=64, max_len=16, dropout=0.0)
    again.load_state_dict(model.state_dict())
    assert lm.train(again, train, steps=3, batch_size=4, length=16, peak_lr=1e-3, warmup_steps=1,
                    loss_fn=lm_loss, progress=False) == pytest.approx(
        lm.train(model, train, steps=3, batch_size=4, length=16, peak_lr=1e-3, warmup_steps=1,
                 loss_fn=lm_loss, progress=False), rel=1e-5)          # the seed decides the batches
