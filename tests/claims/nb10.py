"""Claims of notebook 10 (a GPT), checked on one full run of the solution notebook.

Everything that involves the text depends on the Python that runs it (its standard library is the text), so the
claims are about relations the prose states (below log V, below the bigram, at most 0.7 times its perplexity), not
about the exact figures, which the notebook prints and quotes only from the run.
"""
import re


def check(run):
    # section 1: "slightly negative just below 0"
    assert run.number(r"GELU\(-0.75\) = (-?[\d.]+)") < 0, "GELU is slightly negative just below 0"

    # section 3's toy distribution: "the tail ... takes a large share of the draws", "a lower temperature shrinks the
    # tail without removing it; top-k and top-p remove it"
    tail = {name.strip(): (float(mass), int(n)) for name, mass, n in re.findall(
        r"(temperature 1 |temperature 0.5|top-k 5 |top-p 0.6 )\s*: mass on the 80 tail tokens ([\d.]+), "
        r"distinct tokens drawn (\d+)", run.text)}
    assert len(tail) == 4, f"section 3 prints four settings: {tail}"
    assert tail["temperature 1"][0] > 0.2, f"the tail takes a large share at temperature 1: {tail}"
    assert 0 < tail["temperature 0.5"][0] < tail["temperature 1"][0], f"temperature 0.5 shrinks the tail: {tail}"
    assert tail["top-k 5"] == (0.0, 5) and tail["top-p 0.6"][0] == 0.0, f"top-k and top-p remove the tail: {tail}"

    # section 5: "a few megabytes", the byte-level BPE compresses, the baselines: "the bigram ... better than the
    # unigram", "the GPT should beat the bigram model clearly"
    mb = run.number(r"([\d.]+) MB of text from")
    assert 1 < mb < 10 or "standard library" not in run.text, f"a few megabytes of text: {mb}"
    vocab = int(run.number(r"vocabulary of (\d+) tokens"))
    assert run.number(r"([\d.]+) bytes per token") > 1.5, "the tokenizer merges bytes into longer tokens"
    unigram, bigram = (float(x) for x in run.match(
        r"validation perplexity: uniform \d+, unigram ([\d.]+), Kneser-Ney bigram ([\d.]+)").groups())
    assert bigram < unigram < vocab, f"uniform > unigram > bigram: {vocab}, {unigram}, {bigram}"

    # section 6: "tying ... saves V d parameters ... a large share of the whole"
    share = run.number(r"tying saves (\d+)%")
    assert share >= 15, f"tying saves a large share of a small model: {share}%"

    # "The loss starts at log V, falls below the unigram line within the first steps, and then below the bigram line";
    # the bar: at most 0.7 times the Kneser-Ney bigram's perplexity after the default training
    first, log_v, below_unigram, below_bigram = run.match(
        r"first loss ([\d.]+) \(log V = ([\d.]+)\); the mean of 20 steps goes below the unigram's log-perplexity at "
        r"step (\d+|None), below the bigram's at step (\d+|None)").groups()
    assert abs(float(first) - float(log_v)) < 0.3, f"the first loss is about log V: {first} vs {log_v}"
    assert below_unigram != "None" and int(below_unigram) <= 100, \
        f"below the unigram in the first steps: {below_unigram}"
    assert below_bigram != "None" and int(below_bigram) > int(below_unigram), f"then below the bigram: {below_bigram}"
    ratio = run.number(r"validation perplexity [\d.]+ = ([\d.]+) x the Kneser-Ney bigram's")
    assert ratio <= 0.7, f"the default training reaches at most 0.7 x the bigram's perplexity: {ratio}"

    # "Greedy decoding falls into a loop, repeating a phrase over and over"
    text = run.text
    start = text.index("--- greedy")
    greedy = text[start:text.index("--- temperature 0.7", start)]
    assert re.search(r"(.{5,}?)\1\1", greedy, re.S), f"greedy decoding repeats a phrase: {greedy!r}"

    # the trained model's next token: "top-k 5 can never draw more than 5 different tokens, and top-p keeps ...
    # fewer than plain sampling draws"
    drawn = {name.strip(): int(n) for name, n in re.findall(
        r"(plain sampling|top-k 5|top-p 0.8)\s*: (\d+) distinct tokens drawn", text)}
    assert drawn["top-k 5"] <= 5 and drawn["top-p 0.8"] < drawn["plain sampling"], drawn
