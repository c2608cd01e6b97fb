"""The synthetic English -> German corpus of notebook 08 (lib/translation_data.py)."""
import random
import re
from collections import Counter

import pytest

from lib.translation_data import (ADJECTIVES, NOUNS, NP, PP, VERBS, Clause, Sentence, describe, generate_pair,
                                  german_np, make_splits, render)


@pytest.fixture(scope="module")
def splits():
    return make_splits(n_train=4000, n_valid=300, n_test=300, seed=0)


def german_words(pairs):
    return Counter(w for _, de in pairs for w in de.split())


def test_generate_pair_is_deterministic_from_the_rng():
    a = [generate_pair(random.Random(7)) for _ in range(3)]
    assert a[0] == a[1] == a[2]
    rng1, rng2 = random.Random(1), random.Random(1)
    assert [generate_pair(rng1) for _ in range(50)] == [generate_pair(rng2) for _ in range(50)]
    en, de = generate_pair(random.Random(3))
    assert isinstance(en, str) and isinstance(de, str) and en.endswith(" .") and de.endswith(" .")


def test_splits_same_seed_same_corpus_other_seed_other_corpus(splits):
    again = make_splits(n_train=4000, n_valid=300, n_test=300, seed=0)
    assert again == splits
    other = make_splits(n_train=4000, n_valid=300, n_test=300, seed=1)
    assert other["test"] != splits["test"] and other["train"] != splits["train"]
    # the test split does not depend on the size of the training split
    assert make_splits(n_train=100, n_valid=300, n_test=300, seed=0)["test"] == splits["test"]


def test_split_sizes_and_disjointness(splits):
    assert set(splits) == {"train", "valid", "test"}
    assert [len(splits[k]) for k in ("train", "valid", "test")] == [4000, 300, 300]
    english = {k: {en for en, _ in v} for k, v in splits.items()}
    assert all(len(english[k]) == len(splits[k]) for k in splits)  # all pairs (even all English sides) distinct
    assert not english["train"] & english["valid"]
    assert not english["train"] & english["test"]
    assert not english["valid"] & english["test"]


def test_one_german_sentence_per_english_sentence():
    rng, seen = random.Random(0), {}
    for _ in range(20000):
        en, de = generate_pair(rng)
        assert seen.setdefault(en, de) == de, (en, de, seen[en])
    for v in VERBS.values():  # forms that could make an English sentence mean two things
        assert len({v.en, v.en_3sg, v.en_past}) == 3, v
    for n in NOUNS.values():
        assert n.en != n.en_pl and n.de[0].isupper() and n.de_pl[0].isupper(), n


def test_form_and_lengths(splits):
    lengths = Counter()
    for en, de in splits["train"]:
        assert en == en.lower() and en.endswith(" .") and de.endswith(" .")
        assert "  " not in en + de and en == en.strip() and de == de.strip()
        lengths[len(en.split())] += 1
        # lowercase, except German nouns
        nouns_de = {n.de for n in NOUNS.values()} | {n.de_pl for n in NOUNS.values()} | \
            {n.de_pl + "n" for n in NOUNS.values()}
        assert all(w.islower() or w in nouns_de or not w.isalpha() for w in de.split()), de
    assert min(lengths) == 4 and max(lengths) == 20
    assert sum(lengths[n] for n in range(4, 8)) > 400 and sum(lengths[n] for n in range(15, 21)) > 400


def test_every_article_form_occurs(splits):
    words = german_words(splits["train"])
    for article in ["der", "die", "das", "den", "dem", "ein", "eine", "einen", "einem", "einer"]:
        assert words[article] > 100, article
    for contraction in ["vom", "zum", "zur"]:  # von dem, zu dem, zu der
        assert words[contraction] > 3, contraction
    assert words["von"] and words["zu"]
    assert words["des"] == 0  # no genitive


def test_adjective_endings_occur(splits):
    words = german_words(splits["train"])
    for ending in ["e", "en", "er", "es"]:
        assert sum(c for w, c in words.items() if w in {a.de + ending for a in ADJECTIVES.values()}) > 50, ending
    de = " ".join(d for _, d in splits["train"])
    assert re.search(r"\bein [a-zäöü]+er [A-ZÄÖÜ]", de)  # ein großer Hund
    assert re.search(r"\bein [a-zäöü]+es [A-ZÄÖÜ]", de)  # ein großes Haus
    assert re.search(r"\beinen [a-zäöü]+en [A-ZÄÖÜ]", de)  # einen großen Hund
    assert re.search(r"\bdem [a-zäöü]+en [A-ZÄÖÜ]", de)  # dem großen Hund


