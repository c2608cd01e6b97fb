"""How well, and how fast, does notebook 10's GPT learn Python's standard library on a CPU?

Reads ``lib.lm.stdlib_text()``, trains the byte-level BPE, encodes and splits the ids (90 % train,
the last 10 % validation), then prints the corpus (MB, tokens, bytes per token), the tokenizer's
training and encoding times, the unigram and Kneser-Ney bigram perplexities on the validation ids,
and trains ``lib.gpt.GPT`` with ``lib.lm.train`` (loss ``lib.gpt.lm_loss``) for a fixed number of
steps: its wall time, the validation perplexity and its ratio to the Kneser-Ney bigram's.
The machine's load average is printed before training (timings are only meaningful when it is low).

Bars (from the issue that added notebook 10): the default run in at most 75 s on an idle 2-core CPU
with a validation perplexity at most 0.7 x the bigram's; ``--long`` at most 0.5 x (a few minutes).
Measured on 2 shared cores (Python 3.11.7, torch 2.13, nothing else running): default 46 s, 0.60 x;
--long 0.45 x in 160 s. The perplexities repeat exactly on one machine (seeded); the times vary.
The exit status is 0 when the bars that apply are met.

    .venv/bin/python benchmarks/bench_gpt_training.py
    .venv/bin/python benchmarks/bench_gpt_training.py --long
    .venv/bin/python benchmarks/bench_gpt_training.py --steps 500 --d-model 96    # try another configuration
"""
import argparse
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lib import lm  # noqa: E402
from lib.device import _busy_cores  # noqa: E402
from lib.gpt import GPT, lm_loss  # noqa: E402

# The notebook's configuration, and the longer run: a model twice as wide and deep, the same steps.
DEFAULT = dict(vocab_size=512, d_model=64, n_heads=4, n_layers=2, d_ff=256, dropout=0.0, length=64, batch_size=32,
               steps=1000, peak_lr=6e-3, warmup_steps=100)
LONG = dict(DEFAULT, d_model=128, n_layers=4, d_ff=512, peak_lr=3e-3)
SECONDS_BAR, RATIO_BAR, LONG_RATIO_BAR = 75.0, 0.7, 0.5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--long", action="store_true", help="the longer run (default: the notebook's)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    for key, value in DEFAULT.items():
        parser.add_argument("--" + key.replace("_", "-"), type=type(value), help=f"override (default {value})")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args()
    config = dict(LONG if args.long else DEFAULT)
    config.update({k: getattr(args, k) for k in DEFAULT if getattr(args, k) is not None})
    torch.set_num_threads(args.threads)

    start = time.perf_counter()
    text = lm.stdlib_text()
    read_s = time.perf_counter() - start
    start = time.perf_counter()
    tok = lm.train_tokenizer(text, config["vocab_size"])
    tok_s = time.perf_counter() - start
    start = time.perf_counter()
    ids = lm.encode(tok, text)
    enc_s = time.perf_counter() - start
    vocab = tok.get_vocab_size()
    train_ids, valid_ids = lm.split(ids)
    n_bytes = len(text.encode("utf-8"))
    print(f"corpus: {len(lm.stdlib_files())} files, {n_bytes / 1e6:.2f} MB read in {read_s:.1f} s; "
          f"{len(ids)} tokens ({len(train_ids)} train, {len(valid_ids)} valid), {n_bytes / len(ids):.2f} bytes/token")
    print(f"tokenizer: {vocab} tokens, trained in {tok_s:.1f} s, text encoded in {enc_s:.1f} s")
    start = time.perf_counter()
    unigram = lm.unigram_perplexity(train_ids, valid_ids, vocab)
    bigram = lm.kneser_ney_bigram_perplexity(train_ids, valid_ids, vocab)
    print(f"baselines ({time.perf_counter() - start:.1f} s): unigram perplexity {unigram:.2f}, "
          f"Kneser-Ney bigram {bigram:.2f}")

    torch.manual_seed(0)
    model = GPT(vocab, config["d_model"], config["n_heads"], config["n_layers"], config["d_ff"],
                max_len=config["length"], dropout=config["dropout"])
    n_params = sum(p.numel() for p in model.parameters())
    load, busy = os.getloadavg()[0], _busy_cores(1.0)   # the load average still counts this script's own start
    print(f"model: {n_params / 1e6:.2f} M parameters; {config}")
    print(f"machine: {os.cpu_count()} CPUs, {args.threads} torch threads; before training: load average {load:.2f}, "
          f"{busy:.2f} cores busy over 1 s")
    start = time.perf_counter()
    losses = lm.train(model, train_ids, steps=config["steps"], batch_size=config["batch_size"],
                      length=config["length"], peak_lr=config["peak_lr"], warmup_steps=config["warmup_steps"],
                      loss_fn=lm_loss, progress=not args.no_progress)
    train_s = time.perf_counter() - start
    start = time.perf_counter()
    ppl = lm.perplexity(model, valid_ids, config["length"])
    eval_s = time.perf_counter() - start
    ratio = ppl / bigram
    print(f"training: {config['steps']} steps in {train_s:.1f} s ({1000 * train_s / config['steps']:.0f} ms/step), "
          f"last loss {sum(losses[-20:]) / 20:.3f}")
    print(f"validation perplexity {ppl:.2f} ({eval_s:.1f} s): {ratio:.3f} x the Kneser-Ney bigram's, "
          f"{ppl / unigram:.3f} x the unigram's")
    print(f"load average after training: {os.getloadavg()[0]:.2f}")

    bar = LONG_RATIO_BAR if args.long else RATIO_BAR
    good = ratio <= bar
    print(f"bar perplexity <= {bar} x bigram:", "met" if good else "NOT met")
    if not args.long:
        fast = train_s <= SECONDS_BAR
        print(f"bar training <= {SECONDS_BAR:.0f} s:", "met" if fast else "NOT met",
              "" if busy < 0.3 else f"(judged with {busy:.1f} cores busy: not idle)")
        good = good and fast
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
