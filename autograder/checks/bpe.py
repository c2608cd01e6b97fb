"""Hidden checks of notebook 07 (byte-pair encoding).

Each function is one graded test cell. The reference is ``lib.bpe`` (its
private helpers, which the ban does not cover, compute the expected values
outside the student's block); Hugging Face ``tokenizers`` cannot stand in for
it: it glues the end-of-word marker to the last character and breaks ties by
its internal ids, so its merges differ from the contract, and the checks also
refuse student functions that reach ``tokenizers`` at all. Each common mistake
is recognised by recomputing the output it would give and naming it.
"""
import random
import time
import types
from collections import Counter

from lib import bpe as ref

from .common import call, plain, student_code

EOW = ref.EOW
REFERENCES = ("pair_counts", "merge_pair", "train_bpe", "bpe_tokenize")
HELPERS = {"pair_counts": ref.pair_counts, "merge_pair": ref.merge_pair}
CLASSIC = " ".join(["low"] * 5 + ["lower"] * 2 + ["newest"] * 6 + ["widest"] * 3)


def _graded(namespace=None, inject=None):
    return student_code(namespace, inject, references=REFERENCES)


# --- corpora the student never saw ------------------------------------------

STEMS = ["talk", "walk", "jump", "play", "work", "read", "bake", "hope", "sing", "kind", "fast", "slow",
         "care", "help", "paint", "light", "dark", "cold", "warm", "teach", "build", "open", "clean", "rain"]
ENDINGS = ["", "", "s", "ed", "ing", "er", "est", "ly", "ness", "ful", "less", "able"]


def _zipf_corpus(rng, n_words, n_types=60):
    """A corpus of made-up English-like words (stems and endings) with Zipf-like frequencies."""
    types_ = []
    while len(types_) < n_types:
        word = rng.choice(STEMS) + rng.choice(ENDINGS)
        if rng.random() < 0.2:
            word = rng.choice(["un", "re", "over"]) + word
        if word not in types_:
            types_.append(word)
    weights = [1.0 / (rank + 1) for rank in range(len(types_))]
    return " ".join(rng.choices(types_, weights=weights, k=n_words))


def _letters_corpus(rng, alphabet, n_words, max_len, sep=" "):
    return sep.join("".join(rng.choice(alphabet) for _ in range(rng.randint(1, max_len))) for _ in range(n_words))


def _random_word_freqs(rng, n):
    """Word frequencies part-way through training: symbols of several characters included."""
    corpus = _zipf_corpus(rng, 120, 30)
    word_freqs = ref.initial_word_freqs(corpus)
    for pair in ref._train(word_freqs, n):
        word_freqs = ref._merge(pair, word_freqs)
    return word_freqs


# --- checking results ---------------------------------------------------------

def _as_counts(result, what):
    if not isinstance(result, dict):
        raise AssertionError(f"{what} should return a collections.Counter, got {type(result).__name__}")
    counts = {plain(k, what): plain(v, what) for k, v in dict.items(result)}
    return {k: v for k, v in counts.items() if v != 0}


def _as_word_freqs(result, what):
    if not isinstance(result, dict):
        raise AssertionError(f"{what} should return a dict {{tuple of symbols: count}}, got {type(result).__name__}")
    out = {}
    for k, v in dict.items(result):
        k, v = plain(k, what), plain(v, what)
        if not isinstance(k, tuple):
            raise AssertionError(f"{what}: the keys must be tuples of symbols (strings), got a key {k!r}")
        out[k] = v
    return out


def _as_merges(result, what):
    if not isinstance(result, (list, tuple)):
        raise AssertionError(f"{what} should return a list of pairs (a, b), got {type(result).__name__}")
    merges = []
    for m in plain(list(result), what):
        if not isinstance(m, (tuple, list)) or len(m) != 2 or not all(isinstance(s, str) for s in m):
            raise AssertionError(f"{what}: each merge must be a pair of strings (a, b), got {m!r}")
        merges.append(tuple(m))
    return merges


