"""A synthetic English -> German parallel corpus (notebook 08), no download.

Sentences come from a small grammar and lexicon (55 nouns, 37 verbs,
16 adjectives), deterministically from a seed. Every English sentence has
exactly one German translation: the rules below decide everything, there are
no synonyms on the German side. The German needs what makes translation need
attention:

- gender and case: der/die/das, den/dem, ein/eine/einen/einem/einer; the
  subject is nominative, the direct object accusative, the indirect object and
  the objects of dative verbs (helfen, folgen, danken, antworten) dative;
- prepositions: mit, von, zu (dative; von dem -> vom, zu dem -> zum,
  zu der -> zur), für, ohne (accusative);
- adjective endings that depend on article, gender, case and number:
  der große Hund / den großen Hund / dem großen Hund / ein großer Hund /
  ein großes Haus / große Hunde / mit großen Hunden;
- plural subjects and pronouns (i, he, she, we, they) with verb agreement:
  ich sehe, er sieht, wir sehen; dative plural nouns take -n (den Kindern);
- verb second: "today the dog sees the ball" -> "heute sieht der Hund den Ball";
  a fronted subordinate clause also puts the verb before the subject;
- tenses that split the verb: English past -> German perfect (hat ... gesehen,
  ist ... gelaufen), "will" -> wird ... sehen, "can" -> kann ... sehen;
- verb-final subordinate clauses after because/weil, although/obwohl,
  while/während, if/wenn, when/wenn (present) or als (past), and that/dass
  (after says, thinks, knows, believes): "the cat sleeps because the dog
  saw the ball" -> "die Katze schläft , weil der Hund den Ball gesehen hat";
- adverbs of frequency (often -> oft) that move after the German verb:
  "the dog often sees the ball" -> "der Hund sieht oft den Ball";
- clauses joined by and/und and but/aber.

Form: lowercase, except that German nouns are capitalized (as in German); words
and punctuation are separated by single spaces, a sentence ends with " .", and
German puts a " , " before every subordinate clause (and after a fronted one,
as English does). English sentences have 4 to 20 words (punctuation counted).
No genitive ("des" never occurs).

Examples (built by hand in tests/test_lib_translation_data.py)::

    the dog sees the ball .              der Hund sieht den Ball .
    a big dog helps the children .       ein großer Hund hilft den Kindern .
    i often play with the tired cat .    ich spiele oft mit der müden Katze .
    yesterday we gave the woman a book . gestern haben wir der Frau ein Buch gegeben .
    the man says that dogs will run to the house .
        der Mann sagt , dass Hunde zum Haus laufen werden .
    when the girls saw the horse , they laughed .
        als die Mädchen das Pferd gesehen haben , haben sie gelacht .

Build a sentence by hand with ``Sentence``, ``Clause``, ``NP`` and ``PP`` and
turn it into the pair with ``render``; ``sample_sentence`` draws one at random;
``describe()`` returns this text and the lexicon's size.
"""
import random
from dataclasses import dataclass, replace
from typing import Optional

# --- lexicon -------------------------------------------------------------------

