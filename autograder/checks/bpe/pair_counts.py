"""pair_counts(word_freqs): a Counter of adjacent pairs inside words, weighted by word frequency."""
import random
from collections import Counter

from lib import bpe as ref

from . import EOW, diagnose, kind, plain_items, show_dict
from .corpora import random_word_freqs


def _hints(word_freqs):
    unweighted, once_per_word, short, apart = Counter(), Counter(), Counter(), Counter()
    for word, freq in word_freqs.items():
        unweighted.update(zip(word, word[1:]))
        for pair in set(zip(word, word[1:])):
            once_per_word[pair] += freq
        for pair in zip(word[:-1], word[1:-1]):
            short[pair] += freq
        last = None  # (pair, position) last counted: in a run of one symbol, the next pair overlaps it
        for i, pair in enumerate(zip(word, word[1:])):
            if pair[0] == pair[1] and last == (pair, i - 1):
                continue
            apart[pair] += freq
            last = (pair, i)
    flat = [s for word, freq in word_freqs.items() for _ in range(freq) for s in word]
    return {
        "each word is counted once; weight every pair by the word's frequency (counts[pair] += freq)":
            dict(unweighted),
        "a pair that occurs twice in a word is counted once: count every position, so ('a', 'a', 'a') holds "
        "('a', 'a') twice (overlapping pairs all count)": dict(once_per_word),
        "in a run of one repeated symbol the pairs are counted without overlap (as often as they could be "
        "merged): ('a', 'a', 'a') holds ('a', 'a') twice, at positions 0 and 1; count every position":
            dict(apart),
        "pairs are counted across word boundaries (the last symbol of one word with the first of the next): "
        "count the pairs inside each word only": dict(Counter(zip(flat, flat[1:]))),
        "the last pair of each word is missing: a word of n symbols has n - 1 pairs, at positions 0 to n - 2 "
        "(range(len(word) - 1), or zip(word, word[1:]))": dict(short),
    }


def _check(k, word_freqs, what, need_counter=False):
    result = k.call(what, k.student("pair_counts"), word_freqs)
    if need_counter and not isinstance(result, Counter):
        raise AssertionError(f"{what} should return a collections.Counter, got {kind(result)}: "
                             f"build it with Counter() (train_bpe relies on it)")
    if not isinstance(result, dict):
        raise AssertionError(f"{what} should return a collections.Counter, got {kind(result)}")
    actual = {key: n for key, n in plain_items(result.items(), what) if n != 0}
    diagnose(actual, dict(ref._counts(word_freqs)), lambda: _hints(word_freqs), what, show_dict)


def pair_counts_weighted(k):
    """A Counter of adjacent pairs, each weighted by the frequency of its word, on several word lists."""
    rng = random.Random(71)
    _check(k, {("l", "o", "w", EOW): 5, ("l", "o", "w", "e", "r", EOW): 2},
           "pair_counts({('l','o','w','</w>'): 5, ('l','o','w','e','r','</w>'): 2})", need_counter=True)
    for n in (0, 5, 20):
        word_freqs = random_word_freqs(rng, n)
        _check(k, word_freqs, f"pair_counts on the words of a corpus after {n} merges ({len(word_freqs)} words)")


def pair_counts_within_words(k):
    """Overlapping pairs all count, no pair crosses two words, one-symbol words have no pairs."""
    cases = [
        ({("a", "a", "a", "a"): 3, ("b", "a"): 2}, "pair_counts({('a','a','a','a'): 3, ('b','a'): 2})"),
        ({("a", "a", "a"): 1}, "pair_counts({('a','a','a'): 1})"),
        ({("a", "b"): 2, ("c", "d"): 1}, "pair_counts({('a','b'): 2, ('c','d'): 1})"),
        ({("ab", "c"): 2, ("a", "bc"): 3, ("abc",): 9}, "pair_counts({('ab','c'): 2, ('a','bc'): 3, ('abc',): 9})"),
        ({("x",): 4, ("y", EOW): 1}, "pair_counts({('x',): 4, ('y','</w>'): 1})"),
        ({}, "pair_counts({})"),
    ]
    for word_freqs, what in cases:
        _check(k, word_freqs, what)
