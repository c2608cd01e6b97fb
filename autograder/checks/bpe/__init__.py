"""Hidden tests of notebook 07 (byte-pair encoding), one module per exercise.

The reference is the course's ``lib.bpe``, called here in the grader (its
private helpers compute the expected values), and run trusted in the kernel for
the earlier exercises: ``train_bpe`` is tested with the course's ``pair_counts``
and ``merge_pair``. Graded code may not call the course's references, nor
Hugging Face ``tokenizers``: it glues the end-of-word marker to the last
character and breaks ties by its internal ids, so its merges differ from the
contract anyway. Each common mistake is recognised by recomputing the output it
would give and naming it.
"""
from ..common import plain
from ..kernel import Bans, Remote

REFERENCES = {  # exercise -> its references in lib.bpe, in the notebook's order
    "pair_counts": ("pair_counts",),
    "merge_pair": ("merge_pair",),
    "train_bpe": ("train_bpe",),
    "bpe_tokenize": ("bpe_tokenize",),
}
BANS = Bans(references=tuple(n for v in REFERENCES.values() for n in v))
FIXTURES = ("autograder.checks.bpe.same_object",)
EOW = "</w>"
CLASSIC = " ".join(["low"] * 5 + ["lower"] * 2 + ["newest"] * 6 + ["widest"] * 3)


def trusted_helpers(k, *names):
    """The course's versions of earlier exercises, for the tests of later ones."""
    return {name: k.reference(f"lib.bpe.{name}") for name in names}


def no_tokenizers(k, name):
    if k.reaches(k.student(name), "tokenizers"):
        raise AssertionError(f"{name} uses Hugging Face tokenizers: this exercise asks you to write BPE yourself "
                             f"(tokenizers is for the comparison later in the notebook)")


def kind(value) -> str:
    return value.description if isinstance(value, Remote) else f"a {type(value).__name__}"


def plain_items(pairs, what):
    """The (key, value) pairs of a returned dict, refusing objects that are not plain data (a str subclass
    whose == is always true, say)."""
    return [(plain(key, what), plain(value, what)) for key, value in pairs]


def diagnose(actual, expected, hints, what, show):
    """Fail naming the known mistake whose output ``actual`` equals, else show both values.
    ``hints`` (message -> what that mistake outputs, or a function giving that dict) is
    only worked out on a failure."""
    diagnose_all([(actual, expected, hints, what)], show)


def _outputs(case) -> dict:
    """What each known mistake outputs on the input of this case (None where it cannot be worked out)."""
    hints = case[2]
    return hints() if callable(hints) else hints


def diagnose_all(cases, show):
    """``diagnose`` for several answers (actual, expected, hints, what), all asked before deciding: fail at the
    first wrong one with ONE diagnosis. It names the known mistake whose output equals the student's answer on
    every probe, the right answers included (two mistakes often agree on one input, seldom on all); where no
    known mistake, or more than one, fits every answer, it shows what is wrong with the first wrong answer. Known
    mistakes that give the same output on every probe are one for these probes: the first listed is named."""
    wrong = [i for i, case in enumerate(cases) if case[0] != case[1]]
    if not wrong:
        return
    actual, expected, _, what = cases[wrong[0]]
    outputs = [_outputs(case) for case in cases]
    known = [message for message, output in outputs[wrong[0]].items()
             if output is not None and output == actual and output != expected
             and all(out.get(message) is None or out[message] == case[0] for out, case in zip(outputs, cases))]
    if len(known) > 1 and all(out.get(m) == out.get(known[0]) for out in outputs for m in known):
        known = known[:1]
    if len(known) == 1:
        raise AssertionError(f"{what} is wrong: {known[0]}")
    raise AssertionError(f"{what}: {show(actual, expected)}")


def show_dict(actual, expected):
    wrong = {k: actual.get(k) for k in set(actual) | set(expected) if actual.get(k) != expected.get(k)}
    items = sorted(wrong, key=repr)[:4]
    return "; ".join(f"{k}: got {actual.get(k, 'nothing')}, expected {expected.get(k, 'nothing')}" for k in items)