# english singular, english plural, german singular, german plural, gender, kind
# (person, animal: may be subjects; thing, food, text, building: only objects).
_NOUNS = """
man men Mann Männer m person
woman women Frau Frauen f person
child children Kind Kinder n person
girl girls Mädchen Mädchen n person
teacher teachers Lehrer Lehrer m person
doctor doctors Arzt Ärzte m person
friend friends Freund Freunde m person
father fathers Vater Väter m person
mother mothers Mutter Mütter f person
brother brothers Bruder Brüder m person
sister sisters Schwester Schwestern f person
king kings König Könige m person
queen queens Königin Königinnen f person
baby babies Baby Babys n person
dog dogs Hund Hunde m animal
cat cats Katze Katzen f animal
horse horses Pferd Pferde n animal
bird birds Vogel Vögel m animal
mouse mice Maus Mäuse f animal
cow cows Kuh Kühe f animal
pig pigs Schwein Schweine n animal
duck ducks Ente Enten f animal
wolf wolves Wolf Wölfe m animal
fox foxes Fuchs Füchse m animal
frog frogs Frosch Frösche m animal
rabbit rabbits Kaninchen Kaninchen n animal
ball balls Ball Bälle m thing
car cars Auto Autos n thing
table tables Tisch Tische m thing
chair chairs Stuhl Stühle m thing
door doors Tür Türen f thing
window windows Fenster Fenster n thing
key keys Schlüssel Schlüssel m thing
cup cups Tasse Tassen f thing
bag bags Tasche Taschen f thing
hat hats Hut Hüte m thing
flower flowers Blume Blumen f thing
picture pictures Bild Bilder n thing
box boxes Kiste Kisten f thing
boat boats Boot Boote n thing
shoe shoes Schuh Schuhe m thing
clock clocks Uhr Uhren f thing
book books Buch Bücher n text
letter letters Brief Briefe m text
newspaper newspapers Zeitung Zeitungen f text
apple apples Apfel Äpfel m food
cake cakes Kuchen Kuchen m food
egg eggs Ei Eier n food
soup soups Suppe Suppen f food
banana bananas Banane Bananen f food
cookie cookies Keks Kekse m food
house houses Haus Häuser n building
school schools Schule Schulen f building
garden gardens Garten Gärten m building
tree trees Baum Bäume m building
"""

# english: base 3sg past | german: infinitive 1sg 3sg participle aux (h: haben, s: sein)
# | frame | kinds of the (last) object. Frames: intr (no object), acc (accusative
# object), dat (dative object), ditr (dative person + accusative thing), that (a
# "that" clause), move (intransitive, may take "to"). Objects "any" = every kind.
_VERBS = """
sleep sleeps slept | schlafen schlafe schläft geschlafen h | intr
laugh laughs laughed | lachen lache lacht gelacht h | intr
wait waits waited | warten warte wartet gewartet h | intr
sing sings sang | singen singe singt gesungen h | intr
play plays played | spielen spiele spielt gespielt h | intr
work works worked | arbeiten arbeite arbeitet gearbeitet h | intr
run runs ran | laufen laufe läuft gelaufen s | move
swim swims swam | schwimmen schwimme schwimmt geschwommen s | move
come comes came | kommen komme kommt gekommen s | move
go goes went | gehen gehe geht gegangen s | move
see sees saw | sehen sehe sieht gesehen h | acc any
find finds found | finden finde findet gefunden h | acc any
hear hears heard | hören höre hört gehört h | acc any
like likes liked | mögen mag mag gemocht h | acc any
buy buys bought | kaufen kaufe kauft gekauft h | acc thing food text animal
carry carries carried | tragen trage trägt getragen h | acc thing food text animal
take takes took | nehmen nehme nimmt genommen h | acc thing food text
need needs needed | brauchen brauche braucht gebraucht h | acc thing food text
open opens opened | öffnen öffne öffnet geöffnet h | acc thing text
love loves loved | lieben liebe liebt geliebt h | acc person animal
visit visits visited | besuchen besuche besucht besucht h | acc person building
meet meets met | treffen treffe trifft getroffen h | acc person
know knows knew | kennen kenne kennt gekannt h | acc person animal building
eat eats ate | essen esse isst gegessen h | acc food
write writes wrote | schreiben schreibe schreibt geschrieben h | acc text
help helps helped | helfen helfe hilft geholfen h | dat person animal
follow follows followed | folgen folge folgt gefolgt s | dat person animal
thank thanks thanked | danken danke dankt gedankt h | dat person
answer answers answered | antworten antworte antwortet geantwortet h | dat person
give gives gave | geben gebe gibt gegeben h | ditr thing food text animal
show shows showed | zeigen zeige zeigt gezeigt h | ditr thing food text animal building
bring brings brought | bringen bringe bringt gebracht h | ditr thing food text
send sends sent | schicken schicke schickt geschickt h | ditr thing food text
say says said | sagen sage sagt gesagt h | that
think thinks thought | denken denke denkt gedacht h | that
know knows knew | wissen weiß weiß gewusst h | that
believe believes believed | glauben glaube glaubt geglaubt h | that
"""

