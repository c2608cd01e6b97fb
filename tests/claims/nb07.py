"""Claims of notebook 07 (byte-pair encoding) about what its cells print.

Everything here is plain Python on fixed texts, so the numbers are the same on every run, except the
timings and what Hugging Face `tokenizers` does with ties (its ids depend on a randomly seeded hash map):
those claims are checked with margin or on both outcomes.
"""
import re


def _table(run, header):
    """The rows of numbers printed under the line that starts with ``header``."""
    lines = run.text[run.text.index(header):].splitlines()[1:]
    rows = []
    for line in lines:
        if not re.fullmatch(r"\s*[\d.\s]+", line):
            break
        rows.append([float(v) for v in line.split()])
    return rows


def check(run):
    # Section 1 and 6: three of the eight words of the new sentence are unknown to a word vocabulary.
    words = run.match(r"word tokens: (\[.*\])").group(1)
    assert words.count("<unk>") == 3, f"section 1 (and 6) says three words of the sentence are <unk>: {words}"

    # Section 1: characters make a sentence "five or six times longer" (tokens per word with 0 merges, section 7).
    rows = _table(run, "merges  vocab")
    assert rows and rows[0][0] == 0, "section 7: the table of tokens per word did not start at 0 merges"
    assert 4.5 <= rows[0][2] <= 6.5, f"section 1: characters per word (+ </w>) on the text is {rows[0][2]}, not 5 or 6"

    # Section 2 (the hand count): (e, s), (s, t), (t, </w>) 9 times, (w, e) 8, (l, o) and (o, w) 7.
    common = run.match(r"most frequent pairs of the classic corpus: (.*)").group(1)
    for pair, count in [("('e', 's')", 9), ("('s', 't')", 9), ("('t', '</w>')", 9), ("('w', 'e')", 8),
                        ("('l', 'o')", 7), ("('o', 'w')", 7)]:
        assert f"({pair}, {count})" in common, f"section 2 counts {pair} {count} times by hand; printed: {common}"

    # Section 4, after the trace: the first three merges build est</w>, three pairs tie at 9, then lo, low.
    merges = re.findall(r"^\s*\d+\s+merge (\('.*?', '.*?'\))\s+count (\d+)(.*)$", run.text, re.M)
    assert [m for m, _, _ in merges[:5]] == ["('e', 's')", "('es', 't')", "('est', '</w>')", "('l', 'o')", "('lo', 'w')"], \
        f"section 4: the first merges on the classic corpus are not es, est, est</w>, lo, low: {merges[:5]}"
    assert merges[0][1] == "9" and merges[0][2].count("('") == 2, \
        f"section 4 says three pairs tie at count 9 for the first merge: {merges[0]}"
    # ... and on our text the first merges are short pieces, then endings and whole frequent words.
    endings = run.match(r"new symbols ending a word among the first 60: (.*)").group(1)
    for piece in ("'the</w>'", "'ed</w>'", "'ing</w>'"):
        assert piece in endings, f"section 4 says frequent endings and words come early: {piece} not in {endings}"

    # Section 6: every word is written with known pieces, and the pieces give the text back.
    assert run.text.count("decoded == sentence: True") == 2, "section 6: decoding the BPE pieces did not give the text"
    assert re.search(r"z e b r a - ", run.text), "section 6: zebra-like should fall back to single characters"

    # Section 7: each merge can only shorten the text; training reaches 1 token per word, held out stays ~1.4.
    for column, name in [(2, "training"), (3, "held-out")]:
        values = [r[column] for r in rows]
        assert values == sorted(values, reverse=True), f"section 7: tokens per word ({name}) grew with a merge: {values}"
    assert rows[-1][2] == 1.0, f"section 7 (and Question 1's answer): the training text does not reach 1: {rows[-1]}"
    assert rows[-1][0] < 400, "section 7: training should stop early, when every word is one symbol"
    assert 1.3 <= rows[-1][3] <= 1.55, f"Question 1's answer: held out flattens at about 1.4, not {rows[-1][3]}"
    assert 6.0 <= rows[0][3] <= 6.8, f"Question 1's answer: held-out text starts at about 6.4, not {rows[0][3]}"
    assert 4.9 <= rows[0][2] <= 5.5, f"Question 1's answer: training text starts at about 5, not {rows[0][2]}"

    # Section 8: tokenizers' starting vocabulary glues the suffix; the merges start alike and part ways.
    start = run.match(r"the vocabulary HF starts from: (.*)").group(1)
    for symbol in ("'r</w>'", "'w</w>'", "'t</w>'"):
        assert symbol in start, f"section 8 says tokenizers starts with {symbol}: {start}"
    steps = re.findall(r"^\s+(\d+)  \('.*?\)\s+\('.*?\)\s*(<- differs)?\s*$", run.text, re.M)
    assert steps and not steps[0][1] and any(d for _, d in steps), \
        f"section 8: the merges should start alike and then part ways: {steps}"
    # ... and from the same start (either way round) they agree up to the first tie.
    ties = re.findall(r"first difference at step (\d+): yours .*? \(count (\d+)\), HF .*? \(count (\d+)\)", run.text)
    assert len(ties) == 3, f"section 8: expected three comparisons of merges, found {ties}"
    for step, ours, theirs in ties:
        assert ours == theirs, f"section 8 says the merges part ways at a tie, but the counts differ: {ties}"
    # ... and tokenizers breaks the tie of 'ax ax ay ay' both ways, ours always the same way.
    hf = run.match(r"30 trainings of tokenizers on 'ax ax ay ay': (\{.*\})").group(1)
    assert "x</w>" in hf and "y</w>" in hf, f"section 8 says ties at the end of a word fall differently: {hf}"
    assert run.match(r"30 trainings of yours: (\{.*\})").group(1).count(": 30") == 1, "section 8: yours should not vary"

    # Section 8, the last comparison: about as many tokens per word, the same pieces for most held-out words,
    # the z of zebra dropped by tokenizers, and tokenizers several times faster.
    for what in ("training text", "held-out text"):
        a, b = run.match(rf"tokens per word, {what}\s+([\d.]+)\s+([\d.]+)").groups()
        assert abs(float(a) - float(b)) <= 0.15 * float(b), f"section 8: tokens per word on the {what}: {a} vs {b}"
    same, total = map(int, run.match(r"cut into the same pieces by both: (\d+) of (\d+)").groups())
    assert same > total / 2, f"section 8 says most held-out words come out the same: {same} of {total}"
    zebra = run.match(r"(?m)^\s+zebra  (.*?)  +(.*?)\s*$").groups()
    assert zebra[0].startswith("z ") and "z" not in zebra[1], f"section 8: the z of zebra: {zebra}"
    t_mine, t_hf = map(float, run.match(r"training time \(ms, best of 3\)\s+([\d.]+)\s+([\d.]+)").groups())
    assert t_mine >= 3 * t_hf, f"section 8 says tokenizers is several times faster: {t_mine} ms vs {t_hf} ms"

    # Section 9: frequent words whole, rare ones in pieces; the two averages.
    pieces = dict(re.findall(r"^\s*(\w+) \(\s*(?:seen \d+ times|never seen)\): (.*)$", run.text, re.M))
    assert len(pieces) == 6, f"section 9: expected six example words, found {pieces}"
    for word in ("Schwestern", "Kaninchen"):
        assert pieces[word] == f"{word}</w>", f"section 9 says {word} is one token: {pieces[word]}"
    for word in ("hungriges", "getroffen", "Lehrerinnen", "ungeschickt"):
        assert " " in pieces[word], f"section 9 says {word} is written with pieces: {pieces[word]}"
    assert pieces["ungeschickt"].startswith("un ge "), f"section 9: un ge schickt, not {pieces['ungeschickt']}"
    assert pieces["Lehrerinnen"].startswith("Lehr "), f"section 9: the stem Lehr, not {pieces['Lehrerinnen']}"
    for word in ("Lehrerinnen", "ungeschickt"):
        assert re.search(rf"{word} \(\s*never seen\)", run.text), f"section 9 says {word} is not in the corpus"
    assert int(run.number(r"Kaninchen \(\s*seen (\d+) times")) >= 100, "section 9: Kaninchen is seen 100+ times"
    assert int(run.number(r"Schwestern \(\s*seen (\d+) times")) < 100, "section 9: Schwestern is seen < 100 times"
    assert 20 <= int(run.number(r"getroffen \(\s*seen (\d+) times")) < 100, "section 9: getroffen is seen 20-99 times"
    per_word, whole = map(float, run.match(r"every word of the text:\s+([\d.]+) tokens per word, (\d+)%").groups())
    assert 1.3 <= per_word <= 1.5 and 65 <= whole <= 85, \
        f"section 9 says about 1.4 tokens per word, three quarters of them one token: {per_word}, {whole}%"
    per_word, whole = map(float, run.match(r"each distinct word once:\s+([\d.]+) tokens per word, (\d+)%").groups())
    assert 2.2 <= per_word <= 2.8 and 15 <= whole <= 35, \
        f"section 9 says about 2.5 tokens per distinct word, a quarter of them one token: {per_word}, {whole}%"
    bands = [tuple(map(int, m)) for m in re.findall(r"distinct words seen .*?: +(\d+), of which +(\d+) are one token",
                                                     run.text)]
    assert len(bands) == 3, f"section 9: expected three bands of frequency, found {bands}"
    assert bands[0][1] == 0, f"section 9 says no word seen fewer than 20 times is whole: {bands[0]}"
    assert bands[1][1] <= 0.25 * bands[1][0], f"section 9 says only a few words seen 20 to 99 times are whole: {bands[1]}"
    assert bands[2][1] == bands[2][0], f"section 9 says every word seen 100 times or more is whole: {bands[2]}"
