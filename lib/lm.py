"""Training and measuring a language model on text (notebook 10).

Support code, not a reference solution: everything here takes the model (and the loss
function) as an argument, so it works with the student's ``GPT`` as well as with any
model that maps ids (B, T) to logits (B, T, V).

- ``init_weights``: GPT-2's initialization, for ``model.apply(init_weights)``;
- ``stdlib_text``: a corpus that is on every machine, Python's own standard library;
- ``train_tokenizer``, ``encode``, ``decode``: a byte-level BPE (HF ``tokenizers``);
- ``split``, ``get_batch``: train/validation ids and random windows of them;
- ``unigram_perplexity``, ``kneser_ney_bigram_perplexity``: the baselines to beat;
- ``perplexity``: a model's perplexity on held-out ids;
- ``train``: AdamW, warmup then cosine, a fixed number of steps, a progress bar on stdout.
"""
import math
import sys
import sysconfig
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from lib.translate import lr_at


# --- initialization ------------------------------------------------------------

def init_weights(module: nn.Module) -> None:
    """GPT-2's initialization, for ``model.apply(init_weights)``: the weights of every nn.Linear and
    nn.Embedding ~ N(0, 0.02), Linear biases 0. With a tied output layer, the default N(0, 1) embedding
    gives logits of size ~sqrt(d) and a first loss far above ln V; with 0.02 it starts at about ln V."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


# --- text ----------------------------------------------------------------------

# Folders left out of the corpus. encodings/: codec tables (long strings of escaped characters, 12% of the text);
# test/, tests/, idle_test/: the test suites, larger than the rest together and full of odd data (byte strings,
# unusual characters, generated cases); pydoc_data/: one generated file, the documentation as a Python string;
# site-packages/: installed packages, not the standard library (and different on every machine).
SKIPPED_FOLDERS = frozenset({"encodings", "test", "tests", "idle_test", "pydoc_data", "site-packages", "__pycache__"})


def stdlib_files(every: int = 3) -> list[Path]:
    """The .py files of this Python's standard library, sorted by their path relative to it, every ``every``-th one
    (every=3: about 200 files, 3.5 MB on Python 3.11), leaving out the folders in ``SKIPPED_FOLDERS``.
    The same list every time for a given Python."""
    root = Path(sysconfig.get_paths()["stdlib"])
    found = sorted((p.relative_to(root).as_posix(), p) for p in root.rglob("*.py"))
    kept = [p for rel, p in found if not SKIPPED_FOLDERS & set(rel.split("/")[:-1]) and p.is_file()]
    return kept[::every]


def read_text(path) -> str:
    """The text of a UTF-8 file (any file you like: a book, your own code). Windows line ends become "\\n"."""
    return Path(path).read_text(encoding="utf-8")


def stdlib_text(every: int = 3) -> str:
    """The files of ``stdlib_files(every)`` that read as UTF-8, joined with a blank line between them."""
    texts = []
    for path in stdlib_files(every):
        try:
            texts.append(read_text(path))
        except (OSError, UnicodeDecodeError):
            continue
    return "\n\n".join(texts)


# --- tokenizer -----------------------------------------------------------------

def train_tokenizer(text: str, vocab_size: int = 512, sample_chars: int | None = 2_000_000):
    """A byte-level BPE (GPT-2's kind) with ``vocab_size`` tokens, learned from ``text``.

    The 256 bytes are tokens from the start, so every string encodes, and decodes back exactly.
    ``sample_chars``: learn the merges from the first that many characters only (None: all of them):
    merges are what is frequent, and 2 MB find nearly the same ones as the whole 3.5 MB of ``stdlib_text()``
    (2.15 bytes per token instead of 2.16 at 512 tokens), in under a second instead of 1.6 s.
    Returns a ``tokenizers.Tokenizer``.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    sample = text if sample_chars is None else text[:sample_chars]
    tok.train_from_iterator([sample], trainer=trainer)     # one piece: a newline and the next line's indent merge
    return tok


def encode(tok, text: str) -> torch.Tensor:
    """str -> (n,) int64 token ids."""
    return torch.tensor(tok.encode(text).ids, dtype=torch.long)


def decode(tok, ids) -> str:
    """(n,) ids (tensor or list) -> str."""
    ids = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
    return tok.decode(ids)


# --- data ----------------------------------------------------------------------

def split(ids: torch.Tensor, valid_fraction: float = 0.1):
    """(N,) -> (train, valid): the last ``valid_fraction`` of the ids is held out for validation."""
    n_valid = int(len(ids) * valid_fraction)
    return ids[:len(ids) - n_valid], ids[len(ids) - n_valid:]


def get_batch(data: torch.Tensor, batch_size: int, length: int, generator: torch.Generator | None = None):
    """``batch_size`` windows of ``length`` consecutive ids from random offsets of data (N,) -> (B, length) int64.

    A window is the model's input and its own target: ``loss_fn(model(x), x)`` predicts x[:, 1:] from
    x[:, :-1], so ``length`` counts the one extra token (at most the model's max_len)."""
    start = torch.randint(len(data) - length + 1, (batch_size,), generator=generator)
    return data[start[:, None] + torch.arange(length)]


# --- baselines -----------------------------------------------------------------

def unigram_perplexity(train: torch.Tensor, valid: torch.Tensor, vocab_size: int) -> float:
    """Perplexity on valid[1:] of token frequencies in train, add-one smoothed: p(w) = (c(w) + 1) / (N + V).
    (valid[0] is left out, as the bigram cannot predict it.)"""
    counts = torch.bincount(train, minlength=vocab_size).double()
    log_p = ((counts + 1) / (len(train) + vocab_size)).log()
    return math.exp(-log_p[valid[1:]].mean().item())


def kneser_ney_bigram(train: torch.Tensor, vocab_size: int, discount: float = 0.75):
    """Interpolated Kneser-Ney bigram fit on train (N,). Returns ``prob(prev, next)``: ids (n,), (n,) -> p (n,).

    p(w | v) = max(c(v w) - D, 0) / c(v) + D N1+(v .) / c(v) * p_cont(w), where c(v) counts v as a context
    and N1+(v .) the distinct tokens seen after v; an unseen context v gets p_cont(w).
    p_cont(w) = max(N1+(. w) - D, 0) / N1+(. .) + D n / N1+(. .) / V: how many distinct tokens w follows,
    discounted in turn and interpolated with the uniform 1 / V (n: the tokens with N1+(. w) > 0), so a token
    never seen in train still has a small probability. For each v, p(. | v) sums to 1 over the vocabulary.
    """
    v_size = vocab_size
    keys, pair_counts = torch.unique(train[:-1] * v_size + train[1:], return_counts=True)   # sorted bigram types
    prev_of, next_of = keys // v_size, keys % v_size
    context = torch.bincount(train[:-1], minlength=v_size).double()                          # c(v)
    followers = torch.bincount(prev_of, minlength=v_size).double()                           # N1+(v .)
    preceded = torch.bincount(next_of, minlength=v_size).double()                            # N1+(. w)
    types = len(keys)                                                                        # N1+(. .)
    p_cont = ((preceded - discount).clamp(min=0) + discount * int((preceded > 0).sum()) / v_size) / types
    pair_counts = pair_counts.double()

    def prob(prev: torch.Tensor, nxt: torch.Tensor) -> torch.Tensor:
        key = prev * v_size + nxt
        at = torch.searchsorted(keys, key).clamp(max=len(keys) - 1)
        count = torch.where(keys[at] == key, pair_counts[at], torch.zeros((), dtype=torch.double))   # c(v w)
        c_v = context[prev]
        seen = c_v > 0
        c_safe = c_v.clamp(min=1)
        p = (count - discount).clamp(min=0) / c_safe + discount * followers[prev] / c_safe * p_cont[nxt]
        return torch.where(seen, p, p_cont[nxt])

    return prob


def kneser_ney_bigram_perplexity(train: torch.Tensor, valid: torch.Tensor, vocab_size: int,
                                 discount: float = 0.75) -> float:
    """Perplexity on valid[1:] (each token given the one before it) of ``kneser_ney_bigram`` fit on train."""
    prob = kneser_ney_bigram(train, vocab_size, discount)
    return math.exp(-prob(valid[:-1], valid[1:]).log().mean().item())


# --- a model's perplexity ------------------------------------------------------

@torch.no_grad()
def perplexity(model, data: torch.Tensor, length: int, batch_size: int = 32, n_batches: int | None = None) -> float:
    """exp(mean next-token cross-entropy) of ``model`` on data (N,), cut into non-overlapping windows of
    ``length`` ids (the tail that does not fill one is left out): in each window, tokens 1.. are predicted
    from the ones before them, as in training. ``n_batches`` (optional) uses only the first that many batches.
    Runs in eval mode (no dropout), without gradients, and puts the model back in the mode it was in."""
    device = next(model.parameters()).device
    n = len(data) // length
    windows = data[:n * length].view(n, length)
    if n_batches is not None:
        windows = windows[:n_batches * batch_size]
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        for start in range(0, len(windows), batch_size):
            x = windows[start:start + batch_size].to(device)
            logits = model(x)[:, :-1]                                                    # (B, length - 1, V)
            total += F.cross_entropy(logits.flatten(0, 1).float(), x[:, 1:].flatten(), reduction="sum").item()
            count += x[:, 1:].numel()
    finally:
        model.train(was_training)
    return math.exp(total / count)


# --- training ------------------------------------------------------------------

def make_optimizer(model, lr: float, weight_decay: float = 0.1, betas=(0.9, 0.95)) -> torch.optim.AdamW:
    """AdamW with weight decay on the 2-D weights only (matrices, embeddings), not on biases and LayerNorms."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=betas)


def train(model, data: torch.Tensor, *, steps: int, batch_size: int, length: int, peak_lr: float, warmup_steps: int,
          loss_fn, seed: int = 0, weight_decay: float = 0.1, progress: bool = True, eval_every: int | None = None,
          valid: torch.Tensor | None = None, eval_batches: int = 10):
    """Train on random windows (B, length) of data (N,) for ``steps`` AdamW steps: ``loss_fn(model(x), x)``
    (say ``lm_loss``), the learning rate of ``lr_at`` (linear warmup to ``peak_lr``, cosine to 0), gradients
    clipped to norm 1. Batches come from a generator seeded with ``seed``, on the model's device.

    The progress bar (on stdout) shows the steps, the time left, and the loss (a moving average over about
    20 batches). Returns the loss of every step; with ``eval_every`` (and ``valid``), returns
    (losses, [(step, validation perplexity), ...]), measured every ``eval_every`` steps and after the last, on
    the first ``eval_batches`` batches of valid. Leaves the model in eval mode.
    """
    from tqdm import tqdm

    device = next(model.parameters()).device
    optimizer = make_optimizer(model, peak_lr, weight_decay)
    generator = torch.Generator().manual_seed(seed)
    losses, evals, average, postfix = [], [], None, {}
    model.train()
    bar = tqdm(total=steps, file=sys.stdout, disable=not progress, mininterval=1.0, ncols=100, unit="step",
               desc="training")
    for step in range(steps):
        lr = lr_at(step, steps, peak_lr, warmup_steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        x = get_batch(data, batch_size, length, generator).to(device)
        loss = loss_fn(model(x), x)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        average = losses[-1] if average is None else 0.95 * average + 0.05 * losses[-1]
        postfix.update(loss=f"{average:.3f}", lr=f"{lr:.1e}")
        if eval_every and valid is not None and ((step + 1) % eval_every == 0 or step + 1 == steps):
            evals.append((step + 1, perplexity(model, valid, length, batch_size, eval_batches)))
            postfix["valid_ppl"] = f"{evals[-1][1]:.1f}"
        bar.set_postfix(postfix, refresh=False)
        bar.update(1)
    bar.close()
    model.eval()
    return (losses, evals) if eval_every else losses