# english, german stem, kinds it describes ("any" = every kind)
_ADJECTIVES = """
big groß any
small klein any
old alt any
young jung person animal
new neu thing text building food
red rot thing food text building
blue blau thing text building
green grün thing food building animal
black schwarz animal thing text building
white weiß animal thing food text building
beautiful schön any
tired müde person animal
happy glücklich person animal
hungry hungrig person animal
fast schnell person animal thing
friendly freundlich person animal
"""

PRONOUNS = {  # english -> (german, person)
    "i": ("ich", "1sg"), "he": ("er", "3sg"), "she": ("sie", "3sg"),
    "we": ("wir", "pl"), "they": ("sie", "pl"),
}
AUXILIARIES = {  # german finite forms by person
    "haben": {"1sg": "habe", "3sg": "hat", "pl": "haben"},
    "sein": {"1sg": "bin", "3sg": "ist", "pl": "sind"},
    "werden": {"1sg": "werde", "3sg": "wird", "pl": "werden"},
    "können": {"1sg": "kann", "3sg": "kann", "pl": "können"},
}
TENSES = ("present", "past", "future", "can")
TIME_ADVERBS = {  # english -> (german, tenses it goes with)
    "today": ("heute", ("present", "past", "future", "can")),
    "now": ("jetzt", ("present", "can")),
    "yesterday": ("gestern", ("past",)),
    "tomorrow": ("morgen", ("future", "can")),
}
FREQUENCY_ADVERBS = {"often": "oft", "always": "immer", "sometimes": "manchmal"}
PREPOSITIONS = {  # english -> (german, case)
    "with": ("mit", "dat"), "from": ("von", "dat"), "to": ("zu", "dat"),
    "for": ("für", "acc"), "without": ("ohne", "acc"),
}
CONTRACTIONS = {("von", "dem"): "vom", ("zu", "dem"): "zum", ("zu", "der"): "zur"}
CONJUNCTIONS = {  # english -> german; "when" is "als" with a past clause
    "because": "weil", "although": "obwohl", "while": "während", "if": "wenn", "when": "wenn", "that": "dass",
}

ARTICLES = {  # (determiner, case) -> german article by gender / "pl"
    ("the", "nom"): {"m": "der", "f": "die", "n": "das", "pl": "die"},
    ("the", "acc"): {"m": "den", "f": "die", "n": "das", "pl": "die"},
    ("the", "dat"): {"m": "dem", "f": "der", "n": "dem", "pl": "den"},
    ("a", "nom"): {"m": "ein", "f": "eine", "n": "ein"},
    ("a", "acc"): {"m": "einen", "f": "eine", "n": "ein"},
    ("a", "dat"): {"m": "einem", "f": "einer", "n": "einem"},
}
ADJECTIVE_ENDINGS = {  # (determiner, case) -> ending by gender / "pl"; None = no article (plural)
    ("the", "nom"): {"m": "e", "f": "e", "n": "e", "pl": "en"},
    ("the", "acc"): {"m": "en", "f": "e", "n": "e", "pl": "en"},
    ("the", "dat"): {"m": "en", "f": "en", "n": "en", "pl": "en"},
    ("a", "nom"): {"m": "er", "f": "e", "n": "es"},
    ("a", "acc"): {"m": "en", "f": "e", "n": "es"},
    ("a", "dat"): {"m": "en", "f": "en", "n": "en"},
    (None, "nom"): {"pl": "e"},
    (None, "acc"): {"pl": "e"},
    (None, "dat"): {"pl": "en"},
}


@dataclass(frozen=True)
class Noun:
    en: str
    en_pl: str
    de: str
    de_pl: str
    gender: str
    kind: str


@dataclass(frozen=True)
class Verb:
    en: str
    en_3sg: str
    en_past: str
    de: str
    de_1sg: str
    de_3sg: str
    participle: str
    aux: str  # "haben" or "sein"
    frame: str  # intr, move, acc, dat, ditr, that
    objects: tuple  # kinds the (direct) object may be


