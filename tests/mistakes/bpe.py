"""Mistake catalogue of notebook 07 (byte-pair encoding)."""
from . import Alternative, Mistake

ASSIGNMENT = "07_bpe"

TRAIN = '''
def train_bpe(corpus, num_merges):
    word_freqs = dict(Counter(tuple(word) + ("</w>",) for word in corpus.split()))
    merges = []
    for _ in range(num_merges):
        counts = pair_counts(word_freqs)
        if not counts:
            break
        best = min(counts, key=lambda p: (-counts[p], p))
        merges.append(best)
        word_freqs = merge_pair(best, word_freqs)
    return merges
'''

MERGE = '''
def merge_pair(pair, word_freqs):
    a, b = pair
    merged = {}
    for word, freq in word_freqs.items():
        out, i = [], 0
        while i < len(word):
            if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
                out.append(a + b)
                i += 2
            else:
                out.append(word[i])
                i += 1
        merged[tuple(out)] = merged.get(tuple(out), 0) + freq
    return merged
'''

TOKENIZE = '''
def bpe_tokenize(word, merges):
    ranks = {tuple(p): r for r, p in reversed(list(enumerate(merges)))}
    symbols = list(word) + ["</w>"]
    while len(symbols) > 1:
        present = [(ranks[p], p) for p in zip(symbols, symbols[1:]) if p in ranks]
        if not present:
            break
        a, b = min(present)[1]
        out, i = [], 0
        while i < len(symbols):
            if i + 1 < len(symbols) and symbols[i] == a and symbols[i + 1] == b:
                out.append(a + b)
                i += 2
            else:
                out.append(symbols[i])
                i += 1
        symbols = out
    return symbols
'''


def changed(code, *replace):
    for old, new in replace:
        assert old in code, old
        code = code.replace(old, new)
    return code


