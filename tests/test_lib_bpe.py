"""The BPE reference of notebook 07 (lib/bpe.py): hand-worked examples, the
contract's edge cases, and agreement with Hugging Face ``tokenizers`` where the
two must agree (corpora without ties, with the end-of-word marker given to
``tokenizers`` as a character of its own)."""
import json
import random
from collections import Counter

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from lib import bpe
from lib.guard import ForbiddenCall, forbid, trusted

CLASSIC = " ".join(["low"] * 5 + ["lower"] * 2 + ["newest"] * 6 + ["widest"] * 3)


def test_pair_counts_weighted_overlapping_and_within_words():
    counts = bpe.pair_counts({("a", "a", "a"): 2, ("a", "b"): 3, ("b",): 7})
    assert isinstance(counts, Counter)
    assert counts == Counter({("a", "a"): 4, ("a", "b"): 3})  # no ('a', 'a') across words, no ('b',) pairs
    assert bpe.pair_counts({}) == Counter()


def test_merge_pair_left_to_right_on_symbol_boundaries_without_mutation():
    word_freqs = {("a", "a", "a"): 1, ("a", "a", "a", "a"): 2, ("ab", "c"): 3, ("a", "bc"): 4}
    copy = dict(word_freqs)
    merged = bpe.merge_pair(("a", "a"), word_freqs)
    assert merged == {("aa", "a"): 1, ("aa", "aa"): 2, ("ab", "c"): 3, ("a", "bc"): 4}
    assert word_freqs == copy and merged is not word_freqs
    assert bpe.merge_pair(("ab", "c"), word_freqs)[("abc",)] == 3            # 'a','bc' is another pair
    assert bpe.merge_pair(("a", "b"), {("a", "b", "c"): 1, ("ab", "c"): 2}) == {("ab", "c"): 3}  # counts add up


def test_train_bpe_classic_example():
    merges = bpe.train_bpe(CLASSIC, 10)
    # counts: (e,s) (s,t) (t,</w>) 9 each: the smallest pair wins the tie, and so on
    # then (l,o) and (o,w) 7 each; (e,w) (ew,est</w>) and (n,ew...) 6 each, the smallest first
    assert merges == [("e", "s"), ("es", "t"), ("est", "</w>"), ("l", "o"), ("lo", "w"),
                      ("e", "w"), ("ew", "est</w>"), ("n", "ewest</w>"), ("low", "</w>"), ("d", "est</w>")]
    assert bpe.bpe_tokenize("lowest", merges) == ["low", "est</w>"]
    assert bpe.bpe_tokenize("newer", merges) == ["n", "ew", "e", "r", "</w>"]
    assert bpe.bpe_tokenize("low", merges) == ["low</w>"]


def test_train_bpe_edges():
    assert bpe.train_bpe("", 5) == [] and bpe.train_bpe("  \n\t ", 5) == []
    assert bpe.train_bpe(CLASSIC, 0) == []
    assert bpe.train_bpe("a b", 10) == [("a", "</w>"), ("b", "</w>")]     # stops when no pair is left
    assert bpe.train_bpe("ab\nab  cd", 1) == [("a", "b")]                  # any whitespace splits words
    assert bpe.train_bpe("aaa", 2) == [("a", "a"), ("a", "</w>")]            # (a,a) counts 2; then a tie
    assert bpe.train_bpe("ba ab", 1) == [("a", "</w>")]                    # tie: the smallest pair


def test_bpe_tokenize_by_rank_not_in_one_pass_nor_by_longest_match():
    merges = [("b", "c"), ("a", "b"), ("c", "</w>"), ("a", "bc")]
    # by rank: b+c first -> a bc </w> -> abc </w>; a single left-to-right pass would take a+b first
    assert bpe.bpe_tokenize("abc", merges) == ["abc", "</w>"]
    assert bpe.bpe_tokenize("xyz", merges) == ["x", "y", "z", "</w>"]       # unseen characters stay
    assert bpe.bpe_tokenize("aaa", [("a", "a")]) == ["aa", "a", "</w>"]
    assert bpe.bpe_tokenize("ab", [["a", "b"]]) == ["ab", "</w>"]           # merges as lists work too


def _in_order(word, merges):
    symbols = tuple(word) + (bpe.EOW,)
    for pair in merges:
        symbols = bpe._merge_word(symbols, tuple(pair))
    return list(symbols)


def _random_corpus(rng, alphabet, n_words, max_len):
    return " ".join("".join(rng.choice(alphabet) for _ in range(rng.randint(1, max_len))) for _ in range(n_words))