@dataclass(frozen=True)
class Adjective:
    en: str
    de: str
    kinds: tuple


def _parse_lexicon():
    nouns = {}
    for line in _NOUNS.strip().splitlines():
        en, en_pl, de, de_pl, g, kind = line.split()
        nouns[en] = Noun(en, en_pl, de, de_pl, g, kind)
    verbs = {}
    for line in _VERBS.strip().splitlines():
        en_part, de_part, frame_part = (p.split() for p in line.split("|"))
        en, en_3sg, en_past = en_part
        de, de_1sg, de_3sg, participle, aux = de_part
        frame, objects = frame_part[0], tuple(frame_part[1:])
        if objects == ("any",):
            objects = ("person", "animal", "thing", "food", "text", "building")
        key = en if frame != "that" or en not in verbs else en + "_that"  # "know" twice: kennen / wissen
        verbs[key] = Verb(en, en_3sg, en_past, de, de_1sg, de_3sg, participle,
                          {"h": "haben", "s": "sein"}[aux], frame, objects)
    adjectives = {}
    for line in _ADJECTIVES.strip().splitlines():
        en, de, *kinds = line.split()
        if kinds == ["any"]:
            kinds = ["person", "animal", "thing", "food", "text", "building"]
        adjectives[en] = Adjective(en, de, tuple(kinds))
    return nouns, verbs, adjectives


NOUNS, VERBS, ADJECTIVES = _parse_lexicon()

# --- sentence structures -------------------------------------------------------


@dataclass(frozen=True)
class NP:
    """A noun phrase: ``NP("dog", det="the", adj="big", plural=False)`` or a pronoun ``NP(pronoun="he")``.

    det: "the", "a" (singular only) or None (plural only).
    """
    noun: Optional[str] = None
    det: Optional[str] = "the"
    adj: Optional[str] = None
    plural: bool = False
    pronoun: Optional[str] = None


@dataclass(frozen=True)
class PP:
    """A prepositional phrase: ``PP("with", NP("cat"))``."""
    prep: str
    np: NP


@dataclass(frozen=True)
class Clause:
    """One clause. ``verb`` is a key of VERBS ("know" = kennen, "know_that" = wissen).

    obj: the accusative object (acc, ditr) or the dative object (dat);
    iobj: the indirect (dative) object of a ditr verb; that: the clause after a
    "that" verb. adverb: a key of TIME_ADVERBS or FREQUENCY_ADVERBS; a time
    adverb stands at the end in English, or first when ``front`` is True.
    """
    subject: NP
    verb: str
    tense: str = "present"
    obj: Optional[NP] = None
    iobj: Optional[NP] = None
    pp: Optional[PP] = None
    adverb: Optional[str] = None
    front: bool = False
    that: Optional["Clause"] = None


@dataclass(frozen=True)
class Sentence:
    """A main clause, optionally joined to a second clause by ``conj``.

    conj "and"/"but": ``other`` is a second main clause; conj "because",
    "although", "while", "if", "when": ``other`` is a subordinate clause, after
    the main one, or before it when ``sub_first`` is True.
    """
    main: Clause
    conj: Optional[str] = None
    other: Optional[Clause] = None
    sub_first: bool = False


# --- rendering -----------------------------------------------------------------

def person(np: NP) -> str:
    """"1sg", "3sg" or "pl": what the verb agrees with."""
    if np.pronoun:
        return PRONOUNS[np.pronoun][1]
    return "pl" if np.plural else "3sg"


def english_np(np: NP) -> list[str]:
    if np.pronoun:
        return [np.pronoun]
    noun = NOUNS[np.noun]
    words = [ADJECTIVES[np.adj].en] if np.adj else []
    words.append(noun.en_pl if np.plural else noun.en)
    if np.det == "a":
        return ["an" if words[0][0] in "aeiou" else "a"] + words
    return ([np.det] if np.det else []) + words