def _as_symbols(result, what):
    if not isinstance(result, (list, tuple)):
        raise AssertionError(f"{what} should return a list of symbols (strings), got {type(result).__name__}")
    symbols = plain(list(result), what)
    if not all(isinstance(s, str) for s in symbols):
        raise AssertionError(f"{what} should return a list of strings, got {symbols!r}")
    return symbols


def _diagnose(actual, expected, hints, what, show):
    """Fail naming the known mistake whose output ``actual`` equals, else show both values.
    ``hints`` (message -> what that mistake outputs, or a function giving that dict) is
    only worked out on a failure."""
    if actual == expected:
        return
    known = [message for message, wrong in (hints() if callable(hints) else hints).items()
             if wrong is not None and actual == wrong and wrong != expected]
    if known:  # on this input several mistakes may give the same output: name them all
        raise AssertionError(f"{what} is wrong: " + " (or:) ".join(known))
    raise AssertionError(f"{what}: {show(actual, expected)}")


def _first_difference(actual, expected):
    for i, (a, e) in enumerate(zip(actual, expected)):
        if a != e:
            return f"merge {i} (counting from 0) is {a}, expected {e}; the first {i} merges are right"
    return f"got {len(actual)} merges, expected {len(expected)}: {actual[len(expected):] or expected[len(actual):]}"


def _show_dict(actual, expected):
    wrong = {k: actual.get(k) for k in set(actual) | set(expected) if actual.get(k) != expected.get(k)}
    items = sorted(wrong, key=repr)[:4]
    return "; ".join(f"{k}: got {actual.get(k, 'nothing')}, expected {expected.get(k, 'nothing')}" for k in items)


# --- no tokenizers --------------------------------------------------------------

def _reaches_tokenizers(fn, namespace, depth=0, seen=None):
    """True when ``fn`` (or a function of the notebook it calls) imports or uses ``tokenizers``."""
    seen = set() if seen is None else seen
    code = getattr(fn, "__code__", None)
    if code is None or id(code) in seen or depth > 4:
        return False
    seen.add(id(code))
    glob = getattr(fn, "__globals__", namespace or {})
    stack = [code]
    while stack:
        c = stack.pop()
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
        for name in c.co_names:
            if name == "tokenizers":
                return True
            obj = glob.get(name)
            module = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", "") or ""
            if isinstance(module, str) and module.split(".")[0] == "tokenizers":
                return True
            if isinstance(obj, types.FunctionType) and _reaches_tokenizers(obj, namespace, depth + 1, seen):
                return True
    return False


def _no_tokenizers(fn, name, namespace):
    if _reaches_tokenizers(fn, namespace):
        raise AssertionError(f"{name} uses Hugging Face tokenizers: this exercise asks you to write BPE yourself "
                             f"(tokenizers is for the comparison later in the notebook)")


# --- pair_counts -----------------------------------------------------------------

def _pair_count_hints(word_freqs):
    unweighted = Counter()
    once_per_word = Counter()
    for word in word_freqs:
        unweighted.update(zip(word, word[1:]))
    for word, freq in word_freqs.items():
        for pair in set(zip(word, word[1:])):
            once_per_word[pair] += freq
    flat = [s for word, freq in word_freqs.items() for _ in range(freq) for s in word]
    across = Counter(zip(flat, flat[1:]))
    return {
        "each word is counted once; weight every pair by the word's frequency (counts[pair] += freq)":
            dict(unweighted),
        "a pair that occurs twice in a word is counted once: count every position, so ('a', 'a', 'a') holds "
        "('a', 'a') twice (overlapping pairs all count)": dict(once_per_word),
        "pairs are counted across word boundaries (the last symbol of one word with the first of the next): "
        "count the pairs inside each word only": dict(across),
    }


