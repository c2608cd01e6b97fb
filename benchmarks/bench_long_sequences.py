"""Notebook 09's two claims about cost, measured side by side in one run.

1. KV cache: ``lib.kv_cache.greedy_decode_cached`` vs ``lib.transformer.greedy_decode`` on a model
   of notebook 08's size (d_model 128, 4 heads, 2 + 2 layers, d_ff 512, 1000 tokens), untrained:
   speed does not depend on the weights. The output length is forced by an eos id that argmax
   never returns (eos_id = -1), so both decoders run exactly L steps. For L = 16 ... 256, at one
   batch size: tokens generated per second by each, the speed-up, and whether the ids are
   identical; then, at L = 64, the speed-up at several batch sizes, with the PyTorch operations
   each decoder runs per step. Each time is the fastest of ``--repeats`` alternating runs; with one
   thread it is the CPU time of this process (what the wall time is on an idle machine, and robust
   to other programs sharing the cores), with more threads the wall time.
2. Sliding-window attention: ``lib.banded_attention.banded_attention`` (each query against its
   2w + 1 keys only) vs full attention under ``lib.local_attention.sliding_window_mask``
   (``lib.self_attention.scaled_dot_product_attention``, the mask made inside the call), for
   T = 256 ... 8192: the peak memory of the tensors each call allocates (PyTorch's profiler,
   ``profile_memory=True``) and the time of one call; the log-log slopes of memory and time
   against T (1: linear, 2: quadratic).

Bars: speed-up >= 3x at 64-token outputs (at ``--batch``, 8 by default: a small batch; notebook 08
decodes its test set 100 sentences at a time); banded memory slope <= 1.2 and full memory slope
>= 1.8. The exit status is 0 when both are met. One thread by default: on a machine shared with
other programs, two threads wait for each other and the times scatter.

    .venv/bin/python benchmarks/bench_long_sequences.py               # 1 thread, batch 8
    .venv/bin/python benchmarks/bench_long_sequences.py --threads 2 --batch 32
"""
import argparse
import math
import os
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode

from lib.banded_attention import banded_attention
from lib.kv_cache import greedy_decode_cached
from lib.local_attention import sliding_window_mask
from lib.self_attention import scaled_dot_product_attention
from lib.transformer import Transformer, greedy_decode

SPEEDUP_BAR, BANDED_SLOPE_BAR, FULL_SLOPE_BAR = 3.0, 1.2, 1.8
LENGTHS = (16, 32, 64, 128, 256)
NEVER = -1            # an eos id argmax never returns: every output runs to max_len


def clock() -> float:
    """CPU seconds of this process with one thread (robust on a shared machine), else wall seconds."""
    return time.process_time() if torch.get_num_threads() == 1 else time.perf_counter()


def fastest(fns: dict, repeats: int) -> dict:
    """Seconds of one call of each fn, the fastest of ``repeats`` rounds, timed alternately; and the last result."""
    times, results = {name: [] for name in fns}, {}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = clock()
            results[name] = fn()
            times[name].append(clock() - start)
    return {name: min(t) for name, t in times.items()}, results


class CountOps(TorchDispatchMode):
    """Counts the PyTorch operations (aten calls) run inside it."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


def ops_per_step(decode, model, src, length) -> float:
    with CountOps() as counter:
        decode(model, src, length, 1, NEVER)
    return counter.n / length


def model_08(seed=0):
    """Notebook 08's model sizes, untrained, in eval mode."""
    torch.manual_seed(seed)
    return Transformer(1000, 1000, d_model=128, n_heads=4, n_layers=2, d_ff=512, dropout=0.0).eval()