def test_tokenize_by_rank_equals_merges_in_training_order():
    rng = random.Random(0)
    for trial in range(300):
        alphabet = "abcd"[: 2 + trial % 3]
        merges = bpe.train_bpe(_random_corpus(rng, alphabet, rng.randint(1, 12), 6), rng.randint(1, 25))
        for _ in range(10):
            word = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 9)))
            assert bpe.bpe_tokenize(word, merges) == _in_order(word, merges), (merges, word)


def test_tokenizing_a_training_word_gives_its_training_segmentation():
    rng = random.Random(1)
    corpus = _random_corpus(rng, "abcde", 60, 7)
    word_freqs = bpe.initial_word_freqs(corpus)
    merges = bpe.train_bpe(corpus, 40)
    for pair in merges:
        word_freqs = bpe.merge_pair(pair, word_freqs)
    for symbols in word_freqs:
        assert bpe.bpe_tokenize("".join(symbols)[: -len(bpe.EOW)], merges) == list(symbols)


def test_references_are_guarded():
    with forbid(references=("train_bpe", "bpe_tokenize")):
        with pytest.raises(ForbiddenCall):
            bpe.train_bpe("ab", 1)
        assert trusted(bpe.train_bpe)("ab", 1) == [("a", "b")]


# --- agreement with Hugging Face tokenizers -----------------------------------

MARK = "<"  # the marker as one character, sorting like "</w>" against lowercase letters


def _hf_train(corpus, num_merges):
    """tokenizers' BPE on the words of corpus, each followed by MARK (a character of its own)."""
    text = " ".join(w + MARK for w in corpus.split())
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    alphabet = set(text) - {" "}
    trainer = trainers.BpeTrainer(vocab_size=len(alphabet) + num_merges, show_progress=False)
    tok.train_from_iterator([text], trainer)
    merges = json.loads(tok.to_str())["model"]["merges"]
    fix = lambda s: s.replace(MARK, bpe.EOW)  # noqa: E731
    return tok, [(fix(a), fix(b)) for a, b in (m.split(" ") if isinstance(m, str) else m for m in merges)]


def _has_tie(corpus, num_merges):
    word_freqs = bpe.initial_word_freqs(corpus)
    for pair in bpe.train_bpe(corpus, num_merges):
        top = sorted(bpe.pair_counts(word_freqs).values(), reverse=True)
        if len(top) > 1 and top[0] == top[1]:
            return True
        word_freqs = bpe.merge_pair(pair, word_freqs)
    return False


def _tie_free_corpora(n):
    rng = random.Random(7)
    found = []
    while len(found) < n:
        words = [("".join(rng.choice("abcdefg") for _ in range(rng.randint(1, 6)))) for _ in range(rng.randint(3, 8))]
        corpus = " ".join(w for w in words for _ in range(rng.randint(1, 40)))
        if not _has_tie(corpus, 12):
            found.append(corpus)
    return found


@pytest.mark.parametrize("corpus", _tie_free_corpora(15))
def test_same_merges_and_tokens_as_tokenizers_without_ties(corpus):
    tok, hf_merges = _hf_train(corpus, 12)
    merges = bpe.train_bpe(corpus, 12)
    assert merges == hf_merges
    rng = random.Random(len(corpus))
    alphabet = sorted(set(corpus) - {" "})    # tokenizers drops characters it never saw
    for _ in range(20):
        word = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8)))
        hf_tokens = [t.replace(MARK, bpe.EOW) for t in tok.encode(word + MARK).tokens]
        assert bpe.bpe_tokenize(word, merges) == hf_tokens, word


def test_tokenizers_with_its_own_suffix_glues_the_marker_to_the_last_character():
    """Why notebook 07's merges differ from tokenizers' BpeTrainer(end_of_word_suffix='</w>'):
    tokenizers starts from ('l', 'o', 'w</w>'), so a merge ('w', '</w>') never happens."""
    tok = Tokenizer(models.BPE(end_of_word_suffix="</w>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.BpeTrainer(vocab_size=30, end_of_word_suffix="</w>", show_progress=False)
    tok.train_from_iterator([CLASSIC], trainer)
    model = json.loads(tok.to_str())["model"]
    assert "w</w>" in model["vocab"] and "</w>" not in model["vocab"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    assert ("e", "s") == merges[0] and not any(b == "</w>" for _, b in merges)
    assert tok.encode("zebra").tokens == ["e", "r"]   # characters it never saw are dropped, not split
