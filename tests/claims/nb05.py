"""Claims of notebook 05 (multi-head attention) about what its cells print."""
import re


def check(run):
    # Section 3: the round trip gives X back, and the heads are the column blocks of the definition.
    blocks = re.findall(r"head (\d) holds features (\d)\.\.(\d) of every position: (True|False)", run.text)
    assert blocks == [("0", "0", "3", "True"), ("1", "4", "7", "True")], \
        f"section 3 (the round trip on the labelled X): head i should hold features 4i..4i+3, got {blocks}"
    assert run.match(r"merge_heads\(split_heads\(X\)\) equals X: (True|False)").group(1) == "True", \
        "section 3: merge_heads(split_heads(X)) should give X back"
    assert run.match(r"contiguous: (True|False)").group(1) == "False" and "view fails:" in run.text, \
        "section 3 ('Merging the heads back'): the transposed tensor is not contiguous and view refuses it"

    # Section 5: the same numbers as nn.MultiheadAttention.
    assert run.number(r"outputs:  largest difference ([\d.e+-]+)") < 1e-5 and \
        run.number(r"weights:  largest difference ([\d.e+-]+)") < 1e-5, \
        "section 5 ('The same numbers as PyTorch's nn.MultiheadAttention'): outputs and weights should agree"

    # Section 6: the loop gives the same output; its time grows with h, the batched version's much more slowly.
    assert run.number(r"loop vs your layer:\s+largest difference ([\d.e+-]+)") < 1e-5 and \
        run.number(r"at once vs your layer:\s+largest difference ([\d.e+-]+)") < 1e-5, \
        "section 6: the loop over heads (and the batched version) should give the same output as the layer"
    times = {int(h): (float(loop), float(once), float(ratio)) for h, loop, once, ratio in re.findall(
        r"^\s*(\d+)\s+\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$", run.text, re.MULTILINE)}
    assert sorted(times) == [1, 4, 16, 32], f"section 6: the timing table is incomplete: {sorted(times)}"
    loop_growth, once_growth = times[32][0] / times[1][0], times[32][1] / times[1][1]
    assert loop_growth > 2 and once_growth < loop_growth / 2, \
        f"paragraph after the timings: the loop's time should grow with h and the batched version's much more " \
        f"slowly, got x{loop_growth:.1f} and x{once_growth:.1f} from 1 to 32 heads"
    assert times[32][2] > 1.5 * times[1][2], \
        f"paragraph after the timings: the loop should fall behind as heads multiply, ratios {times}"

    # Section 7: every row of the count is the same number, the formula's.
    counts = re.findall(r"^\s*(\d+)\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)\s*$", run.text, re.MULTILINE)
    assert [c[0] for c in counts] == ["1", "2", "4", "8", "16"] and len({n for c in counts for n in c[1:]}) == 1, \
        f"section 7 ('Every row is the same number'): got {counts}"

    # Section 8 and the model answer of question 2: head 0 finds the word before, head 1 the subject;
    # one head splits its weight about evenly between 'a' and 'I' in the first sentence.
    lines = re.findall(r"(2 heads, features 0-7  \(head 0\)|2 heads, features 8-15 \(head 1\)|1 head,  features 0-7"
                       r"\s*): (.*)", run.text)
    first, second = ({key.strip(): value for key, value in part} for part in (lines[:3], lines[3:]))
    head0, head1, one = "2 heads, features 0-7  (head 0)", "2 heads, features 8-15 (head 1)", "1 head,  features 0-7"

    def top(text):
        kind, weight = text.split(",")[0].rsplit(" ", 1)
        return kind, float(weight)

    assert top(first[head0])[0] == "determiner" and top(second[head0])[0] == "pronoun" and \
        min(top(first[head0])[1], top(second[head0])[1]) > 0.8, \
        f"question 2: head 0 should find the previous word (a, then I), got {first[head0]!r}, {second[head0]!r}"
    assert top(first[head1])[0] == "pronoun" and top(second[head1])[0] == "pronoun" and \
        min(top(first[head1])[1], top(second[head1])[1]) > 0.8, \
        f"question 2: head 1 should find the subject I in both sentences, got {first[head1]!r}, {second[head1]!r}"
    split = dict(top(part) for part in first[one].split(", "))
    assert set(split) == {"pronoun", "determiner"} and all(0.35 < w < 0.55 for w in split.values()), \
        f"model answer of question 2: one head should split its weight about evenly between a and I, got {first[one]!r}"
