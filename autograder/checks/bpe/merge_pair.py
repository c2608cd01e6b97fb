"""merge_pair(pair, word_freqs): a new dict, every occurrence of the pair merged left to right, counts kept."""
import random

from lib import bpe as ref

from . import CLASSIC, EOW, diagnose, kind, plain_items, show_dict
from .corpora import random_word_freqs

MUTATED = "changed the dict it was given (it must not mutate its argument): build and return a new dict"
OVERWRITTEN = ("two words that become equal after the merge must add up their counts (new[w] = new.get(w, 0) + freq); "
               "one overwrote the other")


def _hints(pair, word_freqs):
    """What the usual mistakes output (counts overwritten rather than added are found by ``_one_count_kept``,
    whatever order the words come in)."""
    a, b = pair
    replaced, first_only, overlap, as_pair = {}, {}, {}, {}
    for word, freq in word_freqs.items():
        key = _merge_as_pair(word, pair)
        as_pair[key] = as_pair.get(key, 0) + freq
        key = tuple(" ".join(word).replace(f"{a} {b}", a + b).split(" "))
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
    return {
        "the pair was merged with a string replace on the joined word: that also matches inside symbols, e.g. "
        "('b', 'c') inside ('ab', 'c'). Compare symbols, word[i] == a and word[i + 1] == b": replaced,
        "only the first occurrence in each word is merged: merge every occurrence, left to right": first_only,
        "overlapping occurrences are merged from the right: ('a','a','a') must give ('aa', 'a'). Scan left to "
        "right, and after merging at i continue at i + 2": overlap,
        "the new symbol is the pair (a, b): it must be one string, a + b": as_pair,
    }


def _merge_as_pair(word, pair):
    """The word merged with the pair itself, not a + b, as the new symbol."""
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(pair)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def _word_freqs(result, what):
    if not isinstance(result, dict):
        raise AssertionError(f"{what} should return a dict {{tuple of symbols: count}}, got {kind(result)}")
    out = {}
    for key, n in plain_items(result.items(), what):
        if not isinstance(key, tuple):
            raise AssertionError(f"{what}: the keys must be tuples of symbols (strings), got a key {key!r}")
        out[key] = n
    return out


def _one_count_kept(actual, pair, word_freqs) -> bool:
    """True when ``actual`` is the merge but for words that two or more words became, each of which holds the count
    of one of them, not their sum: whichever count came last overwrote the others (in any order)."""
    sources = {}
    for word, freq in word_freqs.items():
        sources.setdefault(ref._merge_word(word, pair), []).append(freq)
    if set(actual) != set(sources):
        return False
    wrong = [w for w, freqs in sources.items() if actual[w] != sum(freqs)]
    return bool(wrong) and all(len(sources[w]) > 1 and actual[w] in sources[w] for w in wrong)


def _check(k, pair, word_freqs, what):
    trace = k.trace(what, k.student("merge_pair"), pair, word_freqs, args_after=True)
    if trace.args[1] != word_freqs:
        raise AssertionError(f"{what} {MUTATED}")
    actual = _word_freqs(trace.value, what)
    if _one_count_kept(actual, pair, word_freqs):
        raise AssertionError(f"{what} is wrong: {OVERWRITTEN}")
    diagnose(actual, ref._merge(pair, word_freqs), lambda: _hints(pair, word_freqs), what, show_dict)


def merge_pair_basic(k):
    """Every occurrence of the pair is merged in every word, counts kept, on words part-way through training."""
    rng = random.Random(72)
    _check(k, ("e", "s"), ref.initial_word_freqs(CLASSIC),
           "merge_pair(('e', 's'), word_freqs of low/lower/newest/widest)")
    for n in (0, 3, 12):
        word_freqs = random_word_freqs(rng, n)
        counts = ref._counts(word_freqs)
        for pair in sorted(counts, key=lambda p: (-counts[p], p))[:3] + [min(counts, key=lambda p: (counts[p], p))]:
            _check(k, pair, word_freqs, f"merge_pair({pair}, ...) after {n} merges")


def merge_pair_edges(k):
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
        _check(k, pair, word_freqs, f"merge_pair({pair}, {word_freqs})")


def merge_pair_new_dict(k):
    """The input is left unchanged (it may be used again) and the result is a new dict, even when nothing
    is merged."""
    word_freqs = ref.initial_word_freqs(CLASSIC)
    helper = k.trusted("autograder.checks.bpe.same_object").attr("same_object")
    for pair in [("l", "o"), ("x", "y")]:
        what = f"merge_pair({pair}, word_freqs)"
        trace = k.trace(what, helper, k.student("merge_pair"), pair, word_freqs, args_after=True)
        if trace.args[2] != word_freqs:
            raise AssertionError(f"{what} {MUTATED}")
        result, same = trace.value
        if same is True:
            raise AssertionError(f"{what} returned the same dict object it was given: return a new dict "
                                 f"(even when the pair does not occur), so that changing one cannot change the other")
        diagnose(_word_freqs(result, what), ref._merge(pair, word_freqs), {}, what, show_dict)