def german_np(np: NP, case: str) -> list[str]:
    """The German words of ``np`` in ``case`` ("nom", "acc" or "dat")."""
    if np.pronoun:
        assert case == "nom", "pronouns are subjects only"
        return [PRONOUNS[np.pronoun][0]]
    noun = NOUNS[np.noun]
    if (np.plural and np.det == "a") or (not np.plural and np.det is None):
        raise ValueError(f"determiner {np.det!r} does not go with plural={np.plural}")
    key = "pl" if np.plural else noun.gender
    words = []
    if np.det:
        words.append(ARTICLES[np.det, case][key])
    if np.adj:
        stem, ending = ADJECTIVES[np.adj].de, ADJECTIVE_ENDINGS[np.det, case][key]
        words.append(stem + ending[1:] if stem.endswith("e") else stem + ending)  # müde + en -> müden
    form = noun.de_pl if np.plural else noun.de
    if np.plural and case == "dat" and not form.endswith(("n", "s")):
        form += "n"  # den Kindern, but den Frauen, den Autos
    words.append(form)
    return words


def german_pp(pp: PP) -> list[str]:
    prep, case = PREPOSITIONS[pp.prep]
    words = german_np(pp.np, case)
    if (prep, words[0]) in CONTRACTIONS:
        return [CONTRACTIONS[prep, words[0]]] + words[1:]
    return [prep] + words


def english_clause(c: Clause) -> list[str]:
    verb = VERBS[c.verb]
    p = person(c.subject)
    if c.tense == "present":
        verb_words = [verb.en_3sg if p == "3sg" else verb.en]
    elif c.tense == "past":
        verb_words = [verb.en_past]
    else:
        verb_words = ["will" if c.tense == "future" else "can", verb.en]
    if c.adverb in FREQUENCY_ADVERBS:  # before the main verb, after will / can
        verb_words.insert(len(verb_words) - 1, c.adverb)
    words = english_np(c.subject) + verb_words
    if c.iobj:
        words += english_np(c.iobj)
    if c.obj:
        words += english_np(c.obj)
    if c.that:
        words += ["that"] + english_clause(c.that)
    if c.pp:
        words += [c.pp.prep] + english_np(c.pp.np)
    if c.adverb in TIME_ADVERBS:
        words = [c.adverb] + words if c.front else words + [c.adverb]
    return words


def german_verb(c: Clause) -> tuple[str, list[str]]:
    """(finite verb, the non-finite verbs that go to the end)."""
    verb = VERBS[c.verb]
    p = person(c.subject)
    if c.tense == "present":
        return {"1sg": verb.de_1sg, "3sg": verb.de_3sg, "pl": verb.de}[p], []
    if c.tense == "past":
        return AUXILIARIES[verb.aux][p], [verb.participle]
    return AUXILIARIES["werden" if c.tense == "future" else "können"][p], [verb.de]


def german_middle(c: Clause) -> list[str]:
    """Adverb, dative object, accusative object, prepositional phrase."""
    verb = VERBS[c.verb]
    words = []
    if c.adverb in FREQUENCY_ADVERBS:
        words.append(FREQUENCY_ADVERBS[c.adverb])
    elif c.adverb in TIME_ADVERBS and not c.front:
        words.append(TIME_ADVERBS[c.adverb][0])
    if c.iobj:
        words += german_np(c.iobj, "dat")
    if c.obj:
        words += german_np(c.obj, "dat" if verb.frame == "dat" else "acc")
    if c.pp:
        words += german_pp(c.pp)
    return words


def german_clause(c: Clause, order: str = "main", first: Optional[list] = None) -> list[str]:
    """order "main": verb second; "sub": verb last (the conjunction is the caller's).

    ``first``: words that take the place before the verb (a fronted
    subordinate clause); then the subject follows the verb.
    """
    finite, rest = german_verb(c)
    subject = german_np(c.subject, "nom")
    middle = german_middle(c)
    tail = []
    if c.that:
        tail = [",", "dass"] + german_clause(c.that, "sub")
    if order == "sub":
        return subject + middle + rest + [finite] + tail
    if first is None and c.adverb in TIME_ADVERBS and c.front:
        first = [TIME_ADVERBS[c.adverb][0]]
    if first is None:
        return subject + [finite] + middle + rest + tail
    return first + [finite] + subject + middle + rest + tail