def _check_counts(pair_counts, word_freqs, namespace, what, need_counter=False):
    snapshot = dict(word_freqs)
    with _graded(namespace):
        result = call(what, pair_counts, snapshot)
    if need_counter and not isinstance(result, Counter):
        raise AssertionError(f"{what} should return a collections.Counter, got {type(result).__name__}: "
                             f"build it with Counter() (train_bpe relies on it)")
    actual = _as_counts(result, what)
    expected = dict(ref._counts(word_freqs))
    _diagnose(actual, expected, lambda: _pair_count_hints(word_freqs), what, _show_dict)


def pair_counts_weighted(pair_counts, namespace=None):
    """A Counter of adjacent pairs, each weighted by the frequency of its word, on several word lists."""
    rng = random.Random(71)
    _check_counts(pair_counts, {("l", "o", "w", EOW): 5, ("l", "o", "w", "e", "r", EOW): 2}, namespace,
                  "pair_counts({('l','o','w','</w>'): 5, ('l','o','w','e','r','</w>'): 2})", need_counter=True)
    for n in (0, 5, 20):
        word_freqs = _random_word_freqs(rng, n)
        _check_counts(pair_counts, word_freqs, namespace,
                      f"pair_counts on the words of a corpus after {n} merges ({len(word_freqs)} words)")


def pair_counts_within_words(pair_counts, namespace=None):
    """Overlapping pairs all count, no pair crosses two words, one-symbol words have no pairs."""
    cases = [
        ({("a", "a", "a"): 1}, "pair_counts({('a','a','a'): 1})"),
        ({("a", "a", "a", "a"): 3, ("b", "a"): 1}, "pair_counts({('a','a','a','a'): 3, ('b','a'): 1})"),
        ({("a", "b"): 2, ("c", "d"): 1}, "pair_counts({('a','b'): 2, ('c','d'): 1})"),
        ({("ab", "c"): 2, ("a", "bc"): 3, ("abc",): 9}, "pair_counts({('ab','c'): 2, ('a','bc'): 3, ('abc',): 9})"),
        ({("x",): 4, ("y", EOW): 1}, "pair_counts({('x',): 4, ('y','</w>'): 1})"),
        ({}, "pair_counts({})"),
    ]
    for word_freqs, what in cases:
        _check_counts(pair_counts, word_freqs, namespace, what)


# --- merge_pair ------------------------------------------------------------------

def _merge_hints(pair, word_freqs):
    a, b = pair
    replaced, first_only, overlap, overwritten = {}, {}, {}, {}
    for word, freq in word_freqs.items():
        text = " ".join(word).replace(f"{a} {b}", a + b)
        key = tuple(text.split(" "))
        replaced[key] = replaced.get(key, 0) + freq
        w = list(word)
        for i in range(len(w) - 1):
            if (w[i], w[i + 1]) == pair:
                w[i:i + 2] = [a + b]
                break
        first_only[tuple(w)] = first_only.get(tuple(w), 0) + freq
        w = list(word)  # merged from the right: ('a','a','a') -> ('a', 'aa')
        i = len(w) - 2
        while i >= 0:
            if i + 1 < len(w) and (w[i], w[i + 1]) == pair:
                w[i:i + 2] = [a + b]
                i -= 2
            else:
                i -= 1
        overlap[tuple(w)] = overlap.get(tuple(w), 0) + freq
        overwritten[ref._merge_word(word, pair)] = freq
    return {
        "the pair was merged with a string replace on the joined word: that also matches inside symbols, e.g. "
        "('b', 'c') inside ('ab', 'c'). Compare symbols, word[i] == a and word[i + 1] == b": replaced,
        "only the first occurrence in each word is merged: merge every occurrence, left to right": first_only,
        "overlapping occurrences are merged from the right: ('a','a','a') must give ('aa', 'a'). Scan left to "
        "right, and after merging at i continue at i + 2": overlap,
        "two words that become equal after the merge must add up their counts (new[w] = new.get(w, 0) + freq); "
        "one overwrote the other": overwritten,
    }


