"""Notebook 11's claims about memory and speed, measured side by side in one run.

1. Tiled attention: ``lib.tiled_attention.tiled_attention`` (FlashAttention's forward pass in PyTorch,
   block 64) vs notebook 01's ``lib.self_attention.scaled_dot_product_attention`` and PyTorch's
   ``F.scaled_dot_product_attention``, one head of size 64, for T = 512 ... 4096: the largest tensor
   any operation creates (``lib.memory.largest_tensor``: the score matrix for full attention, one
   block of scores for tiled), the ratio, the time of one call of each, and the largest difference
   of the outputs.
2. Grouped-query attention: a small decoder-only stack of ``lib.grouped_query.GroupedQueryAttention``
   layers (d_model 128, 8 query heads, 4 layers, untrained) decodes 64 tokens greedily for a batch,
   with a key/value cache of n_kv_heads heads, for n_kv_heads = 8, 2, 1: the cache's bytes and the
   tokens per second, first from an empty context, then after a context of 1024 positions (random
   keys and values: the speed does not depend on them).

Each time is the fastest of ``--repeats`` alternating runs; with one thread on a CPU it is the CPU time
of this process (robust to other programs sharing the cores), else the wall time (after a CUDA
synchronize on a GPU).

Bars: the largest tensor of tiled attention is at most 1/8 of full attention's at T = 4096, and the
outputs agree to 1e-5; the cache with one kv head is exactly n_heads (8) times smaller than with 8.
The exit status is 0 when both are met.

    .venv/bin/python benchmarks/bench_efficient_attention.py                 # CPU, 1 thread
    .venv/bin/python benchmarks/bench_efficient_attention.py --device cuda
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

from lib.grouped_query import GroupedQueryAttention
from lib.memory import largest_tensor
from lib.multi_head import merge_heads, split_heads
from lib.self_attention import scaled_dot_product_attention
from lib.tiled_attention import tiled_attention

MEMORY_BAR, MATCH_BAR = 1 / 8, 1e-5
LENGTHS = (512, 1024, 2048, 4096)


def clock(device) -> float:
    """CPU seconds of this process with one CPU thread, else wall seconds (after the GPU finished)."""
    if device.type == "cuda":
        torch.cuda.synchronize()
        return time.perf_counter()
    return time.process_time() if torch.get_num_threads() == 1 else time.perf_counter()


def fastest(fns: dict, repeats: int, device) -> tuple:
    """Seconds of one call of each fn, the fastest of ``repeats`` rounds timed alternately (after a warm-up); and
    the last results."""
    results = {name: fn() for name, fn in fns.items()}
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = clock(device)
            results[name] = fn()
            times[name].append(clock(device) - start)
    return {name: min(t) for name, t in times.items()}, results


def bench_tiled(device, repeats, d=64, block=64):
    print(f"\n1. attention of one head of size {d}, batch 1, tiled with block {block}; largest tensor created, "
          f"and time per call (fastest of {repeats})")
    print(f"{'T':>5}  {'full MiB':>8}  {'tiled MiB':>9}  {'ratio':>6}  {'01 ms':>8}  {'tiled ms':>8}  "
          f"{'F.sdpa ms':>9}  {'tiled/01':>8}  {'01/F.sdpa':>9}  {'max diff':>8}")
    ratio = diff = None
    for t in LENGTHS:
        g = torch.Generator().manual_seed(t)
        q, k, v = (torch.randn(1, 1, t, d, generator=g).to(device) for _ in range(3))
        full_bytes = largest_tensor(scaled_dot_product_attention, q, k, v).bytes
        tiled_bytes = largest_tensor(tiled_attention, q, k, v, block=block).bytes
        times, out = fastest({"01": lambda: scaled_dot_product_attention(q, k, v)[0],
                              "tiled": lambda: tiled_attention(q, k, v, block=block),
                              "sdpa": lambda: F.scaled_dot_product_attention(q, k, v)}, repeats, device)
        ratio = tiled_bytes / full_bytes
        diff = max((out["tiled"] - out["01"]).abs().max().item(), (out["sdpa"] - out["01"]).abs().max().item())
        print(f"{t:>5}  {full_bytes / 2**20:>8.2f}  {tiled_bytes / 2**20:>9.2f}  1/{1 / ratio:<4.0f}  "
              f"{1000 * times['01']:>8.2f}  {1000 * times['tiled']:>8.2f}  {1000 * times['sdpa']:>9.2f}  "
              f"{times['tiled'] / times['01']:>8.2f}  {times['01'] / times['sdpa']:>9.1f}  {diff:>8.1e}", flush=True)
    return ratio, diff


class Block(nn.Module):
    """A pre-norm decoder layer with grouped-query self-attention."""

    def __init__(self, d_model, n_heads, n_kv_heads):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = GroupedQueryAttention(d_model, n_heads, n_kv_heads)
        self.ff = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))


class TinyDecoder(nn.Module):
    """Notebook 11's decoder-only model: embeddings, learned positions, pre-norm GQA layers, output layer."""

    def __init__(self, n_kv_heads, vocab=256, d_model=128, n_heads=8, n_layers=4, max_len=2048):
        super().__init__()
        self.embed, self.pos = nn.Embedding(vocab, d_model), nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads, n_kv_heads) for _ in range(n_layers))
        self.norm, self.out = nn.LayerNorm(d_model), nn.Linear(d_model, vocab)


