"""Claims of notebook 03 (the position-wise feed-forward network) about what its cells print."""
import re


def check(run):
    # Section 1: the stack is one row-stochastic matrix times X.
    assert abs(run.number(r"rows of combined sum to ([\d.e+-]+)") - 1) < 1e-5 and \
        abs(run.number(r"rows of combined sum to [\d.e+-]+ \.\.\. ([\d.e+-]+)") - 1) < 1e-5, \
        "section 1 ('Watching the vectors collapse'): the rows of combined should sum to 1"
    assert run.number(r"smallest entry of combined: ([\d.e+-]+)") >= 0, \
        "section 1: combined should have no negative entry (row-stochastic)"
    assert run.number(r"\|out - combined @ X\| at most ([\d.e+-]+)") < 1e-5, "section 1: out should equal combined @ X"

    # 'Layer after layer the points are pulled together ... within about five layers (d = 2), seven (d = 16)',
    # and 'the spread can only shrink'.
    for d, first_small in ((2, (4, 5, 6)), (16, (6, 7, 8))):
        values = [float(v) for v in run.match(
            rf"d = {d:2d}: range of a feature after 0, 1, \.\.\., 12 layers: (.*)").group(1).split()]
        assert len(values) == 13, f"section 1: expected 13 feature ranges for d = {d}, got {values}"
        assert all(b <= a + 1e-6 for a, b in zip(values, values[1:])), \
            f"section 1 ('the spread can only shrink'): the feature range grew for d = {d}: {values}"
        collapsed = next(n for n, v in enumerate(values) if v < 0.01 * values[0])
        assert collapsed in first_small, \
            f"paragraph after the plots: for d = {d} the vectors should (nearly) collapse within about " \
            f"{first_small[1]} layers, got {collapsed}"

    assert re.search(r"rows of M sum to 1 and are >= 0: True True", run.text) and \
        re.search(r"output of the stack == M @ X @ W: True", run.text), \
        "'Learned projections do not change the picture': the stack should equal M @ X @ W with M row-stochastic"

    # Section 3: the FFN changes only position 2; attention changes every position.
    assert re.search(r"FFN on the whole tensor == FFN position by position: True", run.text), \
        "section 3: the FFN on the whole tensor should equal the FFN position by position"
    attn = [float(v) for v in run.match(r"change of each output, self-attention:\s+(.*)").group(1).split()]
    ffn = [float(v) for v in run.match(r"change of each output, feed-forward network:\s+(.*)").group(1).split()]
    assert min(attn) > 1e-3, f"section 3: attention should spread the change over every position, got {attn}"
    assert ffn[2] > 1e-3 and all(c < 1e-6 for t, c in enumerate(ffn) if t != 2), \
        f"section 3: the FFN should change position 2 and nothing else, got {ffn}"

    # Section 4: attention only barely beats the mean, with a flat band of predictions around 1;
    # with the FFN the predictions follow |x|.
    mse = {name: float(v) for name, v in re.findall(
        r"(attention only|attention \+ FFN|predict the mean)\s+test mean squared error ([\d.]+)", run.text)}
    assert 0.8 * mse["predict the mean"] < mse["attention only"] < mse["predict the mean"], \
        f"section 4 ('barely beats predicting the average'): got {mse}"
    assert mse["attention + FFN"] < 0.03 * mse["predict the mean"], \
        f"section 4: with the FFN the predictions should follow the V shape of |x|, got {mse}"
    m = run.match(r"attention only\s+test mean squared error [\d.]+\s+predictions: mean ([\d.]+), "
                  r"standard deviation ([\d.]+)")
    target_std = run.number(r"target \|x\|\s+mean [\d.]+, standard deviation ([\d.]+)")
    assert 0.85 < float(m.group(1)) < 1.15 and float(m.group(2)) < 0.5 * target_std, \
        f"section 4: the attention-only predictions should form a flat band around 1, got {m.group(0)!r}"

    # Section 5: the FFN holds about two thirds of a layer's weights.
    shares = run.numbers(r"FFN share ([\d.]+)%")
    assert len(shares) == 2 and all(66 < s < 67.5 for s in shares), \
        f"section 5 ('about 8/12 = 2/3'): the FFN share should be about two thirds, got {shares}"

    # Section 6: train mode is random, eval mode deterministic, and the average of train passes
    # converges to the eval output like 1/sqrt(n).
    assert re.search(r"train mode, two calls give the same output: False", run.text) and \
        re.search(r"eval mode,  two calls give the same output: True", run.text), \
        "section 6: two calls should differ in train mode and agree in eval mode"
    m = run.match(r"n = 1: ([\d.]+), n = 100: ([\d.]+), n = 4000: ([\d.]+)")
    e1, e100, e4000 = (float(v) for v in m.groups())
    assert e100 < e1 / 3 and e4000 < e1 / 20, \
        f"section 6 ('their average converges to the evaluation output'): errors {e1}, {e100}, {e4000}"
