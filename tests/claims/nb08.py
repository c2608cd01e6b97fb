"""Claims of notebook 08 (the encoder-decoder Transformer), checked on one full run of the solution notebook.

The training runs a fixed number of steps (no time budget), so a busy machine makes the run slower but not
worse: every claim below must hold whatever the load, with PyTorch on 1 or 2 threads.
"""
import re


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def check(run):
    # section 1 (and section 8): "55 nouns, 37 verbs, 16 adjectives"
    lexicon = run.match(r"Lexicon: (\d+) nouns, (\d+) verbs, (\d+) adjectives")
    assert tuple(int(n) for n in lexicon.groups()) == (55, 37, 16), \
        f"section 1 / section 8 quote 55 nouns, 37 verbs, 16 adjectives; the grammar has {lexicon.group(0)}"
    # section 1: "one vocabulary of about 1000 subwords"; section 5: "the eps/V spread over 1000 tokens"
    vocab = run.number(r"vocabulary: (\d+) subwords")
    assert 950 <= vocab <= 1000, f"section 1 says about 1000 subwords; the tokenizer has {vocab:.0f}"

    # section 5 (markdown before the training cell): batches of at most 1000 tokens; "a little over one pass over
    # the 20000 training pairs"
    passes, pairs = run.match(r"the full run: \d+ steps, ([\d.]+) passes over the (\d+) training pairs").groups()
    assert _int(pairs) == 20000, f"section 5 speaks of 20000 training pairs; the notebook trains on {pairs}"
    assert 1.0 < float(passes) < 1.5, f"section 5 says a little over one pass over the data; the full run makes {passes}"

    # section 5: "about 1.3 million parameters"; the summary: "a 1.3-million-parameter model"
    params = _int(run.match(r"(?m)^(\d{1,3}(?:,\d{3})+) parameters$").group(1))
    assert 1.25e6 <= params < 1.35e6, f"section 5 and the summary say about 1.3 million parameters; the model has {params:,}"

    # section 5: the run does a fixed number of steps, and the full run is the default (no time cap, no short run)
    done, planned = (int(n) for n in run.match(r"(\d+) of (\d+) steps in [\d.]+ s, final loss").groups())
    full = int(run.number(r"the full run: (\d+) steps"))
    assert done == planned == full, \
        f"section 5 says the training runs its STEPS in full; it did {done} of {planned} (full run: {full})"
    assert "SHORT RUN" not in run.text, "the full run must not report itself as a short run (sections 5 to 8)"

    # section 5 (after the loss plot): "about 1.0 nats here (the dashed line)"; "close to the line" is what the
    # run reaches
    floor = run.number(r"floor of the loss with label smoothing: ([\d.]+)")
    assert 0.95 <= floor <= 1.05, f"the paragraph after the loss plot says the floor is about 1.0 nats; it is {floor}"
    final = run.number(r"steps in [\d.]+ s, final loss ([\d.]+)")
    assert floor < final < floor + 0.2, f"the loss should end close to the floor {floor} (section 5); it ends at {final}"

    # section 6 and the summary: "scores above 90" (BLEU), most test sentences exactly right, on all 500
    n_eval = int(run.number(r"greedy decoding of (\d+) test sentences"))
    assert n_eval == 500, f"section 6 translates the 500 test sentences; it translated {n_eval}"
    bleu = run.number(r"test BLEU: ([\d.]+)")
    exact = run.number(r"exact match: ([\d.]+)%")
    assert bleu >= 90, f"section 6 / the summary: the model scores above 90 BLEU; it scored {bleu}"
    assert exact >= 80, f"section 6: the model should get at least 80% of the test sentences exactly right; {exact}%"

    # question 2's model answer: beam search "changes only a few of the 500 translations and BLEU barely moves"
    beam_bleu = run.number(r"beam search \(k = 4\) in [\d.]+ s: BLEU ([\d.]+)")
    changed = int(run.number(r"beam search changed (\d+) of 500 translations"))
    assert 1 <= changed <= 40, f"question 2's model answer: beam search changes a few of the 500 translations; {changed}"
    assert abs(beam_bleu - bleu) < 2, f"question 2's model answer: BLEU barely moves with beam search ({bleu} -> {beam_bleu})"

    # section 7 and question 1's model answer: the row that writes the clause-final verb reads the English verb
    reads = re.findall(r"the row writing the final '▁sieht' reads most: '([^']*)'", run.text)
    assert len(reads) == 2, f"section 7: both example sentences should end their clause with 'sieht'; found {len(reads)}"
    assert reads == ["▁sees", "▁sees"], \
        f"section 7 / question 1: the row writing the final German verb should read the English verb; it reads {reads}"