def _check_merge(merge_pair, pair, word_freqs, namespace, what):
    snapshot = {k: v for k, v in word_freqs.items()}
    with _graded(namespace):
        result = call(what, merge_pair, pair, snapshot)
    if snapshot != word_freqs:
        raise AssertionError(f"{what} changed the dict it was given: build and return a new dict, "
                             f"leave word_freqs as it is")
    actual = _as_word_freqs(result, what)
    expected = ref._merge(pair, word_freqs)
    _diagnose(actual, expected, lambda: _merge_hints(pair, word_freqs), what, _show_dict)


def merge_pair_basic(merge_pair, namespace=None):
    """Every occurrence of the pair is merged in every word, counts kept, on words part-way through training."""
    rng = random.Random(72)
    _check_merge(merge_pair, ("e", "s"), ref.initial_word_freqs(CLASSIC), namespace,
                 "merge_pair(('e', 's'), word_freqs of low/lower/newest/widest)")
    for n in (0, 3, 12):
        word_freqs = _random_word_freqs(rng, n)
        counts = ref._counts(word_freqs)
        for pair in sorted(counts, key=lambda p: (-counts[p], p))[:3] + [min(counts, key=lambda p: (counts[p], p))]:
            _check_merge(merge_pair, pair, word_freqs, namespace, f"merge_pair({pair}, ...) after {n} merges")


def merge_pair_edges(merge_pair, namespace=None):
    """Overlaps merge left to right, merges respect symbol boundaries, equal words add up."""
    cases = [
        (("a", "a"), {("a", "a", "a"): 1}),
        (("a", "a"), {("a", "a", "a", "a"): 2, ("b", "a", "a", "a", "b"): 1}),
        (("b", "c"), {("ab", "c"): 2, ("a", "b", "c"): 1}),
        (("ab", "c"), {("a", "bc"): 4, ("ab", "c", EOW): 1}),
        (("a", "b"), {("a", "b", "c"): 1, ("ab", "c"): 2}),
        (("x", "y"), {("a", "b"): 1}),
        (("w", EOW), {("l", "o", "w", EOW): 3, ("w",): 1}),
    ]
    for pair, word_freqs in cases:
        _check_merge(merge_pair, pair, word_freqs, namespace, f"merge_pair({pair}, {word_freqs})")


def merge_pair_new_dict(merge_pair, namespace=None):
    """The input is left unchanged (it may be used again) and the result is a new dict."""
    word_freqs = ref.initial_word_freqs(CLASSIC)
    for pair in [("l", "o"), ("x", "y")]:
        given = dict(word_freqs)
        with _graded(namespace):
            result = call(f"merge_pair({pair}, word_freqs)", merge_pair, pair, given)
        if given != word_freqs:
            raise AssertionError(f"merge_pair({pair}, word_freqs) changed the dict it was given (it must not "
                                 f"mutate its argument): build and return a new dict")
        if result is given:
            raise AssertionError(f"merge_pair({pair}, word_freqs) returned the same dict object it was given: "
                                 f"return a new dict")
        _diagnose(_as_word_freqs(result, "merge_pair"), ref._merge(pair, word_freqs), {},
                  f"merge_pair({pair}, word_freqs)", _show_dict)


# --- train_bpe -------------------------------------------------------------------

def _train_variant(corpus, num_merges, start=None, key=None):
    """BPE with one rule changed: the initial words (``start``) or the choice of the best pair (``key``)."""
    word_freqs = start if start is not None else ref.initial_word_freqs(corpus)
    merges = []
    for _ in range(num_merges):
        counts = ref._counts(word_freqs)
        counts = Counter({p: c for p, c in counts.items() if c > 0})
        if not counts:
            break
        best = key(counts) if key is not None else min(counts, key=lambda p: (-counts[p], p))
        merges.append(best)
        word_freqs = ref._merge(best, word_freqs)
    return merges


