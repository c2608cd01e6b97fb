"""Corpora the student never saw: made-up English-like words with Zipf-like frequencies, random letters."""
from lib import bpe as ref

STEMS = ["talk", "walk", "jump", "play", "work", "read", "bake", "hope", "sing", "kind", "fast", "slow",
         "care", "help", "paint", "light", "dark", "cold", "warm", "teach", "build", "open", "clean", "rain"]
ENDINGS = ["", "", "s", "ed", "ing", "er", "est", "ly", "ness", "ful", "less", "able"]


def zipf_corpus(rng, n_words, n_types=60):
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


def letters_corpus(rng, alphabet, n_words, max_len, sep=" "):
    return sep.join("".join(rng.choice(alphabet) for _ in range(rng.randint(1, max_len))) for _ in range(n_words))


def random_word_freqs(rng, n):
    """Word frequencies part-way through training (after ``n`` merges): symbols of several characters."""
    word_freqs = ref.initial_word_freqs(zipf_corpus(rng, 120, 30))
    for pair in ref._train(word_freqs, n):
        word_freqs = ref._merge(pair, word_freqs)
    return word_freqs
