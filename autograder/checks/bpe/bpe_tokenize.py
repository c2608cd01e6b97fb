"""bpe_tokenize(word, merges): the word's characters and '</w>', merged by rank until no learned pair is left."""
import random

from lib import bpe as ref

from ..common import plain
from . import CLASSIC, EOW, diagnose_all, kind, no_tokenizers, trusted_helpers
from .corpora import ENDINGS, STEMS, zipf_corpus


def _hints(word, merges):
    ranks = {tuple(p): i for i, p in reversed(list(enumerate(merges)))}
    vocab = {s for p in merges for s in p} | {a + b for a, b in merges}
    one_pass = []
    for s in list(word) + [EOW]:  # one left-to-right scan, merging any known pair when it is seen
        if one_pass and (one_pass[-1], s) in ranks:
            one_pass[-1] += s
        else:
            one_pass.append(s)
    passes, merged = list(word) + [EOW], True
    while merged:  # left-to-right passes that merge each known pair met (and skip its second symbol), repeated
        merged, out, i = False, [], 0
        while i < len(passes):
            if i + 1 < len(passes) and (passes[i], passes[i + 1]) in ranks:
                out.append(passes[i] + passes[i + 1])
                merged, i = True, i + 2
            else:
                out.append(passes[i])
                i += 1
        passes = out
    tokens = {a + b: i for i, (a, b) in reversed(list(enumerate(merges)))}
    spelled = list(word) + [EOW]
    while True:  # two symbols merged when together they spell a learned token, looked up by the string
        present = [(tokens[x + y], i) for i, (x, y) in enumerate(zip(spelled, spelled[1:])) if x + y in tokens]
        if not present:
            break
        i = min(present)[1]
        spelled[i:i + 2] = [spelled[i] + spelled[i + 1]]
    longest, rest = [], word + EOW
    while rest:  # greedy longest known prefix, WordPiece style
        for end in range(len(rest), 0, -1):
            if rest[:end] in vocab or end == 1 or rest[:end] == EOW:
                break
        longest.append(rest[:end])
        rest = rest[end:]
    no_marker = tuple(word)
    glued = tuple(word[:-1]) + (word[-1] + EOW,) if word else ()
    for p in merges:
        no_marker, glued = ref._merge_word(no_marker, tuple(p)), ref._merge_word(glued, tuple(p))
    reverse = tuple(word) + (EOW,)
    for p in reversed(merges):
        reverse = ref._merge_word(reverse, tuple(p))
    latest = tuple(word) + (EOW,)
    while True:  # the present pair of highest rank first
        present = [(ranks[p], p) for p in zip(latest, latest[1:]) if p in ranks]
        if not present:
            break
        latest = ref._merge_word(latest, max(present)[1])
    return {
        "the pairs are merged in one left-to-right pass over the word, whatever their rank: merge the pair "
        "that was learned FIRST (lowest rank in merges) wherever it is, then the next, until none is left":
            one_pass,
        "the word is cut greedily into the longest known pieces from the left; BPE applies the merges by rank "
        "(the earliest-learned pair first), which can give other pieces": longest,
        "the end-of-word marker is missing: tokenize the characters of the word followed by '</w>'": list(no_marker),
        "the end-of-word marker is glued to the last character ('w</w>'): start from the characters and a "
        "separate '</w>' symbol": list(glued),
        "the merges are applied in reverse order: the earliest-learned (lowest rank) pair comes first": list(reverse),
        "the pair learned last (highest rank) is merged first: take the present pair with the LOWEST rank, "
        "min(...), the one learned first": list(latest),
        "the word is merged in left-to-right passes that join whatever known pair comes first, repeated until "
        "none is left, whatever their rank: merge the pair that was learned FIRST (lowest rank in merges) wherever "
        "it is, then the next, until none is left": passes,  # last: where it gives what one above does, that one is named
        "two symbols are merged because together they spell a learned token, though they are not the pair it was "
        "learned from: look the pairs up as pairs (a, b) in merges, not by the string a + b": spelled,
    }


def _tokenize(k, word, merges, what):
    return k.call(what, k.student("bpe_tokenize"), word, merges,
                  inject=trusted_helpers(k, "pair_counts", "merge_pair", "train_bpe"))