def test_verb_final_subordinate_clauses(splits):
    finite = {f for v in VERBS.values() for f in (v.de, v.de_1sg, v.de_3sg)} | {
        "habe", "hat", "haben", "bin", "ist", "sind", "werde", "wird", "werden", "kann", "können"}
    counts = Counter()
    for en, de in splits["train"]:
        for conj in ("weil", "dass", "wenn", "als", "obwohl", "während"):
            m = re.search(rf"(?:^|, ){conj} ([^,.]*) [,.]", de)
            if m:
                counts[conj] += 1
                assert m.group(1).split()[-1] in finite, de  # the finite verb comes last
    assert all(counts[c] > 30 for c in ("weil", "dass", "wenn", "als", "obwohl", "während")), counts
    # a fronted subordinate clause puts the main verb before the subject
    assert sum(en.startswith(("because ", "when ", "if ")) for en, _ in splits["train"]) > 100


def test_time_adverbs_invert_and_plurals_agree(splits):
    fronted = [de for en, de in splits["train"] if en.startswith("today ")]
    assert len(fronted) > 30 and all(de.startswith("heute ") for de in fronted)
    assert any(en.startswith("the dogs ") for en, _ in splits["train"])
    for en, de in splits["train"]:
        if en.startswith("we "):
            assert de.split()[1] in {v.de for v in VERBS.values()} | {"haben", "sind", "werden", "können"}, de


def test_hand_built_sentences():
    dog, ball = NP("dog"), NP("ball")
    assert render(Clause(dog, "see", obj=ball)) == ("the dog sees the ball .", "der Hund sieht den Ball .")
    assert render(Sentence(Clause(NP("cat"), "sleep"), "because", Clause(dog, "see", obj=ball))) == (
        "the cat sleeps because the dog sees the ball .", "die Katze schläft , weil der Hund den Ball sieht .")
    assert render(Clause(NP("dog", det="a", adj="big"), "help", obj=NP("child", plural=True))) == (
        "a big dog helps the children .", "ein großer Hund hilft den Kindern .")
    assert render(Clause(NP(pronoun="we"), "give", "past", iobj=NP("woman"), obj=NP("book", det="a"),
                         adverb="yesterday", front=True)) == (
        "yesterday we gave the woman a book .", "gestern haben wir der Frau ein Buch gegeben .")
    assert render(Sentence(Clause(NP(pronoun="they"), "laugh", "past"), "when",
                           Clause(NP("girl", plural=True), "see", "past", obj=NP("horse")), sub_first=True)) == (
        "when the girls saw the horse , they laughed .",
        "als die Mädchen das Pferd gesehen haben , haben sie gelacht .")
    assert render(Clause(NP("man"), "say", obj=None, that=Clause(NP("dog", det=None, plural=True), "run", "future",
                                                                   pp=PP("to", NP("house"))))) == (
        "the man says that dogs will run to the house .", "der Mann sagt , dass Hunde zum Haus laufen werden .")
    assert render(Clause(NP(pronoun="i"), "play", adverb="often", pp=PP("with", NP("cat", adj="tired")))) == (
        "i often play with the tired cat .", "ich spiele oft mit der müden Katze .")
    assert render(Sentence(Clause(NP(pronoun="she"), "sleep", "can"), "but",
                           Clause(NP(pronoun="he"), "follow", "past", obj=NP("doctor", adj="old")))) == (
        "she can sleep , but he followed the old doctor .", "sie kann schlafen , aber er ist dem alten Arzt gefolgt .")


@pytest.mark.parametrize("det, case, expected", [
    ("the", "nom", "der große Hund"), ("the", "acc", "den großen Hund"), ("the", "dat", "dem großen Hund"),
    ("a", "nom", "ein großer Hund"), ("a", "acc", "einen großen Hund"), ("a", "dat", "einem großen Hund"),
])
def test_german_noun_phrases_masculine(det, case, expected):
    assert " ".join(german_np(NP("dog", det=det, adj="big"), case)) == expected


def test_german_noun_phrases_other_genders_and_plural():
    assert german_np(NP("house", det="a", adj="big"), "nom") == ["ein", "großes", "Haus"]
    assert german_np(NP("cat", det="a", adj="small"), "dat") == ["einer", "kleinen", "Katze"]
    assert german_np(NP("dog", det=None, adj="big", plural=True), "acc") == ["große", "Hunde"]
    assert german_np(NP("dog", det=None, adj="big", plural=True), "dat") == ["großen", "Hunden"]
    assert german_np(NP("car", det="the", plural=True), "dat") == ["den", "Autos"]
    with pytest.raises(ValueError):
        german_np(NP("dog", det="a", plural=True), "nom")


def test_describe_lists_the_features():
    text = describe()
    for word in ("gender", "case", "adjective", "subordinate", "weil", "nouns"):
        assert word in text


def test_max_words_gives_shorter_sentences():
    short = make_splits(n_train=300, n_valid=20, n_test=20, seed=0, max_words=8)
    assert all(4 <= len(en.split()) <= 8 for pairs in short.values() for en, _ in pairs)
    assert max(len(en.split()) for en, _ in generate_pair_many(max_words=6)) <= 6


def generate_pair_many(max_words, n=100):
    rng = random.Random(0)
    return [generate_pair(rng, max_words) for _ in range(n)]
