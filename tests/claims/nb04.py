"""Claims of notebook 04 (masking) about what its cells print."""
import re


def check(run):
    # 'What the mask does to attention': the upper triangle is exactly 0 and every row sums to 1.
    m = run.match(r"with the mask: row sums from ([\d.]+) to ([\d.]+), largest weight above the diagonal ([\d.e+-]+)")
    assert abs(float(m.group(1)) - 1) < 1e-5 and abs(float(m.group(2)) - 1) < 1e-5 and float(m.group(3)) == 0, \
        f"section 2 ('What the mask does to attention'): rows should sum to 1, the future weigh exactly 0: {m.group(0)!r}"
    # The slide's j < i: the first query's weights are NaN.
    assert "nan" in run.match(r"weights of the first query with j <  i: (.*)").group(1), \
        "section 2 (the slide's version j < i): the first query's weights should be NaN"
    # 'Nothing leaks from the future': exactly 0 with the mask, every position moves without it.
    rows = dict((name.strip(), (float(a), float(b))) for name, a, b in re.findall(
        r"^(no mask|causal mask)\s*: largest change at positions 0\.\.3 = ([\d.e+-]+), "
        r"smallest change at any position = ([\d.e+-]+)", run.text, re.MULTILINE))
    assert rows["causal mask"][0] == 0, \
        f"'Nothing leaks from the future': with the causal mask positions 0-3 should not move at all, got {rows}"
    assert rows["no mask"][1] > 1e-3, \
        f"'Nothing leaks from the future': without a mask every position should move, got {rows}"

    # 'Padding changes nothing for real tokens'.
    moved = {name.strip(): float(v) for name, v in re.findall(
        r"^(no mask|padding only \(encoder\)|causal & padding \(decoder\))\s*: largest change of a real token's "
        r"output = ([\d.e+-]+)", run.text, re.MULTILINE)}
    assert moved["no mask"] > 1 and moved["padding only (encoder)"] == 0 and moved["causal & padding (decoder)"] == 0, \
        f"'Padding changes nothing for real tokens': garbage should flow in without a mask only, got {moved}"

    # 'A row with nothing to look at' and question 1: NaN at the padding after layer 1, everywhere after layer 2.
    assert run.match(r"layer 1, NaN outputs of sentence 0 by position: (.*)").group(1) == "[True, True, False, False]", \
        "question 1: after layer 1 only the two padding positions should be NaN"
    assert run.match(r"layer 2, NaN outputs of sentence 0 by position: (.*)").group(1) == "[True, True, True, True]", \
        "question 1: after layer 2 the real tokens birds and sing should be NaN too"

    # Section 5: the curves stay close for about 80 steps, then the unmasked loss collapses far below.
    windows = {int(first): (float(a), float(b)) for first, last, a, b in re.findall(
        r"^\s*(\d+)-(\d+)\s+([\d.]+)\s+([\d.]+)\s*$", run.text, re.MULTILINE)}
    assert len(windows) == 15, f"section 5: expected 15 windows of 20 training steps, got {sorted(windows)}"
    for first in (1, 21, 41, 61):
        no_mask, causal = windows[first]
        assert 0.8 < no_mask / causal < 1.25, \
            f"paragraph after the plots: for the first eighty steps or so the curves should stay close, " \
            f"steps {first}-{first + 19}: {no_mask} vs {causal}"
    no_mask, causal = windows[121]
    assert no_mask < causal / 2, \
        f"paragraph after the plots: around step 100 the model without a mask should find its shortcut, " \
        f"steps 121-140: {no_mask} vs {causal}"
    for first in range(141, 300, 20):
        no_mask, causal = windows[first]
        assert no_mask < causal / 4, \
            f"paragraph after the plots: after a few dozen more steps the unmasked loss should collapse far below, " \
            f"steps {first}-{first + 19}: {no_mask} vs {causal}"

    # The right panel: no mask, almost nothing at positions 0-30 and a large loss at 31; masked, highest at 0.
    per = {}
    for name, first, top, where, last, mean in re.findall(
            r"(no mask|causal mask)\s*: loss after training at position 0 ([\d.]+), largest at positions 0-30 "
            r"([\d.]+) \(position (\d+)\), at position 31 ([\d.]+), mean ([\d.]+)", run.text):
        per[name] = (float(first), float(top), int(where), float(last), float(mean))
    assert per["no mask"][1] < 0.05 and per["no mask"][3] > 10 * per["no mask"][1], \
        f"paragraph after the plots: without a mask, almost no loss at 0-30 and a large loss at 31: {per['no mask']}"
    assert 0.6 < per["no mask"][4] / (per["no mask"][3] / 32) < 1.6, \
        f"model answer of question 2: the mean loss should be about 1/32 of the last position's: {per['no mask']}"
    assert per["causal mask"][2] == 0 and per["causal mask"][3] < per["causal mask"][0] / 4, \
        f"paragraph after the plots: the masked loss should be highest at position 0 and fall: {per['causal mask']}"

    # Question 2 (b): the unmasked model writes mostly nonsense, the masked one words of the text.
    known = {name: (int(a), int(b)) for name, a, b in re.findall(
        r"(no mask|causal mask):\n.*\n\s+(\d+) of its (\d+) words are words of the text", run.text)}
    assert known["no mask"][0] < 0.5 * known["no mask"][1], \
        f"question 2: the model without a mask should write mostly nonsense, got {known['no mask']}"
    assert known["causal mask"][0] > 0.8 * known["causal mask"][1], \
        f"question 2: the masked model should write words of the text, got {known['causal mask']}"
