"""How fast are the course's reference modules next to PyTorch's own?

Two comparisons, each at one configuration, timed alternately (A, B, A, B, ...)
after a warmup, with a fixed number of threads; the fastest of 15 rounds
(robust to other processes sharing the machine):

1. attention: forward + backward of ``lib.multi_head.MultiHeadAttention`` vs
   ``torch.nn.MultiheadAttention(batch_first=True)`` (self-attention with a
   key padding mask, per-head weights returned, as ours does; PyTorch's
   ``need_weights=False`` fast path is printed too, for information);
2. a training step (forward, label-smoothed loss, backward, AdamW step) of the
   reference ``lib.transformer.Transformer`` vs ``torch.nn.Transformer`` with
   embeddings, sinusoidal positions and an output layer of the same sizes.

    .venv/bin/python benchmarks/bench_models.py            # 2 threads, CPU
    .venv/bin/python benchmarks/bench_models.py --threads 4 --device cuda
"""
import argparse
import math
import time

import torch
import torch.nn.functional as F
from torch import nn

from lib.masking import causal_mask, padding_mask
from lib.multi_head import MultiHeadAttention
from lib.positions import SinusoidalPositions
from lib.transformer import Transformer


class TorchSeq2Seq(nn.Module):
    """nn.Transformer with the embeddings, positions and output layer of lib.transformer.Transformer."""

    def __init__(self, src_vocab, tgt_vocab, d_model=128, n_heads=4, n_layers=2, d_ff=512, dropout=0.1,
                 max_len=256, pad_id=0):
        super().__init__()
        self.d_model, self.pad_id = d_model, pad_id
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        self.positions = SinusoidalPositions(max_len, d_model)
        self.dropout = nn.Dropout(dropout)
        self.transformer = nn.Transformer(d_model, n_heads, n_layers, n_layers, d_ff, dropout, batch_first=True)
        self.output = nn.Linear(d_model, tgt_vocab)

    def forward(self, src, tgt_in):
        scale = math.sqrt(self.d_model)
        s = self.dropout(self.positions(self.src_embed(src) * scale))
        t = self.dropout(self.positions(self.tgt_embed(tgt_in) * scale))
        src_pad, tgt_pad = src == self.pad_id, tgt_in == self.pad_id
        h = self.transformer(s, t, tgt_mask=~causal_mask(tgt_in.shape[1], device=src.device),
                             src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
                             memory_key_padding_mask=src_pad)
        return self.output(h)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def compare(name_a, fn_a, name_b, fn_b, device, runs=15, number=None, warmup=3):
    """Seconds per call of fn_a and fn_b, timed alternately in ``runs`` rounds: the fastest round
    of each (the least disturbed by other processes on a shared machine)."""
    for _ in range(warmup):
        fn_a(), fn_b()
    sync(device)
    if number is None:   # enough calls for about 0.2 s per measurement
        start = time.perf_counter()
        fn_a()
        sync(device)
        number = max(1, int(0.1 / max(time.perf_counter() - start, 1e-6)))
    times = {name_a: [], name_b: []}
    for _ in range(runs):
        for name, fn in ((name_a, fn_a), (name_b, fn_b)):
            sync(device)
            start = time.perf_counter()
            for _ in range(number):
                fn()
            sync(device)
            times[name].append((time.perf_counter() - start) / number)
    return {k: min(v) for k, v in times.items()}


def bench_attention(device, batch, seq, d_model, n_heads):
    torch.manual_seed(0)
    ours = MultiHeadAttention(d_model, n_heads).to(device)
    theirs = nn.MultiheadAttention(d_model, n_heads, batch_first=True).to(device)
    x = torch.randn(batch, seq, d_model, device=device, requires_grad=True)
    tokens = torch.randint(1, 100, (batch, seq), device=device)
    tokens[: batch // 2, seq * 3 // 4:] = 0                                   # some padding
    mask = padding_mask(tokens, 0)                                            # ours: True = may attend
    pad = tokens == 0                                                         # torch: True = blocked
    grad = torch.randn(batch, seq, d_model, device=device)

    def run_ours():
        out, _ = ours(x, x, x, mask)
        out.backward(grad)

    def run_theirs():
        out, _ = theirs(x, x, x, key_padding_mask=pad, need_weights=True, average_attn_weights=False)
        out.backward(grad)

    def run_theirs_fast():
        out, _ = theirs(x, x, x, key_padding_mask=pad, need_weights=False)
        out.backward(grad)

    t = compare("ours", run_ours, "torch", run_theirs, device)
    fast = compare("ours", run_ours, "torch", run_theirs_fast, device)
    return t, fast


def bench_training(device, batch, src_len, tgt_len, vocab, d_model, n_heads, n_layers, d_ff):
    torch.manual_seed(0)
    sizes = dict(d_model=d_model, n_heads=n_heads, n_layers=n_layers, d_ff=d_ff, dropout=0.1)
    ours = Transformer(vocab, vocab, **sizes).to(device).train()
    theirs = TorchSeq2Seq(vocab, vocab, **sizes).to(device).train()
    src = torch.randint(3, vocab, (batch, src_len), device=device)
    tgt = torch.randint(3, vocab, (batch, tgt_len + 1), device=device)
    for t in (src, tgt):                                                      # realistic padding
        for row in range(batch):
            t[row, t.shape[1] - row % 4:] = 0
    optimizers = {id(m): torch.optim.AdamW(m.parameters(), lr=1e-4) for m in (ours, theirs)}

    def step(model):
        def run():
            logits = model(src, tgt[:, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=0, label_smoothing=0.1)
            opt = optimizers[id(model)]
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return run

    n_ours = sum(p.numel() for p in ours.parameters())
    n_theirs = sum(p.numel() for p in theirs.parameters())
    return compare("ours", step(ours), "torch", step(theirs), device), (n_ours, n_theirs)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    print(f"PyTorch {torch.__version__}, device {device}, {torch.get_num_threads()} threads")

    cfg = dict(batch=64, seq=32, d_model=128, n_heads=4)
    t, fast = bench_attention(device, **cfg)
    print(f"\n1. multi-head attention, forward + backward, {cfg}")
    print(f"   lib MultiHeadAttention          {t['ours'] * 1e3:8.2f} ms")
    print(f"   nn.MultiheadAttention           {t['torch'] * 1e3:8.2f} ms   (per-head weights returned)")
    print(f"   ratio ours / torch              {t['ours'] / t['torch']:8.2f}x")
    print(f"   (nn.MultiheadAttention with need_weights=False: {fast['torch'] * 1e3:.2f} ms, "
          f"ratio {fast['ours'] / fast['torch']:.2f}x)")

    cfg = dict(batch=64, src_len=20, tgt_len=22, vocab=1000, d_model=128, n_heads=4, n_layers=2, d_ff=512)
    t, (n_ours, n_theirs) = bench_training(device, **cfg)
    print(f"\n2. training step (forward, loss, backward, AdamW), {cfg}")
    print(f"   lib Transformer ({n_ours:,} parameters)   {t['ours'] * 1e3:8.2f} ms")
    print(f"   nn.Transformer  ({n_theirs:,} parameters)   {t['torch'] * 1e3:8.2f} ms")
    print(f"   ratio ours / torch              {t['ours'] / t['torch']:8.2f}x")


if __name__ == "__main__":
    main()
