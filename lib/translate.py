"""Training and evaluating a translation model (notebook 08).

Support code, not a reference solution: everything here takes the model (and,
for decoding, a decode function such as ``greedy_decode``) as an argument, so
it works with the student's ``Transformer`` as well as with ``torch.nn``'s.
A model needs ``pad_id``, ``encode(src, src_mask)`` and
``decode(tgt, memory, src_mask, tgt_mask)`` (-> logits) for the decoders here,
and ``model(src, tgt_in)`` -> logits for training.

- ``make_batches``: bucket sentence pairs by length, pad, shuffle the batches;
- ``lr_at``: linear warmup, then cosine decay;
- ``train``: teacher forcing with a label-smoothed cross-entropy, a fixed number of
  steps (and an optional time cap), a progress bar on stdout;
- ``beam_search``: batched beam search with a length penalty;
- ``evaluate``: corpus BLEU (sacrebleu) and exact match.
"""
import math
import random
import sys
import time

import torch
import torch.nn.functional as F

from lib.masking import causal_mask, padding_mask


# --- batches -------------------------------------------------------------------

def pad_batch(seqs, pad_id, device=None) -> torch.Tensor:
    """list of id lists -> (B, T_max) int64, right-padded with pad_id."""
    out = torch.full((len(seqs), max(len(s) for s in seqs)), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = torch.tensor(s, dtype=torch.long)
    return out if device is None else out.to(device)


def make_batches(src_ids, tgt_ids, max_tokens=2000, pad_id=0, seed=0):
    """Group pairs of similar length (little padding), at most ``max_tokens`` source+target
    tokens per batch (padding included), batches in a random order. Returns a list of
    (src (B, S), tgt (B, T)) int64 CPU tensors; tgt holds bos ... eos."""
    order = sorted(range(len(src_ids)), key=lambda i: (len(tgt_ids[i]), len(src_ids[i])))
    batches, current, longest_src, longest_tgt = [], [], 0, 0
    for i in order:
        s, t = max(longest_src, len(src_ids[i])), max(longest_tgt, len(tgt_ids[i]))
        if current and (s + t) * (len(current) + 1) > max_tokens:     # the padded batch would be too big
            batches.append(current)
            current, s, t = [], len(src_ids[i]), len(tgt_ids[i])
        current.append(i)
        longest_src, longest_tgt = s, t
    if current:
        batches.append(current)
    random.Random(seed).shuffle(batches)
    return [(pad_batch([src_ids[i] for i in b], pad_id), pad_batch([tgt_ids[i] for i in b], pad_id))
            for b in batches]


# --- learning rate -------------------------------------------------------------

def lr_at(step: int, total_steps: int, peak_lr: float, warmup_steps: int, progress: float | None = None) -> float:
    """Learning rate at ``step`` (0-based): rises linearly to ``peak_lr`` over ``warmup_steps``,
    then follows a cosine down to 0 at ``total_steps``. ``progress`` (0..1), when given,
    replaces step / total_steps for the decay (used when a time budget ends training early)."""
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    if progress is None:
        progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return peak_lr * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def noam_lr(step: int, d_model: int, warmup_steps: int) -> float:
    """The schedule of "Attention is all you need": d^-0.5 * min(step^-0.5, step * warmup^-1.5)."""
    step = step + 1
    return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)


# --- training ------------------------------------------------------------------

def translation_loss(logits, target, pad_id, label_smoothing=0.1):
    """Cross-entropy of logits (B, T, V) against target ids (B, T), padding ignored, with label
    smoothing: the target distribution puts 1 - eps on the right token and spreads eps over all."""
    return F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=pad_id,
                           label_smoothing=label_smoothing)


def train(model, batches, *, steps, peak_lr=1e-3, warmup_steps=200, max_seconds=None, label_smoothing=0.1,
          weight_decay=0.01, device=None, seed=0, progress=True):
    """Teacher forcing: the decoder reads tgt[:, :-1] (bos ...) and must predict tgt[:, 1:] (... eos).

    Trains for ``steps`` optimizer steps, so the result does not depend on the speed of the machine.
    ``max_seconds`` (optional) is a time cap: training stops once that much time has passed, and the
    cosine decay then follows the time or the steps, whichever is further along, so the learning rate
    reaches 0 either way; a capped run does fewer steps on a slow or busy machine, and learns less.
    The progress bar (on stdout) shows the steps done out of ``steps``, the time left, and the loss
    (a moving average over about 20 batches) and learning rate of the latest step.
    Returns a dict: losses (one per step), lrs, steps (done), planned (= ``steps``), seconds,
    stopped_early (True when the time cap ended training before ``steps``).
    """
    from tqdm import tqdm

    device = device or next(model.parameters()).device
    optimizer = torch.optim.AdamW(model.parameters(), lr=peak_lr, betas=(0.9, 0.98), weight_decay=weight_decay)
    rng = random.Random(seed)
    losses, lrs = [], []
    model.train()
    start = time.perf_counter()
    bar = tqdm(total=steps, file=sys.stdout, disable=not progress, mininterval=1.0, ncols=100, unit="step",
               desc="training")
    order, average = [], None
    for step in range(steps):
        elapsed = time.perf_counter() - start
        if max_seconds is not None and elapsed >= max_seconds:
            break
        time_progress = None
        if max_seconds is not None and step >= warmup_steps:
            by_steps = (step - warmup_steps) / max(1, steps - warmup_steps)
            time_progress = max(by_steps, elapsed / max_seconds)
        lr = lr_at(step, steps, peak_lr, warmup_steps, time_progress)
        for group in optimizer.param_groups:
            group["lr"] = lr
        if not order:
            order = list(range(len(batches)))
            rng.shuffle(order)
        src, tgt = batches[order.pop()]
        src, tgt = src.to(device), tgt.to(device)
        logits = model(src, tgt[:, :-1])
        loss = translation_loss(logits, tgt[:, 1:], model.pad_id, label_smoothing)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        lrs.append(lr)
        average = losses[-1] if average is None else 0.95 * average + 0.05 * losses[-1]
        # every step; the bar redraws at most once a second (mininterval), with the latest values
        bar.set_postfix(loss=f"{average:.3f}", lr=f"{lr:.1e}", refresh=False)
        bar.update(1)
    bar.close()
    model.eval()
    return {"losses": losses, "lrs": lrs, "steps": len(losses), "planned": steps,
            "seconds": time.perf_counter() - start, "stopped_early": len(losses) < steps}