MISTAKES = [
    # --- pair_counts ---
    Mistake("pair counts not weighted by word frequency", "pair_counts", '''
def pair_counts(word_freqs):
    counts = Counter()
    for word in word_freqs:
        for pair in zip(word, word[1:]):
            counts[pair] += 1
    return counts
''', ("pair_counts_weighted",), "weight every pair by the word's frequency", also=('pair_counts_within_words',)),
    Mistake("pair counted once per word (overlaps lost)", "pair_counts", '''
def pair_counts(word_freqs):
    counts = Counter()
    for word, freq in word_freqs.items():
        for pair in set(zip(word, word[1:])):
            counts[pair] += freq
    return counts
''', ("pair_counts_within_words",), "overlapping pairs all count", also=('pair_counts_weighted',)),
    Mistake("pairs in a run of one symbol counted without overlap", "pair_counts", '''
def pair_counts(word_freqs):
    counts = Counter()
    for word, freq in word_freqs.items():
        i = 0
        while i < len(word) - 1:
            counts[word[i], word[i + 1]] += freq
            i += 2 if word[i] == word[i + 1] else 1
    return counts
''', ("pair_counts_within_words",), "counted without overlap", also=('pair_counts_weighted',)),
    Mistake("pairs counted across word boundaries", "pair_counts", '''
def pair_counts(word_freqs):
    symbols = [s for word, freq in word_freqs.items() for _ in range(freq) for s in word]
    return Counter(zip(symbols, symbols[1:]))
''', ("pair_counts_within_words",), "across word boundaries", also=('pair_counts_weighted',)),
    Mistake("pair_counts returning a plain dict", "pair_counts", '''
def pair_counts(word_freqs):
    counts = {}
    for word, freq in word_freqs.items():
        for pair in zip(word, word[1:]):
            counts[pair] = counts.get(pair, 0) + freq
    return counts
''', ("pair_counts_weighted",), "collections.Counter"),
    Mistake("pair_counts importing the course reference", "pair_counts", '''
from lib.bpe import pair_counts
''', ("pair_counts_weighted", "pair_counts_within_words"), "not defined"),  # lib.bpe is not there while 07 is graded
    Mistake("pair_counts missing the last pair of each word", "pair_counts", '''
def pair_counts(word_freqs):
    counts = Counter()
    for word, freq in word_freqs.items():
        for i in range(len(word) - 2):
            counts[(word[i], word[i + 1])] += freq
    return counts
''', ("pair_counts_weighted", "pair_counts_within_words"), "the last pair of each word is missing"),
    # --- merge_pair ---
    Mistake("merge by string replace on the joined word", "merge_pair", '''
def merge_pair(pair, word_freqs):
    a, b = pair
    merged = {}
    for word, freq in word_freqs.items():
        new = tuple(" ".join(word).replace(a + " " + b, a + b).split(" "))
        merged[new] = merged.get(new, 0) + freq
    return merged
''', ("merge_pair_edges",), "string replace"),
    Mistake("merge_pair mutating its argument", "merge_pair", '''
def merge_pair(pair, word_freqs):
    a, b = pair
    for word in list(word_freqs):
        out, i = [], 0
        while i < len(word):
            if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
                out.append(a + b)
                i += 2
            else:
                out.append(word[i])
                i += 1
        freq = word_freqs.pop(word)
        word_freqs[tuple(out)] = word_freqs.get(tuple(out), 0) + freq
    return word_freqs
''', ("merge_pair_basic", "merge_pair_new_dict"), "changed the dict it was given", also=('merge_pair_edges',)),
    Mistake("only the first occurrence of the pair merged", "merge_pair", '''
def merge_pair(pair, word_freqs):
    merged = {}
    for word, freq in word_freqs.items():
        w = list(word)
        for i in range(len(w) - 1):
            if (w[i], w[i + 1]) == tuple(pair):
                w[i:i + 2] = [w[i] + w[i + 1]]
                break
        merged[tuple(w)] = merged.get(tuple(w), 0) + freq
    return merged
''', ("merge_pair_edges",), "only the first occurrence"),
    Mistake("overlapping pairs merged from the right", "merge_pair", '''
def merge_pair(pair, word_freqs):
    a, b = pair
    merged = {}
    for word, freq in word_freqs.items():
        out, i = [], len(word) - 1
        while i >= 0:
            if i >= 1 and word[i - 1] == a and word[i] == b:
                out.insert(0, a + b)
                i -= 2
            else:
                out.insert(0, word[i])
                i -= 1
        merged[tuple(out)] = merged.get(tuple(out), 0) + freq
    return merged
''', ("merge_pair_edges",), "merged from the right"),
    Mistake("merged words overwrite each other's counts", "merge_pair", changed(
        MERGE, ("merged[tuple(out)] = merged.get(tuple(out), 0) + freq", "merged[tuple(out)] = freq")),
        ("merge_pair_edges",), "add up their counts"),
    Mistake("merged word replaces the word it became (copy, delete, set)", "merge_pair", '''
def merge_pair(pair, word_freqs):
    a, b = pair
    merged = dict(word_freqs)
    for word, freq in word_freqs.items():
        out, i = [], 0
        while i < len(word):
            if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
                out.append(a + b)
                i += 2
            else:
                out.append(word[i])
                i += 1
        if tuple(out) != word:
            del merged[word]
            merged[tuple(out)] = freq
    return merged
''', ("merge_pair_edges",), "add up their counts"),
    Mistake("merge_pair returning its argument when the pair does not occur", "merge_pair", changed(
        MERGE, ("    a, b = pair\n", "    a, b = pair\n"
                "    if not any(pair in zip(w, w[1:]) for w in word_freqs):\n        return word_freqs\n")),
        ("merge_pair_new_dict",), "returned the same dict object"),
    Mistake("merged symbol kept as the pair (a, b)", "merge_pair", changed(
        MERGE, ("out.append(a + b)", "out.append((a, b))")),
        ("merge_pair_basic", "merge_pair_edges"), "it must be one string, a + b", also=('merge_pair_new_dict',)),
    # --- train_bpe ---
    Mistake("no end-of-word marker", "train_bpe", changed(
        TRAIN, ('tuple(word) + ("</w>",)', "tuple(word)")), ("train_bpe_classic",), "no end-of-word marker", also=('train_bpe_ties', 'train_bpe_unseen', 'train_bpe_speed')),
    Mistake("marker glued to the last character", "train_bpe", changed(
        TRAIN, ('tuple(word) + ("</w>",)', 'tuple(word[:-1]) + (word[-1] + "</w>",)')),
        ("train_bpe_classic",), "glued to the last character", also=('train_bpe_ties', 'train_bpe_unseen', 'train_bpe_speed')),
    Mistake("merging on the whole text, not on words", "train_bpe", changed(
        TRAIN, ('dict(Counter(tuple(word) + ("</w>",) for word in corpus.split()))',
                '{tuple(s for word in corpus.split() for s in (*word, "</w>")): 1}')),
        ("train_bpe_classic",), "whole text is one sequence", also=('train_bpe_ties', 'train_bpe_unseen', 'train_bpe_speed')),
    Mistake("each distinct word counted once", "train_bpe", changed(
        TRAIN, ('dict(Counter(tuple(word) + ("</w>",) for word in corpus.split()))',
                '{tuple(word) + ("</w>",): 1 for word in corpus.split()}')),
        ("train_bpe_classic",), "every distinct word counts once", also=('train_bpe_unseen', 'train_bpe_speed')),
    Mistake("ties broken by the largest pair", "train_bpe", changed(
        TRAIN, ("best = min(counts, key=lambda p: (-counts[p], p))", "best = max(counts, key=lambda p: (counts[p], p))")),
        ("train_bpe_ties",), "largest pair", also=('train_bpe_classic', 'train_bpe_unseen', 'train_bpe_speed')),
    Mistake("ties broken by the first pair seen", "train_bpe", changed(
        TRAIN, ("best = min(counts, key=lambda p: (-counts[p], p))", "best = max(counts, key=counts.get)")),
        ("train_bpe_ties",), "first pair seen", also=('train_bpe_classic', 'train_bpe_unseen', 'train_bpe_speed')),
    Mistake("one merge too many", "train_bpe", changed(
        TRAIN, ("for _ in range(num_merges):", "for _ in range(num_merges + 1):")),
        ("train_bpe_classic",), "one merge too many", also=('train_bpe_ties', 'train_bpe_unseen', 'train_bpe_speed')),
    Mistake("corpus split on single spaces", "train_bpe", changed(
        TRAIN, ("corpus.split()", 'corpus.split(" ")')), ("train_bpe_unseen",), "split(' ')"),
    Mistake("no early stop when no pair is left", "train_bpe", changed(
        TRAIN, ("        if not counts:\n            break\n", "")), ("train_bpe_unseen",), "no pair is left", also=('train_bpe_classic', 'train_bpe_ties')),
    Mistake("train_bpe calling Hugging Face tokenizers", "train_bpe", '''
def train_bpe(corpus, num_merges):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE(end_of_word_suffix="</w>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    alphabet = len(set("".join(corpus.split()))) + len({w[-1] for w in corpus.split()})
    tok.train_from_iterator([corpus], trainers.BpeTrainer(vocab_size=alphabet + num_merges,
                                                          end_of_word_suffix="</w>", show_progress=False))
    return [tuple(m) for m in json.loads(tok.to_str())["model"]["merges"]]
''', ("train_bpe_classic", "train_bpe_ties", "train_bpe_unseen", "train_bpe_speed"), "uses Hugging Face tokenizers"),
    Mistake("train_bpe importing the course reference", "train_bpe", '''
from lib.bpe import train_bpe
''', ("train_bpe_classic", "train_bpe_ties", "train_bpe_unseen", "train_bpe_speed"),
        "not defined"),  # lib.bpe is not there while 07 is graded
    Mistake("train_bpe returning the merged symbols, not the pairs", "train_bpe", changed(
        TRAIN, ("merges.append(best)", "merges.append(best[0] + best[1])")),
        ("train_bpe_classic", "train_bpe_ties", "train_bpe_unseen", "train_bpe_speed"), "must be a pair of strings"),
    # --- bpe_tokenize ---
    Mistake("tokenize in one left-to-right pass", "bpe_tokenize", '''
def bpe_tokenize(word, merges):
    known = set(map(tuple, merges))
    out = []
    for s in list(word) + ["</w>"]:
        if out and (out[-1], s) in known:
            out[-1] = out[-1] + s
        else:
            out.append(s)
    return out
''', ("bpe_tokenize_edges", "bpe_tokenize_rank_order", "bpe_tokenize_unseen"),
        "is wrong: the pairs are merged in one left-to-right pass over the word"),
    Mistake("tokenize by longest known piece", "bpe_tokenize", '''
def bpe_tokenize(word, merges):
    vocab = {a + b for a, b in merges}
    rest, out = word + "</w>", []
    while rest:
        for end in range(len(rest), 0, -1):
            if rest[:end] in vocab or end == 1 or rest[:end] == "</w>":
                break
        out.append(rest[:end])
        rest = rest[end:]
    return out
''', ("bpe_tokenize_rank_order", "bpe_tokenize_edges", "bpe_tokenize_unseen"),
        "is wrong: the word is cut greedily into the longest known pieces from the left"),
    Mistake("tokenize without the end-of-word marker", "bpe_tokenize", changed(
        TOKENIZE, ('symbols = list(word) + ["</w>"]', "symbols = list(word)")),
        ("bpe_tokenize_unseen",), "marker is missing", also=('bpe_tokenize_rank_order', 'bpe_tokenize_edges')),
    Mistake("tokenize applying the merges in reverse order", "bpe_tokenize", '''
def bpe_tokenize(word, merges):
    symbols = tuple(word) + ("</w>",)
    for pair in reversed(merges):
        symbols = next(iter(merge_pair(pair, {symbols: 1})))
    return list(symbols)
''', ("bpe_tokenize_edges", "bpe_tokenize_unseen", "bpe_tokenize_rank_order"),
        "is wrong: the merges are applied in reverse order"),
    Mistake("tokenize returning a tuple", "bpe_tokenize", changed(
        TOKENIZE, ("    return symbols\n", "    return tuple(symbols)\n")), ("bpe_tokenize_edges",), "should return a list"),
    Mistake("bpe_tokenize importing the course reference", "bpe_tokenize", '''
from lib.bpe import bpe_tokenize
''', ("bpe_tokenize_unseen", "bpe_tokenize_rank_order", "bpe_tokenize_edges"),
        "not defined"),  # lib.bpe is not there while 07 is graded
    Mistake("tokenize merging the latest-learned pair first", "bpe_tokenize", changed(
        TOKENIZE, ("a, b = min(present)[1]", "a, b = max(present)[1]")),
        ("bpe_tokenize_unseen", "bpe_tokenize_rank_order"), "learned last (highest rank) is merged first"),
    Mistake("tokenize in left-to-right passes, repeated until nothing merges", "bpe_tokenize", '''
def bpe_tokenize(word, merges):
    known = set(map(tuple, merges))
    symbols, merged = list(word) + ["</w>"], True
    while merged:
        merged, out, i = False, [], 0
        while i < len(symbols):
            if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) in known:
                out.append(symbols[i] + symbols[i + 1])
                merged, i = True, i + 2
            else:
                out.append(symbols[i])
                i += 1
        symbols = out
    return symbols
''', ("bpe_tokenize_unseen", "bpe_tokenize_rank_order"), "left-to-right passes that join whatever known pair",
        elsewhere="one left-to-right pass over the word, whatever their rank"),  # where one pass gives the same
    Mistake("tokenize looking up merged strings, not pairs (tiktoken's educational encoder)", "bpe_tokenize", '''
def bpe_tokenize(word, merges):
    ranks = {}
    for rank, (a, b) in enumerate(merges):
        ranks.setdefault(a + b, rank)
    parts = list(word) + ["</w>"]
    while True:
        found = [(ranks[x + y], i) for i, (x, y) in enumerate(zip(parts, parts[1:])) if x + y in ranks]
        if not found:
            return parts
        i = min(found)[1]
        parts = parts[:i] + [parts[i] + parts[i + 1]] + parts[i + 2:]
''', ("bpe_tokenize_edges",), "spell a learned token"),
]