def render(s) -> tuple[str, str]:
    """A ``Sentence`` (or a lone ``Clause``) -> (english, german), each ending in " ."."""
    if isinstance(s, Clause):
        s = Sentence(s)
    if s.conj is None:
        en, de = english_clause(s.main), german_clause(s.main)
    elif s.conj in ("and", "but"):
        de_conj = {"and": ["und"], "but": [",", "aber"]}[s.conj]
        en_conj = {"and": ["and"], "but": [",", "but"]}[s.conj]
        en = english_clause(s.main) + en_conj + english_clause(s.other)
        de = german_clause(s.main) + de_conj + german_clause(s.other)
    else:
        conj = "als" if s.conj == "when" and s.other.tense == "past" else CONJUNCTIONS[s.conj]
        en_sub = [s.conj] + english_clause(s.other)
        de_sub = [conj] + german_clause(s.other, "sub")
        if s.sub_first:
            en = en_sub + [","] + english_clause(s.main)
            de = german_clause(s.main, first=de_sub + [","])
        else:
            en = english_clause(s.main) + en_sub
            de = german_clause(s.main) + [","] + de_sub
    return " ".join(en + ["."]), " ".join(de + ["."])


# --- sampling ------------------------------------------------------------------

_BY_KIND = {}
for _n in NOUNS.values():
    _BY_KIND.setdefault(_n.kind, []).append(_n.en)
_FRAMES = {}
for _k, _v in VERBS.items():
    _FRAMES.setdefault(_v.frame, []).append(_k)
_ADJ_BY_KIND = {k: [a for a, v in ADJECTIVES.items() if k in v.kinds] for k in _BY_KIND}
_SUBJECT_KINDS = ("person", "animal")


def sample_np(rng: random.Random, kinds, adj_p: float = 0.25) -> NP:
    """A random noun phrase whose noun is of one of ``kinds``."""
    kind = rng.choice([k for k in kinds if k in _BY_KIND])
    noun = rng.choice(_BY_KIND[kind])
    plural = rng.random() < 0.3
    det = ("the" if rng.random() < 0.6 else None) if plural else ("the" if rng.random() < 0.6 else "a")
    adj = None
    if rng.random() < adj_p:
        adj = rng.choice(_ADJ_BY_KIND[kind])
    return NP(noun, det, adj, plural)


def sample_subject(rng: random.Random, pronoun_p: float = 0.2, adj_p: float = 0.25) -> NP:
    if rng.random() < pronoun_p:
        return NP(pronoun=rng.choice(list(PRONOUNS)))
    return sample_np(rng, _SUBJECT_KINDS, adj_p)


def sample_clause(rng: random.Random, tense: Optional[str] = None, frames=None, depth: int = 0,
                  front_ok: bool = True) -> Clause:
    """A random clause; ``tense`` and ``frames`` restrict it."""
    frames = frames or ("intr", "move", "acc", "acc", "acc", "dat", "ditr", "that")
    if depth > 0:
        frames = tuple(f for f in frames if f != "that")
    frame = rng.choice(frames)
    verb_key = rng.choice(_FRAMES[frame])
    verb = VERBS[verb_key]
    if tense is None:
        tense = rng.choices(TENSES, weights=(4, 3, 2, 2))[0] if frame != "that" else rng.choice(("present", "past"))
    subject = sample_subject(rng) if frame != "that" else (
        NP(pronoun=rng.choice(list(PRONOUNS))) if rng.random() < 0.3 else sample_np(rng, ("person",)))
    obj = iobj = pp = that = adverb = None
    if frame in ("acc", "dat"):
        obj = sample_np(rng, verb.objects)
    elif frame == "ditr":
        iobj = sample_np(rng, ("person",), adj_p=0.15)
        obj = sample_np(rng, verb.objects, adj_p=0.15)
    elif frame == "that":
        that = sample_clause(rng, depth=depth + 1, front_ok=False)
    if frame != "that" and rng.random() < (0.35 if frame in ("intr", "move") else 0.15):
        preps = ["with", "from", "for", "without"] + (["to", "to"] if frame == "move" else [])
        prep = rng.choice(preps)
        kinds = ("person", "animal") if prep in ("with", "for", "without", "from") and rng.random() < 0.6 else (
            "person", "animal", "thing", "food", "text", "building")
        if prep == "to":
            kinds = ("person", "building")
        pp = PP(prep, sample_np(rng, kinds, adj_p=0.2))
    front = False
    r = rng.random()
    if frame != "that" and r < 0.2:
        adverb = rng.choice([a for a, (_, ts) in TIME_ADVERBS.items() if tense in ts] or [None])
        front = adverb is not None and front_ok and rng.random() < 0.5
    elif frame != "that" and r < 0.3:
        adverb = rng.choice(list(FREQUENCY_ADVERBS))
    return Clause(subject, verb_key, tense, obj, iobj, pp, adverb, front, that)


