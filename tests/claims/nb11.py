"""Claims of notebook 11 (efficient attention), checked on one full run of the solution notebook.

The memory figures (the largest tensor an operation creates, the cache sizes) are exact and deterministic, and so
are the merges of the online softmax (float64, seeded). Times are only compared with each other, never with a
number of seconds, with margins that hold on a busy machine: the timing cells run on one thread, measure the CPU
time of the process and keep the fastest of a few runs. The timing claims are about a CPU; on a GPU the notebook
says other things, and only the exact claims are checked.
"""
import re


def check(run):
    on_cpu = run.match(r"PyTorch \S+ on (\w+)").group(1) == "cpu"

    # section 1: "The largest tensor is the (T, T) score matrix, made by the batched matrix product (bmm) ...; every
    # doubling of T multiplies it by 4 ... At T = 4096 one head's scores take 64 MiB, while q takes 1 MiB. A model
    # with 32 heads, run on a batch of 8 sequences of that length, would need 8 x 32 x 64 MiB = 16 GiB"
    full = {int(t): (float(mib), int(a), int(b), op, float(q)) for t, mib, a, b, op, q in re.findall(
        r"T =\s+(\d+): largest tensor\s+([\d.]+) MiB, shape \(1, (\d+), (\d+)\), made by (\w+)\S*; "
        r"q itself ([\d.]+) MiB",
        run.text)}
    assert sorted(full) == [256, 512, 1024, 2048, 4096], f"section 1 measures T = 256 ... 4096, printed {sorted(full)}"
    for t, (mib, a, b, op, _) in full.items():
        assert (a, b) == (t, t) and op == "bmm", f"section 1: the largest tensor should be bmm's (T, T) scores: {t}"
        assert mib == t * t * 4 / 2**20, f"section 1: (T, T) float32 scores at T = {t} are {t * t * 4 / 2**20} MiB, " \
            f"printed {mib}"
    assert full[4096][0] == 64.0 and full[4096][4] == 1.0, \
        f"the paragraph after section 1's plot says 64 MiB of scores and 1 MiB for q at T = 4096: {full[4096]}"
    assert 8 * 32 * full[4096][0] == 16 * 2**10, f"8 sequences x 32 heads x 64 MiB = 16 GiB: {full[4096]}"

    # section 2: exp overflows without the shift; -inf - (-inf) is NaN
    assert "exp(x) / sum(exp(x))          : [nan, nan, nan]" in run.text, "section 2: exp(1000) should overflow to NaN"
    assert run.match(r"exp\(-inf - \(-inf\)\)\s+: (\w+)").group(1) == "nan", "section 2: exp(-inf - (-inf)) is NaN"

    # "Any order gives the whole row": "differences around 1e-15 in float64"; new maxima rescale the sum, which after
    # some of them goes down
    diffs = run.numbers(r"largest difference from the whole row ([\d.e+-]+)")
    assert len(diffs) == 6 and max(diffs) < 1e-13, f"the merges in any order should agree to rounding: {diffs}"
    new_max, went_down = (int(n) for n in run.match(
        r"blocks that brought a new maximum: (\d+) of the 9 after the first; "
        r"the running sum went down after (\d+)").groups())
    assert new_max >= 3 and went_down >= 1, \
        f"the paragraph after the merges says several blocks bring a new maximum and the sum goes down after some: " \
        f"{new_max}, {went_down}"

    # section 3: "The outputs agree to rounding error", "a query with nothing to look at gets zeros instead of NaN"
    same = run.numbers(r"largest difference from notebook 01's attention ([\d.e+-]+)")
    assert len(same) == 5 and max(same) < 1e-5, f"tiled attention should equal notebook 01's: {same}"
    row = run.match(r"query 2, no key allowed: notebook 01 gives (\[.*?\]) - tiled gives (\[.*?\])")
    assert row.group(1) == "[nan, nan, nan]" and row.group(2) == "[0.0, 0.0, 0.0]", \
        f"a fully masked row: NaN from notebook 01, zeros from tiled attention: {row.group(0)}"
    assert run.number(r"the other rows: largest difference ([\d.e+-]+)") < 1e-5, "the other rows should agree"

    # "grows like T instead of T^2 ... at T = 4096 the tiled version's largest tensor is 64 times smaller (1 MiB
    # against 64 MiB)"
    tiled = {int(t): (float(f), float(m), int(n), int(ratio)) for t, f, m, n, ratio in re.findall(
        r"T =\s+(\d+): full attention\s+([\d.]+) MiB, tiled\s+([\d.]+) MiB \(shape \(1, 1, (\d+), 64\)\), "
        r"tiled / full = 1/(\d+)", run.text)}
    assert sorted(tiled) == [256, 512, 1024, 2048, 4096], f"the memory table has T = {sorted(tiled)}"
    for t, (_, mib, n, ratio) in tiled.items():
        assert n == t and abs(mib - t * 64 * 4 / 2**20) < 0.01 and ratio == t // 64, \
            f"tiled attention's largest tensor should be (T, 64) floats, block / T of full attention's: {t}, {tiled[t]}"
    assert tiled[4096][:2] == (64.0, 1.0) and tiled[4096][3] == 64, f"64 times smaller at T = 4096: {tiled[4096]}"

    # backends: math builds the (T, T) matrix (64 MiB at T = 4096), flash returns the output only; on a CPU the
    # memory-efficient backend does not exist
    math_mib, math_t = run.match(r"math backend: largest tensor\s+([\d.]+) MiB, shape \(1, (\d+), \d+\)").groups()
    assert float(math_mib) == 64.0 and math_t == "4096", f"the math backend builds the 64 MiB matrix: {math_mib}"
    flash = run.match(r"flash backend: largest tensor\s+([\d.]+) MiB, shape \(1, 1, 4096, 64\); "
                      r"largest difference from tiled_attention ([\d.e+-]+)")
    if on_cpu:   # float32 there; a GPU runs the backends in float16
        assert float(flash.group(1)) == 1.0, f"the flash backend returns the output only: {flash.group(0)}"
        assert float(flash.group(2)) < 1e-5, f"the flash backend computes the same attention: {flash.group(0)}"
        assert "memory-efficient backend: not available for this input on cpu" in run.text, \
            "the paragraph after the backends says the memory-efficient backend does not exist on a CPU"

    # the timing paragraphs (CPU): short sequences, the loop is slower; at T = 4096 it has overtaken full attention;
    # F.scaled_dot_product_attention is faster than notebook 01's attention by a factor of a few at the longest
    if on_cpu:
        times = {int(t): (float(a), float(b), float(c)) for t, a, b, c in re.findall(
            r"T =\s+(\d+): notebook 01\s+([\d.]+) ms, tiled\s+([\d.]+) ms, "
            r"F.scaled_dot_product_attention\s+([\d.]+) ms",
            run.text)}
        assert sorted(times) == [128, 256, 512, 1024, 2048, 4096], f"the timing table has T = {sorted(times)}"
        slow = times[128][1] / times[128][0]
        fast = times[4096][1] / times[4096][0]
        assert slow > 1.2, f"the timing paragraph says the loop is slower for short sequences: tiled / 01 = {slow:.2f}"
        assert fast < 1.0, f"the timing paragraph says the loop overtakes full attention at T = 4096: {fast:.2f}"
        fused = times[4096][0] / times[4096][2]
        assert fused >= 2, f"F.scaled_dot_product_attention should be a few times faster at T = 4096: {fused:.1f}"

    # section 4: n_kv_heads = n_heads is multi-head attention; fewer kv heads = MultiHeadAttention with tied W_K, W_V
    assert run.number(r"n_kv_heads = 8 against MultiHeadAttention: outputs' largest difference ([\d.e+-]+)") < 1e-6
    assert run.number(r"weights' ([\d.e+-]+)") < 1e-6
    assert run.number(r"tied in groups of 4 heads: largest difference ([\d.e+-]+)") < 1e-6, \
        "GQA should equal multi-head attention with W_K, W_V tied in groups"

    # the cached decoder writes the same tokens; "4 MiB for multi-head attention, 1 MiB with 2 kv heads, 0.5 MiB
    # with one"; at 1088 positions "for multi-head attention 68 MiB over the 4 layers, 17 MiB in each"
    identical = re.findall(r"n_kv_heads = (\d): the cached decoder writes the same 64 tokens as the full model: (\w+)",
                           run.text)
    assert identical == [("8", "True"), ("2", "True"), ("1", "True")], f"cached vs full decoding: {identical}"
    caches = {(int(p), int(n)): (float(mib), float(speed)) for p, n, mib, speed in re.findall(
        r"(\d+) positions, n_kv_heads = (\d): cache\s+([\d.]+) MiB .*?,\s+(\d+) tokens/s", run.text)}
    expected = {(64, 8): 4.0, (64, 2): 1.0, (64, 1): 0.5, (1088, 8): 68.0, (1088, 2): 17.0, (1088, 1): 8.5}
    assert {key: mib for key, (mib, _) in caches.items()} == expected, f"the cache sizes: {caches}"
    assert run.match(r"\(2 x (\d+) layers x").group(1) == "4" and caches[1088, 8][0] / 4 == 17.0, \
        f"68 MiB over the 4 layers is 17 MiB per layer: {caches[1088, 8]}"

    # "With 64 positions, the gain is small (well under a factor of two)"; "With 1088 positions ... multi-query
    # attention decodes clearly faster, and its gain over multi-head attention is larger than with 64 positions"
    ratios = {int(p): (float(a), float(b)) for p, a, b in re.findall(
        r"(\d+) positions: multi-query / multi-head speed = ([\d.]+), grouped \(2\) / multi-head = ([\d.]+)", run.text)}
    assert sorted(ratios) == [64, 1088], f"the speed ratios: {ratios}"
    assert all(r < 1.8 for r in ratios[64]), f"at 64 positions the gain should be well under 2x: {ratios[64]}"
    assert ratios[1088][0] > max(1.3, ratios[64][0]), \
        f"at 1088 positions multi-query should decode clearly faster, and gain more than at 64: {ratios}"

    # "With 64 kv heads a single sequence needs 10 GiB of cache; with the 8 that the model really has, 1.25 GiB"
    big = {int(n): float(gib) for n, gib in re.findall(r"n_kv_heads = +(\d+):\s+([\d.]+) GiB of cache", run.text)}
    assert big == {64: 10.0, 8: 1.25, 1: 0.16}, f"the cache of the large model: {big}"
