"""Claims of notebook 06 (residual connections and LayerNorm) about what its cells print.

The gradient and activation measurements are seeded; the sorting experiment of section 7 runs on one
thread with fixed seeds, so one computer prints the same numbers at every run. Another processor may
round differently and a training run amplifies that, so the claims on the experiment use the margins the
prose states (runs with other seeds land well inside them), not the exact numbers.
"""
import math
import re

RUNS = ("lr 1e-2, post-norm, no warmup", "lr 1e-2, pre-norm, no warmup", "lr 1e-2, post-norm, 50 warmup steps",
        "lr 1e-3, post-norm, no warmup", "lr 1e-3, pre-norm, no warmup")


def _experiment(run):
    """{run name: (final loss, accuracy in %)} as the sorting experiment printed them."""
    found = {name: (float(loss), float(acc)) for name, loss, acc in re.findall(
        r"^(lr 1e-\d, .*?)\s+final loss ([\d.]+), accuracy per position ([\d.]+)%$", run.text, re.M)}
    assert set(found) == set(RUNS), f"section 7: expected the five runs {RUNS}, found {sorted(found)}"
    return found


def check(run):
    # Section 1: the plain stack's gradient shrinks by more than fifteen orders of magnitude.
    plain, residual = run.match(r"first block / last block: plain ([\d.e+-]+), residual ([\d.e+-]+)").groups()
    assert float(plain) < 1e-15, f"section 1 says the gradient shrinks by more than 15 orders of magnitude: {plain}"
    norms = run.numbers(r"plain stack, block\s+\d+: gradient norm ([\d.e+-]+)")
    assert norms == sorted(norms), f"section 1: the gradient should grow from the first block to the last: {norms}"
    # Section 2: with residual connections, the first block gets as much gradient as the last.
    assert 0.1 < float(residual) < 10, f"section 2 says every block gets a gradient of the same order: {residual}"

    # Section 3, "Where eps goes matters": output spreads of the three formulas.
    spreads = {}
    for sigma, yours, outside, slides in re.findall(
            r"input spread ([\d.e+-]+), output spread: your layer_norm ([\d.e+-]+), eps outside ([\d.e+-]+), "
            r"slides ([\d.e+-]+)", run.text):
        spreads[float(sigma)] = (float(yours), float(outside), float(slides))
    assert set(spreads) == {1.0, 1e-2, 1e-4, 1e-5, 1e-6}, f"section 3: spreads printed for {sorted(spreads)}"
    assert abs(spreads[1.0][0] - 1) < 1e-3 and spreads[1e-2][0] > 0.9, \
        f"section 3 says the correct formula gives ordinary vectors spread 1: {spreads}"
    assert spreads[1e-4][0] < 0.05 and spreads[1e-6][0] < 1e-3, \
        f"section 3 says the correct formula fades out below sqrt(eps): {spreads}"
    assert spreads[1e-4][1] > 0.85 and 0.4 < spreads[1e-5][1] < 0.6, \
        f"section 3 says eps outside blows up to near 1 at 1e-4 and to 0.5 at 1e-5: {spreads}"
    for sigma, (_, _, slides) in spreads.items():
        assert abs(slides - math.sqrt(sigma)) < 0.05 * math.sqrt(sigma), \
            f"section 3 says the slides' formula gives spread sqrt(sigma): at {sigma}, {slides}"

    # Section 5: plain shrinks, residual grows, post-norm pinned at 1, pre-norm grows but slower than residual.
    std = {name: (float(a), float(b)) for name, a, b in re.findall(
        r"^(plain|residual|post-norm|pre-norm)\s+std after block 1: ([\d.]+), after block \d+: ([\d.]+)$", run.text, re.M)}
    assert len(std) == 4, f"section 5: expected four stacks, found {std}"
    assert std["plain"][1] < std["plain"][0], f"section 5 says the plain stack's signal shrinks: {std['plain']}"
    assert std["residual"][1] > 1.3 * std["residual"][0], f"section 5 says the residual stream grows: {std['residual']}"
    assert all(abs(v - 1) < 0.01 for v in std["post-norm"]), f"section 5 says post-norm pins the scale at 1: {std}"
    assert std["residual"][0] < std["pre-norm"][1] < std["residual"][1], \
        f"section 5 says pre-norm's stream keeps growing, a little slower than without LayerNorm: {std}"

    # Section 6, "Your layer is PyTorch's layer": same function, dropout only in train mode.
    diffs = run.numbers(r"largest difference from nn.TransformerEncoderLayer = ([\d.e+-]+)")
    assert len(diffs) == 2 and max(diffs) < 1e-5, f"section 6 says the layer equals PyTorch's: {diffs}"
    assert run.match(r"train mode, two calls equal: (\w+)").group(1) == "False", "section 6: dropout in train mode"
    assert run.match(r"eval mode,  two calls equal: (\w+)").group(1) == "True", "section 6: no dropout in eval mode"

    # Section 7, the paragraph after the sorting experiment (and the model answer of Question 2).
    chance = run.number(r"chance \(uniform guess\)\s+loss ([\d.]+)")
    position_only = run.number(r"position only \(digits ignored\)\s+loss ([\d.]+)")
    assert abs(chance - math.log(10)) < 1e-3, f"section 7: chance is ln 10, printed {chance}"
    assert 1.4 <= position_only <= 1.65, f"section 7 says the position-only model reaches about 1.5: {position_only}"
    found = _experiment(run)
    post, pre, warm, post_small, pre_small = (found[name] for name in RUNS)
    assert pre[0] < 0.3 and pre[1] > 90, f"section 7 says pre-norm gets under 0.3 and over 90 % at 1e-2: {pre}"
    assert post[0] > 1.9 and post[1] < 30, f"section 7 says post-norm without warmup stays near ln 10 at 1e-2: {post}"
    assert post[0] > position_only + 0.3, f"section 7 says post-norm stays far above the position-only model: {post}"
    assert warm[0] < 0.6 and warm[1] > 75, f"section 7 says post-norm with warmup trains (a few tenths): {warm}"
    assert warm[0] > pre[0], f"section 7 says post-norm with warmup is behind pre-norm: {warm} vs {pre}"
    for name, (loss, acc) in (("post-norm", post_small), ("pre-norm", pre_small)):
        assert loss < 0.6 and acc > 90, f"section 7 says {name} learns the task at 1e-3: {loss}, {acc}%"