def attend_cached(attn, x, keys, values, t):
    """Attention of the newest token x (B, 1, d) at position t; its key and value are written into the caches
    keys, values (B, n_kv, max_len, d_head). The query heads of a group meet their kv head without a copy."""
    n_kv, group = attn.n_kv_heads, attn.n_heads // attn.n_kv_heads
    keys[:, :, t:t + 1], values[:, :, t:t + 1] = split_heads(attn.w_k(x), n_kv), split_heads(attn.w_v(x), n_kv)
    q = split_heads(attn.w_q(x), attn.n_heads).unflatten(1, (n_kv, group)).flatten(2, 3)   # (B, n_kv, group, d_head)
    out, _ = scaled_dot_product_attention(q, keys[:, :, :t + 1], values[:, :, :t + 1])
    return attn.w_o(merge_heads(out.unflatten(2, (group, 1)).flatten(1, 2)))


@torch.no_grad()
def decode(model, start, steps, context):
    """Greedy decoding of ``steps`` tokens after start (B, 1), with ``context`` random cached positions before.
    Returns the cache's bytes."""
    attn = model.blocks[0].attn
    d_head, b = attn.w_q.out_features // attn.n_heads, start.shape[0]
    caches = [(start.new_zeros(b, attn.n_kv_heads, context + steps, d_head, dtype=torch.float),
               start.new_zeros(b, attn.n_kv_heads, context + steps, d_head, dtype=torch.float)) for _ in model.blocks]
    for keys, values in caches:
        keys[:, :, :context].normal_()
        values[:, :, :context].normal_()
    ids = start
    for t in range(steps):
        x = model.embed(ids[:, -1:]) + model.pos.weight[context + t]
        for block, (keys, values) in zip(model.blocks, caches):
            x = x + attend_cached(block.attn, block.norm1(x), keys, values, context + t)
            x = x + block.ff(block.norm2(x))
        ids = torch.cat([ids, model.out(model.norm(x)).argmax(-1)], dim=1)
    return sum(2 * keys.numel() * keys.element_size() for keys, _ in caches)


def bench_gqa(device, batch, repeats, steps=64, contexts=(0, 1024)):
    print(f"\n2. decoding {steps} tokens for a batch of {batch}: d_model 128, 8 query heads of 16, 4 layers; "
          f"tokens per second (fastest of {repeats})")
    print(f"{'positions':>9}  {'n_kv_heads':>10}  {'cache MiB':>9}  {'tokens/s':>9}  {'vs 8 kv heads':>13}")
    start = torch.randint(256, (batch, 1), generator=torch.Generator().manual_seed(0)).to(device)
    models = {}
    for n_kv in (8, 2, 1):
        torch.manual_seed(0)
        models[n_kv] = TinyDecoder(n_kv).to(device).eval()
    cache_bytes = {}
    for context in contexts:
        times, nbytes = fastest({n_kv: (lambda m=m: decode(m, start, steps, context)) for n_kv, m in models.items()},
                                repeats, device)
        for n_kv in models:
            cache_bytes[n_kv, context] = nbytes[n_kv]
            print(f"{context + steps:>9}  {n_kv:>10}  {nbytes[n_kv] / 2**20:>9.2f}  "
                  f"{batch * steps / times[n_kv]:>9.0f}  {times[8] / times[n_kv]:>12.2f}x", flush=True)
    return cache_bytes[8, 0] / cache_bytes[1, 0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="PyTorch CPU threads (default 1)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--batch", type=int, default=16, help="sequences decoded at once (default 16)")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds, the fastest counts (default 3)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"PyTorch {torch.__version__}, {where}, {torch.get_num_threads()} thread(s), {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}; times: "
          f"{'CPU time of this process' if device.type == 'cpu' and args.threads == 1 else 'wall time'}")

    ratio, diff = bench_tiled(device, args.repeats)
    cache_ratio = bench_gqa(device, args.batch, args.repeats)

    small = ratio <= MEMORY_BAR and diff <= MATCH_BAR
    shrinks = cache_ratio == 8
    print(f"\n{'PASS' if small else 'FAIL'}: at T = {LENGTHS[-1]} tiled attention's largest tensor is "
          f"1/{1 / ratio:.0f} of full attention's (bar <= 1/{1 / MEMORY_BAR:.0f}); outputs differ by {diff:.1e} "
          f"(bar <= {MATCH_BAR:.0e})")
    print(f"{'PASS' if shrinks else 'FAIL'}: the cache with 1 kv head is {cache_ratio:g} times smaller than with 8 "
          f"(bar: exactly 8, the number of query heads)")
    return 0 if small and shrinks else 1


if __name__ == "__main__":
    sys.exit(main())