def _train_hints(corpus, n):
    words = corpus.split()
    no_marker = dict(Counter(tuple(w) for w in words))
    glued = dict(Counter(tuple(w[:-1]) + (w[-1] + EOW,) for w in words))
    whole = {tuple(s for w in words for s in (*w, EOW)): 1} if words else {}
    unweighted = {w: 1 for w in ref.initial_word_freqs(corpus)}
    split_space = dict(Counter(tuple(w) + (EOW,) for w in corpus.split(" ")))
    return {
        "the corpus is split with split(' '), which keeps newlines inside words and makes empty words from "
        "double spaces: use corpus.split() with no argument": _train_variant(corpus, n, start=split_space),
        "the words have no end-of-word marker: start each word as its characters plus '</w>', "
        "'low' -> ('l', 'o', 'w', '</w>')": _train_variant(corpus, n, start=no_marker),
        "the end-of-word marker is glued to the last character ('w</w>'): it must be a symbol of its own, "
        "('l', 'o', 'w', '</w>')": _train_variant(corpus, n, start=glued),
        "the whole text is one sequence, so pairs cross word boundaries: split the corpus into words "
        "(corpus.split()) and count pairs inside each word": _train_variant(corpus, n, start=whole),
        "every distinct word counts once: weight the pairs by how often each word occurs": 
            _train_variant(corpus, n, start=unweighted),
        "ties are broken by the largest pair: among the pairs with the highest count take the "
        "lexicographically smallest, min(...) over (-count, pair)": _train_variant(
            corpus, n, key=lambda c: max(c, key=lambda p: (c[p], p))),
        "ties are broken by the first pair seen (most_common / max keep the first): among the pairs with "
        "the highest count take the lexicographically smallest": _train_variant(
            corpus, n, key=lambda c: c.most_common(1)[0][0]),
        f"one merge too many: train_bpe(corpus, {n}) must return {n} merges (fewer only when no pair is left)":
            ref._train(ref.initial_word_freqs(corpus), n + 1),
        f"one merge too few: train_bpe(corpus, {n}) must return {n} merges (fewer only when no pair is left)":
            ref._train(ref.initial_word_freqs(corpus), n - 1) if n > 0 else None,
    }


def _check_train(train_bpe, corpus, n, namespace, what, hints=True):
    expected = ref._train(ref.initial_word_freqs(corpus), n)
    with _graded(namespace, HELPERS):
        result = call(what, train_bpe, corpus, n)
    actual = _as_merges(result, what)
    _diagnose(actual, expected, (lambda: _train_hints(corpus, n)) if hints else {}, what, _first_difference)


def train_bpe_classic(train_bpe, namespace=None):
    """The low/lower/newest/widest corpus and a short text: merges in order, with the '</w>' marker."""
    _no_tokenizers(train_bpe, "train_bpe", namespace)
    text = ("the cat sat on the mat and the dog sat on the log then the cat and the dog ran "
            "to the big hall where the tall doll was all alone")
    _check_train(train_bpe, CLASSIC, 10, namespace, "train_bpe(low/lower/newest/widest corpus, 10)")
    _check_train(train_bpe, CLASSIC + " low lowest", 18, namespace, "train_bpe(low/lower/newest/widest + lowest, 18)")
    _check_train(train_bpe, text, 25, namespace, "train_bpe(a short English text, 25)")


def train_bpe_ties(train_bpe, namespace=None):
    """Ties (several pairs with the highest count) go to the lexicographically smallest pair."""
    _no_tokenizers(train_bpe, "train_bpe", namespace)
    rng = random.Random(73)
    cases = ["ba ab", "xy yx zz", "b a ab ba", "dcba abcd", "aaa", "hug pug pun bun hugs"]
    cases += [_letters_corpus(rng, "abc", 8, 4) for _ in range(4)]
    for corpus in cases:
        _check_train(train_bpe, corpus, 6, namespace, f"train_bpe({corpus!r}, 6)")