ALTERNATIVES = [
    Alternative("pair counts with Counter.update", "pair_counts", '''
def pair_counts(word_freqs):
    counts = Counter()
    for word, freq in word_freqs.items():
        for i in range(len(word) - 1):
            counts.update({(word[i], word[i + 1]): freq})
    return counts
'''),
    Alternative("merge with a for loop, a skip flag and a defaultdict", "merge_pair", '''
from collections import defaultdict

def merge_pair(pair, word_freqs):
    merged = defaultdict(int)
    for word, freq in word_freqs.items():
        out, skip = [], False
        for i, s in enumerate(word):
            if skip:
                skip = False
                continue
            if i + 1 < len(word) and (s, word[i + 1]) == tuple(pair):
                out.append(s + word[i + 1])
                skip = True
            else:
                out.append(s)
        merged[tuple(out)] += freq
    return merged
'''),
    Alternative("train with sorted counts and inline merging", "train_bpe", '''
def train_bpe(corpus, num_merges):
    word_freqs = Counter(tuple(w) + ("</w>",) for w in corpus.split())
    merges = []
    while len(merges) < num_merges:
        counts = Counter()
        for word, freq in word_freqs.items():
            for pair in zip(word, word[1:]):
                counts[pair] += freq
        if not counts:
            return merges
        best = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        merges.append(best)
        new = Counter()
        for word, freq in word_freqs.items():
            w, i = [], 0
            while i < len(word):
                if word[i:i + 2] == best:
                    w.append(best[0] + best[1]); i += 2
                else:
                    w.append(word[i]); i += 1
            new[tuple(w)] += freq
        word_freqs = new
    return merges
'''),
    Alternative("tokenize by looping over the merges in order", "bpe_tokenize", '''
def bpe_tokenize(word, merges):
    symbols = tuple(word) + ("</w>",)
    for pair in merges:
        symbols = next(iter(merge_pair(pair, {symbols: 1})))
    return list(symbols)
'''),
    Alternative("tokenize picking the lowest-rank pair with merges.index", "bpe_tokenize", '''
def bpe_tokenize(word, merges):
    merges = [tuple(m) for m in merges]
    symbols = list(word) + ["</w>"]
    while True:
        pairs = [p for p in zip(symbols, symbols[1:]) if p in merges]
        if not pairs:
            return symbols
        best = min(pairs, key=merges.index)
        i = 0
        while i < len(symbols) - 1:
            if (symbols[i], symbols[i + 1]) == best:
                symbols[i:i + 2] = [best[0] + best[1]]
            i += 1
'''),
    Alternative("merge_pair returning a Counter", "merge_pair", '''
def merge_pair(pair, word_freqs):
    merged = Counter()
    for word, freq in word_freqs.items():
        i, new = 0, []
        while i < len(word):
            if word[i:i + 2] == tuple(pair):
                new.append(pair[0] + pair[1])
                i += 2
            else:
                new.append(word[i])
                i += 1
        merged[tuple(new)] += freq
    return merged
'''),
    Alternative("train picking the top count, then the smallest pair with it", "train_bpe", changed(
        TRAIN, ("best = min(counts, key=lambda p: (-counts[p], p))",
                "top = max(counts.values())\n        best = min(p for p, c in counts.items() if c == top)"))),
    Alternative("tokenize merging one occurrence of the best pair at a time", "bpe_tokenize", '''
def bpe_tokenize(word, merges):
    rank = {tuple(p): r for r, p in enumerate(merges)}
    symbols = list(word) + ["</w>"]
    while True:
        pairs = [(rank[p], i) for i, p in enumerate(zip(symbols, symbols[1:])) if p in rank]
        if not pairs:
            return symbols
        _, i = min(pairs)
        symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]
'''),
]