def source(batch, seed=0, length=20):
    """(batch, length) random ids, every other sentence padded after 3/4 of its length."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, 1000, (batch, length), generator=g)
    src[::2, length * 3 // 4:] = 0
    return src


def decode_pair(model, src, length, repeats):
    fns = {"uncached": lambda: greedy_decode(model, src, length, 1, NEVER),
           "cached": lambda: greedy_decode_cached(model, src, length, 1, NEVER)}
    times, out = fastest(fns, repeats)
    assert out["uncached"].shape == (src.shape[0], length), "the forced length did not hold"
    return times, torch.equal(out["uncached"], out["cached"])


def bench_cache(batch, repeats, batches=(1, 8, 32)):
    model = model_08()
    greedy_decode_cached(model, source(2), 4, 1, NEVER), greedy_decode(model, source(2), 4, 1, NEVER)  # warm up
    print(f"\n1. KV cache: greedy decoding, batch {batch}, source length 20 (half padded), output forced to "
          f"L tokens (eos_id = {NEVER}); fastest of {repeats}")
    print(f"{'L':>5}  {'uncached tok/s':>14}  {'cached tok/s':>12}  {'speed-up':>8}  identical")
    speedups, identical = {}, True
    for length in LENGTHS:
        times, same = decode_pair(model, source(batch), length, repeats if length <= 64 else 1)
        tokens = batch * length
        speedups[length] = times["uncached"] / times["cached"]
        identical &= same
        print(f"{length:>5}  {tokens / times['uncached']:>14.0f}  {tokens / times['cached']:>12.0f}  "
              f"{speedups[length]:>7.1f}x  {'yes' if same else 'NO'}", flush=True)
    src = source(1)
    ops = {name: ops_per_step(fn, model, src, 64) for name, fn in (("uncached", greedy_decode),
                                                                   ("cached", greedy_decode_cached))}
    print(f"\n   L = 64 at other batch sizes; PyTorch operations per step: uncached {ops['uncached']:.0f}, "
          f"cached {ops['cached']:.0f}, at any batch size")
    print(f"{'batch':>7}  {'uncached s':>10}  {'cached s':>8}  {'cached ms/step':>14}  {'speed-up':>8}  identical")
    for b in batches:
        times, same = decode_pair(model, source(b), 64, repeats)
        identical &= same
        print(f"{b:>7}  {times['uncached']:>10.3f}  {times['cached']:>8.3f}  {1000 * times['cached'] / 64:>14.2f}  "
              f"{times['uncached'] / times['cached']:>7.1f}x  {'yes' if same else 'NO'}", flush=True)
    return speedups[64], identical


def peak_bytes(fn) -> int:
    """Peak bytes held by the tensors fn allocates while it runs (allocations minus frees, in order)."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]")
    held = peak = 0
    for _, nbytes in events:
        held += nbytes
        peak = max(peak, held)
    return peak


def slope(xs, ys) -> float:
    """Least-squares slope of log y against log x."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def bench_banded(window=64, d=64, lengths=(256, 512, 1024, 2048, 4096, 8192)):
    print(f"\n2. sliding-window attention, window {window} (each query sees up to {2 * window + 1} keys), "
          f"one head of size {d}")
    print(f"{'T':>6}  {'banded MB':>9}  {'full MB':>8}  {'banded ms':>9}  {'full ms':>8}  equal")
    rows = []
    for t in lengths:
        g = torch.Generator().manual_seed(t)
        q, k, v = (torch.randn(1, t, d, generator=g) for _ in range(3))
        banded = lambda: banded_attention(q, k, v, window)[0]
        full = lambda: scaled_dot_product_attention(q, k, v, sliding_window_mask(t, window))[0]
        memory = {"banded": peak_bytes(banded), "full": peak_bytes(full)}
        times, out = fastest({"banded": banded, "full": full}, 3 if t <= 2048 else 1)
        same = torch.allclose(out["banded"], out["full"], atol=1e-5)
        rows.append((t, memory, times))
        print(f"{t:>6}  {memory['banded'] / 2**20:>9.2f}  {memory['full'] / 2**20:>8.1f}  "
              f"{1000 * times['banded']:>9.1f}  {1000 * times['full']:>8.1f}  {'yes' if same else 'NO'}", flush=True)
    ts = [r[0] for r in rows]
    slopes = {name: (slope(ts, [r[1][name] for r in rows]), slope(ts, [r[2][name] for r in rows]))
              for name in ("banded", "full")}
    for name, (m, s) in slopes.items():
        print(f"   log-log slope against T, {name:>6}: memory {m:.2f}, time {s:.2f}")
    return slopes["banded"][0], slopes["full"][0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="PyTorch CPU threads (default 1)")
    parser.add_argument("--batch", type=int, default=8, help="sentences decoded at once (default 8)")
    parser.add_argument("--repeats", type=int, default=5,
                        help="timed rounds, the fastest counts (default 5; 1 for outputs over 64 tokens)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"PyTorch {torch.__version__}, CPU, {torch.get_num_threads()} thread(s), "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; times: "
          f"{'CPU time of this process' if args.threads == 1 else 'wall time'}")

    speedup, identical = bench_cache(args.batch, args.repeats)
    banded_slope, full_slope = bench_banded()

    fast = speedup >= SPEEDUP_BAR and identical
    linear = banded_slope <= BANDED_SLOPE_BAR and full_slope >= FULL_SLOPE_BAR
    print(f"\n{'PASS' if fast else 'FAIL'}: KV cache speed-up at 64-token outputs, batch {args.batch}: "
          f"{speedup:.1f}x (bar >= {SPEEDUP_BAR:.0f}x), outputs {'identical' if identical else 'DIFFERENT'}")
    print(f"{'PASS' if linear else 'FAIL'}: memory slope banded {banded_slope:.2f} (bar <= {BANDED_SLOPE_BAR}), "
          f"full {full_slope:.2f} (bar >= {FULL_SLOPE_BAR})")
    return 0 if fast and linear else 1


if __name__ == "__main__":
    sys.exit(main())