def train_bpe_unseen(train_bpe, namespace=None):
    """Corpora it never saw (any whitespace), early stop when no pair is left, an empty corpus, 0 merges."""
    _no_tokenizers(train_bpe, "train_bpe", namespace)
    rng = random.Random(74)
    for i in range(3):
        corpus = _zipf_corpus(rng, 150)
        _check_train(train_bpe, corpus, 40, namespace, f"train_bpe(unseen corpus {i} of 150 words, 40)")
    corpus = _letters_corpus(rng, "abcde", 30, 5, sep=" \n")
    _check_train(train_bpe, corpus, 30, namespace, "train_bpe(corpus with newlines and double spaces, 30)")
    with _graded(namespace, HELPERS):
        short = call("train_bpe('ab a', 10)", train_bpe, "ab a", 10,
                     hint="after 3 merges no pair is left (every word is one symbol): stop there and return the "
                          "merges so far")
    if _as_merges(short, "train_bpe('ab a', 10)") != ref._train(ref.initial_word_freqs("ab a"), 10):
        raise AssertionError(f"train_bpe('ab a', 10) returned {short}, expected "
                             f"{ref._train(ref.initial_word_freqs('ab a'), 10)}: when no pair is left "
                             f"(every word is one symbol), stop and return the merges so far")
    for corpus, n in [("", 5), ("   ", 3), (CLASSIC, 0)]:
        what = f"train_bpe({corpus!r}, {n})" if len(corpus) < 10 else f"train_bpe(corpus, {n})"
        with _graded(namespace, HELPERS):
            result = call(what, train_bpe, corpus, n,
                          hint="when there is no word (or no merge to make) return an empty list")
        if _as_merges(result, what) != []:
            raise AssertionError(f"{what} should return [], got {result!r}")


def train_bpe_speed(train_bpe, namespace=None):
    """A corpus of 2000 words and 200 merges in about a second, with the same merges as the reference."""
    _no_tokenizers(train_bpe, "train_bpe", namespace)
    rng = random.Random(75)
    corpus = _zipf_corpus(rng, 2000, 250)
    start = time.perf_counter()
    expected = ref._train(ref.initial_word_freqs(corpus), 200)
    t_ref = time.perf_counter() - start
    with _graded(namespace, HELPERS):
        start = time.perf_counter()
        result = call("train_bpe(2000-word corpus, 200)", train_bpe, corpus, 200)
        t = time.perf_counter() - start
    limit = max(3.0, 25 * t_ref)
    if t > limit:
        raise AssertionError(f"train_bpe on a corpus of 2000 words with 200 merges took {t:.1f} s (the reference "
                             f"takes {t_ref:.2f} s here, the limit is {limit:.1f} s). Work on the distinct words with "
                             f"their counts (not on every word of the corpus), and at each step only count pairs "
                             f"and merge the best one (do not re-apply all earlier merges from scratch)")
    _diagnose(_as_merges(result, "train_bpe"), expected, {}, "train_bpe(2000-word corpus, 200)", _first_difference)


# --- bpe_tokenize ------------------------------------------------------------------

def _tokenize_hints(word, merges):
    ranks = {tuple(p): i for i, p in reversed(list(enumerate(merges)))}
    vocab = {s for p in merges for s in p} | {a + b for a, b in merges}
    one_pass, i = [], 0
    symbols = list(word) + [EOW]
    while i < len(symbols):  # one left-to-right scan, merging any known pair when it is seen
        if one_pass and (one_pass[-1], symbols[i]) in ranks:
            one_pass[-1] += symbols[i]
        else:
            one_pass.append(symbols[i])
        i += 1
    longest, rest = [], word + EOW
    while rest:  # greedy longest known prefix, WordPiece style
        for end in range(len(rest), 0, -1):
            if rest[:end] in vocab or end == 1 or rest[:end] == EOW:
                break
        longest.append(rest[:end])
        rest = rest[end:]
    no_marker = ref._merge_word
    plain_word = tuple(word)
    for p in merges:
        plain_word = no_marker(plain_word, tuple(p))
    glued = tuple(word[:-1]) + (word[-1] + EOW,) if word else ()
    for p in merges:
        glued = ref._merge_word(glued, tuple(p))
    reverse = tuple(word) + (EOW,)
    for p in reversed(merges):
        reverse = ref._merge_word(reverse, tuple(p))
    return {
        "the pairs are merged in one left-to-right pass over the word, whatever their rank: merge the pair "
        "that was learned FIRST (lowest rank in merges) wherever it is, then the next, until none is left":
            one_pass,
        "the word is cut greedily into the longest known pieces from the left; BPE applies the merges by rank "
        "(the earliest-learned pair first), which can give other pieces": longest,
        "the end-of-word marker is missing: tokenize the characters of the word followed by '</w>'":
            list(plain_word),
        "the end-of-word marker is glued to the last character ('w</w>'): start from the characters and a "
        "separate '</w>' symbol": list(glued),
        "the merges are applied in reverse order: the earliest-learned (lowest rank) pair comes first":
            list(reverse),
    }


