"""Copies between students: every pair of submissions of an assignment, compared on what the students wrote.

A submission's own code is its answer cells and the code cells it added; the course's code (the release's
stubs with their docstrings, and its given cells) is left out as boilerplate. Each submission's code is
fingerprinted as MOSS does, by copydetect: the code's tokens with every name, string and comment replaced
(so renaming variables, rewording comments or reformatting hides nothing), k-grams of those hashed, and a
window of hashes winnowed down to its smallest. Passages that more than ``Similar.common`` students wrote alike
are left out too (MOSS's -m): with fixed names and signatures, they are what the exercise asks for. A pair's
similarity is the larger of the two shares of code (after all that) that the other holds too; pairs at or above
the threshold are reported, most similar first, and shown side by side in ``similarity.html`` with the shared
parts marked (defaults: ``settings.Similar``).

    python -m autograder similar SUBMITTED [--out similarity.html] [--threshold 0.7]

A high similarity is a reason to look, not a verdict: short exercises leave few ways to write them.
"""
import collections
import functools
import hashlib
import html
import io
import itertools
from dataclasses import dataclass
from pathlib import Path

import nbformat

from . import course, intake
from .settings import Similar

K, WINDOW = Similar.noise, Similar.guarantee - Similar.noise + 1


@dataclass
class Written:
    """What one student wrote for one assignment, and its fingerprint."""
    student: str
    assignment: str
    code: str
    print: object = None  # copydetect.CodeFingerprint


@dataclass
class Pair:
    assignment: str
    a: Written
    b: Written
    similarity: float  # the larger share
    shares: tuple  # (share of a's code in b, share of b's code in a)
    slices: tuple  # copydetect's copied slices, in a's and b's code


def _code_cells(nb) -> list:
    return [c for c in nb.cells if c.get("cell_type") == "code"]


@functools.lru_cache(maxsize=None)
def _release(assignment: str) -> tuple:
    """(grade ids of the answer cells of code, sources of the release's code cells)."""
    cells = _code_cells(nbformat.read(course.release_notebook(assignment), as_version=4))
    answers = frozenset(intake.grade_id(c) for c in cells
                        if c.metadata.get("nbgrader", {}).get("solution") and not c.metadata["nbgrader"].get("locked"))
    return answers, tuple(c.source for c in cells)


def written_code(path: Path, assignment: str) -> str:
    """The code a student wrote: answer cells and their own code cells, in order ('' if unreadable)."""
    nb, _ = intake.read_submission(path)
    if nb is None:
        return ""
    answers, given = _release(assignment)
    mine = [c.get("source", "") for c in _code_cells(nb) if c.get("source", "") not in given
            and (intake.grade_id(c) in answers or not intake.grade_id(c))]  # an untouched stub is not theirs
    return "\n\n".join(s for s in mine if s.strip())


def boilerplate(assignment: str) -> list:
    """The hashes of every k-gram (no winnowing: a window of 1, as copydetect does) of each of the release's
    code cells: what every student starts from."""
    cells = [code for code in _release(assignment)[1] if code.strip()]
    return sorted(set().union(*(_copydetect().CodeFingerprint("release.py", K, 1, fp=io.StringIO(code)).hashes
                                for code in cells + ["\n\n".join(cells)])))  # and across cells, in order


def fingerprint(code: str, common: list):
    return _copydetect().CodeFingerprint("answer.py", K, WINDOW, boilerplate=common, fp=io.StringIO(code))


def _stable_hashes(string: str, k: int):
    """copydetect's k-gram hashes, but the same in every process: it uses Python's ``hash``, which each process
    salts anew, so the fingerprints (and the shares) changed from run to run."""
    import numpy as np
    return np.array([int.from_bytes(hashlib.blake2b(string[i:i + k].encode(), digest_size=8).digest(), "little",
                                    signed=True) for i in range(len(string) - k + 1)], dtype=np.int64)


def _copydetect():
    """copydetect, with hashes that do not change from one run to the next."""
    import copydetect.utils
    copydetect.utils.hashed_kgrams = _stable_hashes
    return copydetect


def _fingerprint_all(written: list, assignment: str) -> None:
    """Each submission's fingerprint, without the release's code and without what more than ``Similar.common``
    students wrote alike: that is what the exercise asks for, not a copy (MOSS's -m)."""
    common = boilerplate(assignment)
    for w in written:
        w.print = fingerprint(w.code, common) if w.code else None
    seen = collections.Counter(h for w in written if w.print is not None for h in set(w.print.hashes))
    frequent = {h for h, n in seen.items() if n > Similar.common}
    if frequent:
        common = sorted(set(common) | frequent)
        for w in written:
            w.print = fingerprint(w.code, common) if w.code else None


def compare(submissions, threshold: float = Similar.threshold) -> tuple[list, list]:
    """(pairs at or above ``threshold``, most similar first; students with no code of their own) for
    ``submissions``, a list of (student, assignment, notebook path)."""
    compare_files = _copydetect().compare_files
    by_assignment, empty = {}, []
    for student, aid, path in submissions:
        by_assignment.setdefault(aid, []).append(Written(student, aid, written_code(Path(path), aid)))
    pairs = []
    for aid, written in sorted(by_assignment.items()):
        _fingerprint_all(written, aid)
        empty += [(w.student, aid) for w in written if w.print is None or w.print.token_coverage == 0]
        kept = sorted((w for w in written if w.print is not None and w.print.token_coverage > 0),
                      key=lambda w: w.student)
        hashes = {id(w): set(w.print.hashes) for w in kept}
        for a, b in itertools.combinations(kept, 2):
            shared = len(hashes[id(a)] & hashes[id(b)])
            if shared < 0.5 * threshold * min(len(hashes[id(a)]), len(hashes[id(b)])):
                continue  # far from the threshold on the fingerprints alone: not worth a close look
            _, shares, _ = compare_files(a.print, b.print)
            similarity = float(max(shares))
            if similarity >= threshold:
                pairs.append(Pair(aid, a, b, similarity, tuple(float(s) for s in shares), _raw_slices(a, b)))
    pairs.sort(key=lambda p: (-p.similarity, p.assignment, p.a.student, p.b.student))
    return pairs, empty