def sample_sentence(rng: random.Random) -> Sentence:
    """A random sentence: one clause, two joined clauses, or a main and a subordinate clause."""
    r = rng.random()
    if r < 0.5:
        return Sentence(sample_clause(rng))
    if r < 0.55:
        return Sentence(sample_clause(rng, frames=("intr", "move", "acc", "dat")), rng.choice(("and", "but")),
                        sample_clause(rng, frames=("intr", "move", "acc", "dat")))
    conj = rng.choice(("because", "because", "although", "while", "if", "when", "when"))
    sub_first = rng.random() < 0.35
    main = sample_clause(rng, front_ok=not sub_first, frames=("intr", "move", "acc", "acc", "dat", "ditr"))
    if conj == "when":
        tense = "past" if main.tense == "past" else "present"
    elif conj == "if":
        tense = "present"
        if main.tense == "past":
            main = replace(main, tense="future", front=False,
                           adverb=None if main.adverb in TIME_ADVERBS else main.adverb)
    else:
        tense = None
    sub = sample_clause(rng, tense=tense, depth=1, front_ok=False,
                        frames=("intr", "move", "acc", "acc", "dat", "ditr"))
    return Sentence(main, conj, sub, sub_first)


MIN_WORDS, MAX_WORDS = 4, 20


def generate_pair(rng: random.Random, max_words: int = MAX_WORDS) -> tuple[str, str]:
    """One (english, german) pair; English has MIN_WORDS..max_words words (the final "." counted)."""
    while True:
        en, de = render(sample_sentence(rng))
        if MIN_WORDS <= en.count(" ") + 1 <= max_words:
            return en, de


def make_splits(n_train: int = 20000, n_valid: int = 500, n_test: int = 500,
                seed: int = 0, max_words: int = MAX_WORDS) -> dict[str, list[tuple[str, str]]]:
    """Splits "train", "valid", "test" of distinct pairs; no English sentence is in two splits.

    ``max_words`` below 20 gives shorter sentences: a smaller task, learned faster.

    The test split is drawn first, then valid, then train, so the test split
    of a seed does not depend on ``n_train``.
    """
    rng = random.Random(seed)
    seen = set()
    splits = {}
    for name, n in (("test", n_test), ("valid", n_valid), ("train", n_train)):
        pairs = []
        tries = 0
        while len(pairs) < n:
            en, de = generate_pair(rng, max_words)
            tries += 1
            if tries > 100 * n + 10000:
                raise RuntimeError(f"could not find {n} new sentences for {name!r}: the grammar is too small")
            if en not in seen:
                seen.add(en)
                pairs.append((en, de))
        splits[name] = pairs
    return {k: splits[k] for k in ("train", "valid", "test")}


def describe() -> str:
    """The grammar's features (this module's docstring) and the size of its lexicon."""
    return (__doc__ + f"\nLexicon: {len(NOUNS)} nouns, {len(VERBS)} verbs, {len(ADJECTIVES)} adjectives, "
            f"{len(PRONOUNS)} pronouns, {len(TIME_ADVERBS) + len(FREQUENCY_ADVERBS)} adverbs, "
            f"{len(PREPOSITIONS)} prepositions, {len(CONJUNCTIONS) + 2} conjunctions.\n")
