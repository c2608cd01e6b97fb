"""Claims of notebook 01 (self-attention) about what its cells print.

Sections 1 to 7 are seeded and small, so their numbers are the same on every run; section 8 measures
time, and only its slope is checked, with bounds that held on an idle machine and on one with two
busy processes beside the notebook (memory and FLOPs are exact and must give slopes of exactly 2).
"""
import math
import re


def check(run):
    # Section 1: "four keys ... closest to key 0, then key 1"; "A hard lookup picks the single best
    # key; a soft lookup blends all four."
    scores = [float(s) for s in run.match(r"scores\s+\[([^\]]*)\]").group(1).split(",")]
    order = sorted(range(4), key=lambda i: -scores[i])
    assert order[:2] == [0, 1], f"section 1: the query should be closest to key 0, then key 1; scores {scores}"
    assert run.number(r"hard lookup\s+(\S+)") == 10.0, "section 1: the hard lookup should return key 0's value, 10"
    soft = run.number(r"soft lookup\s+(\S+)")
    assert 10.0 < soft < 40.0, f"section 1: the soft lookup {soft} should be a blend of the values 10 to 40"
    weights = [float(w) for w in run.match(r"soft weights \[([^\]]*)\]").group(1).split(",")]
    assert len(weights) == 4 and all(w > 0 for w in weights), f"section 1: every key gets some weight: {weights}"
    assert abs(sum(weights) - 1) < 0.01, f"section 1: the soft weights should sum to 1: {weights}"

    # Section 2: "exp(1000) is larger than any float32 number, so you get inf / inf = nan"; the shifted
    # version gives the values of the softmax docstring.
    assert run.match(r"naive:\s+tensor\(\[(.*)\]\)").group(1).split(", ") == ["nan"] * 3, \
        "section 2: the naive softmax of [1000, 1001, 1002] should print nan"
    shifted = run.match(r"shifted: tensor\(\[(.*)\]\)").group(1)
    assert shifted == "0.0900, 0.2447, 0.6652", f"section 2: the shifted softmax printed {shifted}"

    # Section 3, exercise 2: the worked example ("row 0 is (0.5, 0.5), row 1 is (0.27, 0.73)") is what the
    # check cell asserts; it must pass on the solution.
    run.match(r"simple_self_attention: the checks pass\.")

    # Section 3: "Self-attention does not know word order": shuffled inputs give shuffled outputs.
    assert run.match(r"shuffled outputs: (\w+)").group(1) == "True", "section 3: permutation equivariance failed"
    assert run.number(r"largest difference: (\S+)") < 1e-5, "section 3: the shuffled outputs differ"

    # Section 3, "a second weakness": "the diagonal ... holds the largest weight of most rows, and far
    # more than the 1/6 each word would get from an even spread".
    rows = run.number(r"largest weight is on the diagonal: (\d+) of 6")
    assert rows > 3, f"section 3: the diagonal is the largest weight of only {rows:.0f} of 6 rows, not most"
    diagonal = run.number(r"mean weight on the diagonal: (\S+)")
    assert diagonal > 2 / 6, f"section 3: mean diagonal weight {diagonal} is not far above 1/6"

    # Section 5, after the plot: "Unscaled, the standard deviation of the scores follows sqrt(d_k)
    # closely, the largest weight heads for 1 and the gradient keeps shrinking, about eightfold from
    # d_k = 4 to d_k = 1024. Scaled, all three stay flat as the width grows."
    table = {}
    for m in re.finditer(r"(unscaled|scaled), d_k = +(\d+): std of scores +(\S+) .*?mean largest weight (\S+), "
                         r"gradient norm (\S+)", run.text):
        table.setdefault(m.group(1), []).append((int(m.group(2)), *map(float, m.group(3, 4, 5))))
    unscaled, scaled = table.get("unscaled", []), table.get("scaled", [])
    assert [r[0] for r in unscaled] == [4, 16, 64, 256, 1024] == [r[0] for r in scaled], \
        "section 5: the experiment should print widths 4 to 1024, unscaled and scaled"
    for d, std, _, _ in unscaled:
        assert abs(std / math.sqrt(d) - 1) < 0.1, f"section 5: unscaled std {std} at d_k = {d} is not close to sqrt(d_k)"
    max_w = [r[2] for r in unscaled]
    assert max_w == sorted(max_w) and max_w[-1] > 0.95, f"section 5: the unscaled largest weight does not head for 1: {max_w}"
    shrink = unscaled[0][3] / unscaled[-1][3]
    assert 7 < shrink < 9.5, f"section 5: the unscaled gradient shrinks {shrink:.1f}-fold, not about eightfold"
    for column, name, spread in [(1, "std", 0.06), (2, "largest weight", 0.03), (3, "gradient norm", 0.03)]:
        values = [r[column] for r in scaled]
        assert max(values) - min(values) < spread, f"section 5: scaled {name} is not flat: {values}"

    # Section 7: "Without parameters (left), each word mostly attends to itself or to words with the same
    # features"; "Now his spreads its attention over Zuko and uncle ... and made looks at who made
    # (Zuko, uncle) and what (tea)."
    same = {"Zuko": {"Zuko", "uncle"}, "uncle": {"Zuko", "uncle"}, "made": {"made"}, "his": {"his"}, "tea": {"tea"}}
    plain, learned = run.match(r"no parameters\n((?:.*->.*\n){5})queries and keys\n((?:.*->.*\n?){5})").group(1, 2)

    def strongest(block):
        out = {}
        for line in block.strip("\n").split("\n"):
            word, rest = (s.strip() for s in line.split("->"))
            out[word] = [(w, float(x)) for w, x in (pair.split() for pair in rest.split(", "))]
        return out

    for word, top in strongest(plain).items():
        assert top[0][0] in same[word], f"section 7: without parameters, {word} attends most to {top[0][0]}"
    top = strongest(learned)
    his = top["his"][:2]
    assert {w for w, _ in his} == {"Zuko", "uncle"} and all(x >= 0.4 for _, x in his), \
        f"section 7: his should spread its attention over Zuko and uncle: {top['his']}"
    assert {w for w, _ in top["made"]} == {"Zuko", "uncle", "tea"}, \
        f"section 7: made should look at Zuko, uncle and tea: {top['made']}"

    # Section 8: "for T from 256 to 4096 with d = 32"; memory 4 T^2 bytes and 4 T^2 d FLOPs, exactly.
    sizes = run.numbers(r"T = +(\d+): scores")
    assert sizes == [256, 512, 1024, 2048, 4096], f"section 8: lengths {sizes}"
    for m in re.finditer(r"T = +(\d+): scores +([\d,]+) bytes \( *([\d.]+) MiB\), +([\d,]+) FLOPs", run.text):
        t, nbytes, flops = int(m.group(1)), int(m.group(2).replace(",", "")), int(m.group(4).replace(",", ""))
        assert nbytes == 4 * t * t and flops == 4 * t * t * 32, f"section 8: memory or FLOPs wrong at T = {t}"
    assert run.match(r"T = 4096: scores +[\d,]+ bytes \( *([\d.]+) MiB\)").group(1) == "64.0", \
        "section 8: 'At T = 4096 the scores of one head already take 64 MiB'"
    # "Memory and FLOPs are exact formulas, so their slopes are exactly 2. ... its slope comes out at about 2"
    assert run.number(r"slope of memory vs T: (\S+)") == 2.0, "section 8: the memory slope should be exactly 2"
    assert run.number(r"slope of FLOPs vs T: (\S+)") == 2.0, "section 8: the FLOPs slope should be exactly 2"
    time_slope = run.number(r"slope of time vs T: (\S+)")
    assert 1.7 <= time_slope <= 2.3, f"section 8: the time slope {time_slope} is not 'about 2'"
    # "At T = 32768 ... 4 GiB for one head ...; with 12 layers of 12 heads that is 576 GiB"
    assert run.number(r"scores of one head at T = 32768: (\d+) GiB") == 4, "section 8: one head at T = 32768"
    assert run.number(r"12 layers of 12 heads: (\d+) GiB") == 576, "section 8: 12 layers of 12 heads"
