"""Claims of notebook 02 (positions) about what its cells print."""
import re


def _flag(run, pattern):
    """The True/False printed after ``pattern``."""
    return run.match(pattern + r"\s*(True|False)").group(1) == "True"


def check(run):
    # Section 1: self-attention without positions is permutation equivariant.
    assert _flag(run, r"outputs of s2 == outputs of s1, permuted:") and \
        _flag(run, r"'Jack' gets the same vector in both sentences:"), \
        "section 1: without positions, s2's outputs should be s1's outputs permuted, and Jack the same vector"
    twins = re.findall(r"the two '(big|the)' columns are equal: (True|False)", run.text)
    assert twins[:2] == [("big", "True"), ("the", "True")], \
        f"section 1 ('twin words'): the two big / the columns should be identical without positions, got {twins[:2]}"

    # Section 3: wavelengths from 2*pi to 2*pi*10000^((d-2)/d), three quarters of 10000*2*pi for d = 64.
    m = run.match(r"shortest wavelength ([\d.]+), longest ([\d,]+), 10000·2π = ([\d,]+)")
    shortest, longest, top = float(m.group(1)), float(m.group(2).replace(",", "")), float(m.group(3).replace(",", ""))
    assert abs(shortest - 6.28) < 0.01, f"section 3: the shortest wavelength should be 2*pi, printed {shortest}"
    assert 0.74 < longest / top < 0.76, \
        f"section 3: the longest wavelength (d = 64) should be three quarters of 10000*2*pi, got {longest / top:.3f}"

    # The erratum: the halves layout is not the table, but the same columns in another order.
    assert not _flag(run, r"halves layout equals the interleaved table:") and \
        _flag(run, r"\.\.\.but it is the same columns in another order:"), \
        "'The erratum, tested': halves layout should differ from the table and be a column permutation of it"

    # Section 4: dot products d/2 = 32 at offset 0, smaller elsewhere, constant along each diagonal.
    m = run.match(r"PE_p · PE_p for every p: from ([\d.]+) to ([\d.]+)")
    assert abs(float(m.group(1)) - 32) < 1e-3 and abs(float(m.group(2)) - 32) < 1e-3, \
        "section 4 ('Dot products depend only on the distance'): PE_p . PE_p should be d/2 = 32"
    assert run.number(r"largest PE_p · PE_q for p != q: ([\d.]+)") < 31.5, \
        "section 4: the dot product should be largest (d/2) at offset 0 only"
    assert run.number(r"largest spread along one diagonal \(fixed offset q - p\): ([\d.e+-]+)") < 1e-3, \
        "section 4: the matrix of dot products should be constant along each diagonal (curves on top of each other)"
    assert run.number(r"largest \|PE\[p\+3\] - M_3 PE\[p\]\| over all p: ([\d.e+-]+)") < 1e-4, \
        "section 4 ('A shift by k is a rotation'): PE_{p+k} should equal M_k PE_p for every p"

    # Section 6: order is back.
    flags = re.findall(r"outputs of s2 == outputs of s1, permuted:\s*(True|False)", run.text)
    jack = re.findall(r"'Jack' gets the same vector in both sentences:\s*(True|False)", run.text)
    assert flags[1:] == ["False"] and jack[1:] == ["False"], \
        "section 6 ('Order is back'): with positions the outputs should no longer be the permuted outputs"
    assert twins[2:] == [("big", "False"), ("the", "False")], \
        f"section 6: with positions the two big / the columns should differ, got {twins[2:]}"

    # Section 8: no positions stalls far below 100% (around 20%); both kinds of positions solve the task,
    # learned ones first; sinusoidal does much worse on positions it never saw.
    final = {name: (float(acc), first) for name, acc, first in re.findall(
        r"(no positions|sinusoidal|learned)\s+final accuracy ([\d.]+), first step with accuracy >= 0.9: (\w+)", run.text)}
    assert 0.12 <= final["no positions"][0] <= 0.35, \
        f"section 8 and the model answer of question 1: no positions should plateau around 20%, got {final['no positions'][0]}"
    assert final["sinusoidal"][0] >= 0.95 and final["learned"][0] >= 0.95, \
        f"section 8: with either kind of positions the model should solve the task, got {final}"
    assert int(final["learned"][1]) < int(final["sinusoidal"][1]), \
        f"section 8: the learned positions should reach 90% first, got {final}"
    seen = run.number(r"sinusoidal, positions 1-11 \(seen in training\): ([\d.]+)")
    unseen = run.number(r"sinusoidal, positions 12-23 \(never seen\):\s+([\d.]+)")
    assert seen >= 0.95 and unseen < seen - 0.3, \
        f"section 8: the sinusoidal model should do much worse on unseen positions, got {seen} vs {unseen}"

    # Section 9: in 8 dimensions a blur; from d = 64 on, word and position (within 2) back in > 99% of cases;
    # mean |cos| of the order of 1/sqrt(d).
    rows = {int(d): tuple(map(float, rest)) for d, *rest in re.findall(
        r"^\s*(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$", run.text, re.MULTILINE)}
    assert sorted(rows) == [8, 16, 32, 64, 128, 256, 512], f"section 9: the table of widths is incomplete: {sorted(rows)}"
    assert rows[8][0] < 0.1, f"section 9: in 8 dimensions the word should come back in fewer than 1 case in 10, got {rows[8][0]}"
    for d in (64, 128, 256, 512):
        assert rows[d][0] > 0.99 and rows[d][2] > 0.97, \
            f"section 9 and the model answer of question 2: from d = 64 on, the word should come back in more " \
            f"than 99% of the cases and the position (within 2) in nearly as many, got {rows[d]} for d = {d}"
    assert all(0.5 < rows[d][3] / rows[d][4] < 1.2 for d in rows), \
        "section 9: the mean |cos| between word and position vectors should be of the order of 1/sqrt(d)"