# --- decoding ------------------------------------------------------------------

@torch.no_grad()
def beam_search(model, src, max_len, bos_id, eos_id, beam_size=4, length_penalty=0.6):
    """Keep the ``beam_size`` most likely partial translations of each sentence, extend each by
    every token, keep the best ``beam_size`` again; finished hypotheses (after eos) stay as
    they are. The winner maximizes log p / ((5 + length) / 6) ** length_penalty (Wu et al., 2016).

    src (B, S) -> ids (B, L), L <= max_len, in the format of greedy_decode: no bos, eos then
    model.pad_id. With beam_size=1 this is greedy decoding.
    """
    pad_id = model.pad_id
    b, k = src.shape[0], beam_size
    src_mask = padding_mask(src, pad_id)
    memory = model.encode(src, src_mask).repeat_interleave(k, 0)                 # (B*K, S, d)
    src_mask = src_mask.repeat_interleave(k, 0)
    ys = torch.full((b * k, 1), bos_id, dtype=torch.long, device=src.device)
    scores = torch.zeros(b, k, device=src.device)
    scores[:, 1:] = float("-inf")                                                # start from one hypothesis
    done = torch.zeros(b * k, dtype=torch.bool, device=src.device)
    lengths = torch.zeros(b * k, device=src.device)
    for _ in range(max_len):
        logits = model.decode(ys, memory, src_mask, causal_mask(ys.shape[1], device=src.device))[:, -1]
        logp = torch.log_softmax(logits.float(), dim=-1)                          # (B*K, V)
        v = logp.shape[-1]
        logp[done] = float("-inf")
        logp[done, pad_id] = 0.0                                                 # finished: pad, at no cost
        top, idx = (scores.view(-1, 1) + logp).view(b, k * v).topk(k, dim=-1)   # (B, K)
        rows = (torch.arange(b, device=src.device)[:, None] * k + idx // v).view(-1)
        token = (idx % v).view(-1)
        lengths = lengths[rows] + (~done[rows]).float()
        ys = torch.cat([ys[rows], token[:, None]], dim=1)
        done = done[rows] | (token == eos_id)
        scores = top
        if done.all():
            break
    penalty = ((5 + lengths) / 6) ** length_penalty
    best = (scores.view(-1) / penalty).view(b, k).argmax(-1)
    out = ys.view(b, k, -1)[torch.arange(b, device=src.device), best, 1:]
    keep = (out != pad_id).any(0).nonzero()
    return out[:, : int(keep.max()) + 1] if len(keep) else out


# --- evaluation ----------------------------------------------------------------

def cut_at_eos(ids, eos_id, pad_id):
    """One row of decoder output -> the list of ids before eos (pads dropped)."""
    out = []
    for t in ids:
        if t == eos_id:
            break
        if t != pad_id:
            out.append(int(t))
    return out


@torch.no_grad()
def translate_ids(model, decode_fn, src_ids, *, bos_id, eos_id, batch_size=100, max_len=None, device=None,
                  **decode_kwargs):
    """Decode a list of source id lists in batches -> list of output id lists (eos and pads removed)."""
    device = device or next(model.parameters()).device
    model.eval()
    order = sorted(range(len(src_ids)), key=lambda i: len(src_ids[i]))
    out = [None] * len(src_ids)
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        src = pad_batch([src_ids[i] for i in chunk], model.pad_id, device)
        limit = max_len or 2 * src.shape[1] + 10
        ids = decode_fn(model, src, limit, bos_id, eos_id, **decode_kwargs).tolist()
        for i, row in zip(chunk, ids):
            out[i] = cut_at_eos(row, eos_id, model.pad_id)
    return out


def corpus_scores(hypotheses, references):
    """Corpus BLEU (sacrebleu, default 13a tokenization) and exact match (%) of two lists of strings."""
    import sacrebleu

    # force: our sentences are already tokenized (" ." at the end), which sacrebleu would warn about on stderr
    bleu = sacrebleu.corpus_bleu(hypotheses, [references], force=True).score
    exact = 100.0 * sum(h.strip() == r.strip() for h, r in zip(hypotheses, references)) / max(1, len(references))
    return {"bleu": bleu, "exact_match": exact}