def raw_positions(code: str) -> list:
    """For each character of copydetect's filtered code (names as V, F or O, strings as S, no comments or white
    space), the (start, end) of the raw token it comes from. copydetect maps its slices back through an offset
    table that is wrong after a class name (it records the name's length, not the running offset), so a pair's
    marks landed mid-word, ran backwards and missed shared code."""
    from pygments import lexers, token
    spans, at = [], 0
    for kind, text in lexers.get_lexer_for_filename("answer.py").get_tokens(code):
        start = code.find(text, at) if text else at
        start = at if start < 0 else start
        end = start + len(text)
        if kind in (token.Name, token.Name.Variable, token.Name.Attribute) or kind in token.Name.Function \
                or kind in token.Name.Class or kind in (token.Comment.Preproc, token.Comment.Hashbang):
            spans.append((start, end))
        elif kind in token.Text or kind in token.Comment:
            pass
        elif kind in token.Literal.String:
            spans.append((start, end))
        else:  # kept as it is, character by character: a mark that starts or ends inside takes the whole token
            spans += [(start, end)] * (end - start)
        at = max(at, end)
    return spans


def _raw_slices(a, b) -> tuple:
    """The shared code of a pair, as (starts, ends) in each side's raw code."""
    idx_a, idx_b = _copydetect().utils.find_fingerprint_overlap(a.print.hashes, b.print.hashes, a.print.hash_idx,
                                                                b.print.hash_idx)
    out = []
    for w, idx in ((a, idx_a), (b, idx_b)):
        spans = raw_positions(w.code)
        if len(spans) != len(w.print.filtered_code):  # another tokenization than copydetect's: mark nothing
            out.append(([], []))
            continue
        starts, ends = _copydetect().utils.get_copied_slices(idx, K)
        pieces = [(spans[int(i)][0], spans[min(int(j), len(spans)) - 1][1]) for i, j in zip(starts, ends) if j > i]
        out.append(([p[0] for p in pieces], [p[1] for p in pieces]))
    return tuple(out)


def _marked(code: str, slices) -> str:
    """``code`` as HTML, the parts in ``slices`` (starts, ends) marked."""
    out, at = [], 0
    for start, end in sorted(zip(*(list(map(int, s)) for s in slices))) if len(slices[0]) else []:
        start, end = max(start, at), min(end, len(code))
        if start >= end:
            continue
        out += [html.escape(code[at:start]), "<mark>", html.escape(code[start:end]), "</mark>"]
        at = end
    out.append(html.escape(code[at:]))
    return "".join(out)


PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Similar submissions</title><style>
body {{ font-family: sans-serif; margin: 2em; }} table {{ border-collapse: collapse; }}
td, th {{ border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }}
.side {{ display: flex; gap: 1em; }} .side > div {{ flex: 1; min-width: 0; }}
pre {{ background: #f7f7f7; padding: 8px; overflow-x: auto; font-size: 12px; }} mark {{ background: #ffd27f; }}
</style></head><body>
<h1>Similar submissions</h1>
<p>{summary}</p>
{table}
{sections}
</body></html>
"""


def write_html(pairs, empty, compared: int, threshold: float, path: Path) -> None:
    """The report: a table of the pairs, then each pair side by side with the shared code marked."""
    summary = (f"{compared} submissions compared, pair by pair within each assignment, on the code the students "
               f"wrote (the course's stubs and given cells left out). {len(pairs)} pairs share at least "
               f"{threshold:.0%} of one side's code. A high share is a reason to look, not a verdict.")
    if empty:
        summary += " No code of their own: " + ", ".join(html.escape(f"{s} ({a})") for s, a in empty) + "."
    rows = "".join(f'<tr><td><a href="#pair{i}">{i}</a></td><td>{html.escape(p.assignment)}</td>'
                   f"<td>{html.escape(p.a.student)}</td><td>{html.escape(p.b.student)}</td>"
                   f"<td>{p.similarity:.0%}</td><td>{p.shares[0]:.0%} / {p.shares[1]:.0%}</td></tr>"
                   for i, p in enumerate(pairs, 1))
    table = ("<table><tr><th>#</th><th>assignment</th><th>student</th><th>student</th><th>similarity</th>"
             f"<th>share of each in the other</th></tr>{rows}</table>") if pairs else "<p>No pair is that similar.</p>"
    sections = "".join(
        f'<h2 id="pair{i}">{i}. {html.escape(p.assignment)}: {html.escape(p.a.student)} and '
        f"{html.escape(p.b.student)}, {p.similarity:.0%}</h2><div class=\"side\">"
        + "".join(f"<div><h3>{html.escape(w.student)} ({share:.0%} shared)</h3><pre>{_marked(w.code, cut)}</pre></div>"
                  for w, share, cut in ((p.a, p.shares[0], p.slices[0]), (p.b, p.shares[1], p.slices[1])))
        + "</div>" for i, p in enumerate(pairs, 1))
    Path(path).write_text(PAGE.format(summary=summary, table=table, sections=sections), encoding="utf-8")