def _check_tokenize(bpe_tokenize, word, merges, namespace, what):
    with _graded(namespace, HELPERS):
        result = call(what, bpe_tokenize, word, merges)
    actual = _as_symbols(result, what)
    expected = ref._tokenize(word, merges)
    _diagnose(actual, expected, lambda: _tokenize_hints(word, merges), what,
              lambda a, e: f"got {a}, expected {e}")


def bpe_tokenize_unseen(bpe_tokenize, namespace=None):
    """Words never seen in training, with merges learned on unseen corpora, equal the reference."""
    _no_tokenizers(bpe_tokenize, "bpe_tokenize", namespace)
    rng = random.Random(76)
    for i in range(3):
        corpus = _zipf_corpus(rng, 300)
        merges = ref._train(ref.initial_word_freqs(corpus), 60)
        seen = set(corpus.split())
        words = []
        while len(words) < 12:
            word = rng.choice(["un", "re", "", "pre"]) + rng.choice(STEMS) + rng.choice(ENDINGS + ["ers", "ings"])
            if word not in seen and word not in words:
                words.append(word)
        for word in words:
            _check_tokenize(bpe_tokenize, word, merges, namespace, f"bpe_tokenize({word!r}, merges of corpus {i})")


def bpe_tokenize_rank_order(bpe_tokenize, namespace=None):
    """Merges are applied by rank, not in one pass over the word and not by longest match."""
    _no_tokenizers(bpe_tokenize, "bpe_tokenize", namespace)
    cases = [
        ("bc bc bc bc abc abc ab", 4, ["abc", "abcd", "bcab", "ab"]),
        ("low low low low low lower lower newest newest newest newest newest newest widest widest widest",
         10, ["lowest", "newer", "wider", "slow", "owe"]),
        ("aab aab aab ab ab", 3, ["aab", "aaab", "aabab", "aa"]),
        ("xyz xyz yzx yzx yzx zx zx", 6, ["xyzx", "zxyz", "yzxyz"]),
    ]
    for corpus, n, words in cases:
        merges = ref._train(ref.initial_word_freqs(corpus), n)
        for word in words:
            _check_tokenize(bpe_tokenize, word, merges, namespace, f"bpe_tokenize({word!r}, {merges})")


def bpe_tokenize_edges(bpe_tokenize, namespace=None):
    """No merges, one-letter words, characters never seen in training; the result is a list."""
    _no_tokenizers(bpe_tokenize, "bpe_tokenize", namespace)
    merges = ref._train(ref.initial_word_freqs(CLASSIC), 12)
    with _graded(namespace, HELPERS):
        result = call("bpe_tokenize('low', merges)", bpe_tokenize, "low", merges)
    if not isinstance(result, list):
        raise AssertionError(f"bpe_tokenize('low', merges) should return a list of symbols, "
                             f"got {type(result).__name__}")
    for word, m in [("low", []), ("a", []), ("w", merges), ("zebra", merges), ("l0w!", merges), ("über", merges),
                    ("aaaa", [("a", "a")]), ("aaaaa", [("a", "a"), ("aa", "aa")])]:
        _check_tokenize(bpe_tokenize, word, m, namespace, f"bpe_tokenize({word!r}, {m if len(m) < 3 else 'merges'})")