def _symbols(result, what):
    if not isinstance(result, (list, tuple)):
        raise AssertionError(f"{what} should return a list of symbols (strings), got {kind(result)}")
    symbols = plain(list(result), what)
    if not all(isinstance(s, str) for s in symbols):
        raise AssertionError(f"{what} should return a list of strings, got {symbols!r}")
    return symbols


def _check(k, probes):
    """Tokenize every (word, merges, what) of ``probes``, then fail at the first wrong answer, naming the one
    mistake that gives every answer (see ``diagnose_all``)."""
    cases = []
    for word, merges, what in probes:
        try:
            symbols = _symbols(_tokenize(k, word, merges, what), what)
        except AssertionError:
            if any(actual != expected for actual, expected, _, _ in cases):
                break  # an earlier answer is wrong: report that one
            raise
        cases.append((symbols, ref._tokenize(word, merges), lambda w=word, m=merges: _hints(w, m), what))
    diagnose_all(cases, _difference)


def _difference(actual, expected) -> str:
    said = f"got {actual}, expected {expected}"
    if any(s.endswith(EOW) for s in expected) and not any(EOW in s for s in actual):
        said += (f": the end-of-word marker '{EOW}' is missing from the pieces (stripped, or never added). Keep it "
                 f"as the word's last symbol, so that the last piece ends with '{EOW}'")
    return said


def bpe_tokenize_unseen(k):
    """Words never seen in training, with merges learned on unseen corpora, equal the reference."""
    no_tokenizers(k, "bpe_tokenize")
    rng = random.Random(76)
    probes = []
    for i in range(3):
        corpus = zipf_corpus(rng, 300)
        merges = ref._train(ref.initial_word_freqs(corpus), 60)
        seen = set(corpus.split())
        words = []
        while len(words) < 12:
            word = rng.choice(["un", "re", "", "pre"]) + rng.choice(STEMS) + rng.choice(ENDINGS + ["ers", "ings"])
            if word not in seen and word not in words:
                words.append(word)
        probes += [(word, merges, f"bpe_tokenize({word!r}, merges of corpus {i})") for word in words]
    _check(k, probes)


def bpe_tokenize_rank_order(k):
    """Merges are applied by rank, not in one pass over the word and not by longest match."""
    no_tokenizers(k, "bpe_tokenize")
    cases = [
        ("bc bc bc bc abc abc ab", 4, ["abc", "abcd", "bcab", "ab"]),
        ("low low low low low lower lower newest newest newest newest newest newest widest widest widest",
         10, ["lowest", "newer", "wider", "slow", "owe"]),
        ("aab aab aab ab ab", 3, ["aab", "aaab", "aabab", "aa"]),
        ("xyz xyz yzx yzx yzx zx zx", 6, ["xyzx", "zxyz", "yzxyz"]),
        ("cabd cb bc bdab cd ddcdd", 7, ["cabcbd"]),  # left-to-right passes and the latest pair first differ here
    ]
    probes = []
    for corpus, n, words in cases:
        merges = ref._train(ref.initial_word_freqs(corpus), n)
        probes += [(word, merges, f"bpe_tokenize({word!r}, {merges})") for word in words]
    _check(k, probes)


def bpe_tokenize_edges(k):
    """No merges, one-letter words, characters never seen in training, runs of one letter (where the pairs
    overlap and the order of the merges shows), symbols that spell a learned token but are not its pair; the result
    is a list."""
    no_tokenizers(k, "bpe_tokenize")
    merges = ref._train(ref.initial_word_freqs(CLASSIC), 12)
    result = _tokenize(k, "low", merges, "bpe_tokenize('low', merges)")
    if not isinstance(result, list):
        raise AssertionError(f"bpe_tokenize('low', merges) should return a list of symbols, got {kind(result)}")
    _check(k, [(word, m, f"bpe_tokenize({word!r}, {m if len(m) < 3 else 'merges'})")
               for word, m in [("low", []), ("a", []), ("w", merges), ("zebra", merges), ("l0w!", merges),
                               ("über", merges), ("aaaa", [("a", "a")]), ("aaaaa", [("a", "a"), ("aa", "aa")]),
                               ("aaa", [("a", "a"), ("aa", "a")]), ("aaaa", [("a", "a"), ("aa", "a")]),
                               ("bbb", [("b", "b"), ("b", "bb")])]])
