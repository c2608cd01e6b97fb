"""Reference solution of notebook 07: byte-pair encoding (BPE), from scratch.

The contract (``COURSE_DESIGN.md``, section 3), with every choice spelled out:

- a word is a tuple of symbols (strings); ``word_freqs`` maps such tuples to
  how often the word occurs;
- a word of the corpus starts as its characters followed by the end-of-word
  marker ``"</w>"``, a symbol of its own: ``"low"`` -> ``('l', 'o', 'w', '</w>')``.
  The marker can be merged like any other symbol: ``('w', '</w>')`` -> ``'w</w>'``;
- merging the pair ``(a, b)`` makes the symbol ``a + b`` (the two strings
  concatenated). Merges happen on symbol boundaries, never inside a symbol,
  left to right without overlaps: ``('a', 'a', 'a')`` -> ``('aa', 'a')``;
- training merges, at each step, the pair with the highest count (counts are
  weighted by word frequency and never cross a word boundary); ties go to the
  lexicographically smallest pair (Python's ``min`` over tuples of strings);
  training stops early when no pair is left (every word is a single symbol),
  so it may return fewer than ``num_merges`` merges; an empty corpus gives ``[]``;
- a word is tokenized by starting from its characters and ``"</w>"`` and
  merging, again and again, the adjacent pair that was learned first (lowest
  rank) until no learned pair is left. This is the rule of Sennrich et al.
  (2016) and of Hugging Face ``tokenizers``; for merges learned by
  ``train_bpe`` it gives the same result as applying the merges one after the
  other in training order.
"""
from collections import Counter

from lib.guard import reference

EOW = "</w>"


def _counts(word_freqs):
    counts = Counter()
    for word, freq in word_freqs.items():
        for pair in zip(word, word[1:]):
            counts[pair] += freq
    return counts


def _merge_word(word, pair):
    a, b = pair
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
            out.append(a + b)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def _merge(pair, word_freqs):
    merged = {}
    for word, freq in word_freqs.items():
        new = _merge_word(word, pair)
        merged[new] = merged.get(new, 0) + freq
    return merged


def _train(word_freqs, num_merges):
    merges = []
    for _ in range(num_merges):
        counts = _counts(word_freqs)
        candidates = [(-count, pair) for pair, count in counts.items() if count > 0]
        if not candidates:
            break
        _, best = min(candidates)
        merges.append(best)
        word_freqs = _merge(best, word_freqs)
    return merges


def _tokenize(word, merges):
    ranks = {}
    for rank, pair in enumerate(merges):
        ranks.setdefault(tuple(pair), rank)
    symbols = tuple(word) + (EOW,)
    while len(symbols) > 1:
        present = [(ranks[p], p) for p in zip(symbols, symbols[1:]) if p in ranks]
        if not present:
            break
        symbols = _merge_word(symbols, min(present)[1])
    return list(symbols)


def initial_word_freqs(corpus: str) -> dict:
    """{('l', 'o', 'w', '</w>'): count, ...}: the words of ``corpus`` (split on whitespace) as
    characters plus the end-of-word marker, with how often each occurs."""
    return dict(Counter(tuple(word) + (EOW,) for word in corpus.split()))


@reference
def pair_counts(word_freqs: dict) -> Counter:
    """Counter {(a, b): n}: how often symbol b follows symbol a inside a word, each word
    counted as often as it occurs. Overlapping pairs all count: ('a', 'a', 'a') holds
    ('a', 'a') twice. Pairs never span two words."""
    return _counts(word_freqs)


@reference
def merge_pair(pair: tuple, word_freqs: dict) -> dict:
    """A new dict in which every occurrence of the adjacent symbols ``pair = (a, b)`` is
    replaced by the symbol a + b, scanning each word left to right; counts are kept (and
    added up if two words become equal). ``word_freqs`` is not changed."""
    return _merge(tuple(pair), word_freqs)


@reference
def train_bpe(corpus: str, num_merges: int) -> list:
    """The list of (at most) ``num_merges`` merges, in the order they were learned, from
    the words of ``corpus`` (split on whitespace, each ending in '</w>')."""
    return _train(initial_word_freqs(corpus), num_merges)


@reference
def bpe_tokenize(word: str, merges) -> list:
    """The symbols of ``word``: its characters and '</w>', merged by rank (the
    earliest-learned adjacent pair first, all its occurrences left to right) until no
    learned pair is left."""
    return _tokenize(word, merges)
