"""``class.html``: what a class got wrong, on one self-contained page (plots inline, nothing fetched).

For each notebook, the distribution of scores; for each exercise, the points the class lost and the mistakes
the judges named, counted by cause (``results.mistake_id``: the same cause in other words or numbers is one
mistake), with links to each student's feedback page; then the submissions flagged for a person, and how
grading went (time per notebook, kernels that died, time and memory limits, the grader's own failures).
"""
import base64
import html
import io
import statistics
from collections import Counter, defaultdict
from pathlib import Path
from urllib.parse import quote

from .report import needs_review
from .results import NotebookResult

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; } td, th { padding: 0.25em 0.7em; vertical-align: top; }
th { text-align: left; background: #f2f2f2; } tr + tr td { border-top: 1px solid #eee; }
.num { text-align: right; font-variant-numeric: tabular-nums; } .id { color: #888; font-size: 0.85em; }
.bad { color: #b00; } .small { color: #555; font-size: 0.9em; } .plots img { margin: 0 1em 1em 0; }
"""


def _esc(text) -> str:
    return html.escape(str(text), quote=True)


def _fmt(x: float) -> str:
    return f"{x:g}"


def feedback_link(r: NotebookResult) -> str:
    """The student's feedback page, relative to class.html (both sit in grade's output folder)."""
    return f"feedback/{quote(r.student, safe='')}/{quote(r.assignment, safe='')}.html"


def _said(message: str) -> str:
    """A judge's message as a reader wants it: without the 'AssertionError: ' every failed check starts with."""
    return message.removeprefix("AssertionError: ")


def _student(r: NotebookResult) -> str:
    return f'<a href="{_esc(feedback_link(r))}">{_esc(r.student)}</a>'


def score_plot(results: list) -> str:
    """An inline PNG (base64): how many students got each share of a notebook's autograded points."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shares = [100 * r.auto_score / r.auto_max if r.auto_max else 0.0 for r in results]
    fig, ax = plt.subplots(figsize=(4.2, 2.4))
    ax.hist(shares, bins=[0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100.001], color="tab:blue", edgecolor="white")
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of the notebook's autograded points")
    ax.set_ylabel("students")
    ax.yaxis.get_major_locator().set_params(integer=True)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def mistakes_by_exercise(results: list) -> dict:
    """(assignment, exercise) -> {'students', 'lost', 'max', 'full', 'mistakes': [(id, message, [results])]}, the
    mistakes most students made first. A student counts once per mistake, however many cells it failed. Notebooks
    the grader failed on are left out: their zeros are not the students' doing (the page lists them apart)."""
    table = {}
    for r in results:
        if r.fault:
            continue
        per = {}
        for c in r.cells:
            if c.manual:
                continue
            row = per.setdefault(c.exercise, {"score": 0.0, "max": 0.0, "ids": {}})
            row["score"] += c.score
            row["max"] += c.max_score
            if c.mistake:
                row["ids"].setdefault(c.mistake, c.message)
        for ex, row in per.items():
            st = table.setdefault((r.assignment, ex), {"students": 0, "lost": 0.0, "max": 0.0, "full": 0,
                                                        "found": defaultdict(list), "said": defaultdict(Counter)})
            st["students"] += 1
            st["lost"] += row["max"] - row["score"]
            st["max"] += row["max"]
            st["full"] += row["score"] == row["max"]
            for mid, message in row["ids"].items():
                st["found"][mid].append(r)
                st["said"][mid][message] += 1
    for st in table.values():
        found, said = st.pop("found"), st.pop("said")
        st["mistakes"] = sorted(((mid, said[mid].most_common(1)[0][0], rs) for mid, rs in found.items()),
                                key=lambda m: (-len(m[2]), m[0]))
    return table


def _limits(r: NotebookResult) -> list:
    """What went wrong while running this notebook, in a word each."""
    text = " ".join(r.notes).lower()
    said = []
    for word, kind in (("kernel died", "kernel died"), ("did not answer an interrupt", "kernel stopped"),
                       ("time limit", "time limit"), ("memory limit", "memory limit"),
                       ("limit of", "process limit")):
        if word in text:
            said.append(kind)
    return said


def why_review(r: NotebookResult) -> list:
    """Why ``r`` is flagged for a person (``report.needs_review``), one reason a line."""
    why = []
    if r.fault:
        why.append(f"the grader failed on it: {r.fault}")
    elif r.error:
        why.append(r.error)
    why += [n for n in r.notes if "kernel" in n]
    why += r.flags
    return why


def _section_notebook(aid: str, results: list, table: dict) -> list:
    out = [f'<h2 id="{_esc(aid)}">{_esc(aid)}</h2>']
    autograded = [r.auto_score for r in results]
    top = results[0].auto_max if results else 0
    written = [c for r in results for c in r.cells if c.manual]
    graded = f", {sum(c.graded for c in written)} of {len(written)} written answers graded by a person" if written \
        else ""
    out.append(f'<p>{len(results)} submission(s); autograded points: median {_fmt(statistics.median(autograded))} '
               f'of {_fmt(top)}, {sum(r.full_marks for r in results)} with full marks{graded}.</p>')
    out.append(f'<div class="plots"><img alt="score distribution of {_esc(aid)}" '
               f'src="data:image/png;base64,{score_plot(results)}"></div>')
    rows = sorted(((ex, st) for (a, ex), st in table.items() if a == aid), key=lambda kv: -kv[1]["lost"])
    out.append("<table><tr><th>exercise</th><th class=num>full marks</th><th class=num>points lost</th>"
               "<th>mistakes named, by cause (students)</th></tr>")
    for ex, st in rows:
        named = []
        for mid, message, rs in st["mistakes"]:
            who = ", ".join(_student(r) for r in sorted(rs, key=lambda r: r.student))
            named.append(f'<li><b>{len(rs)}</b> &times; {_esc(_said(message))} <span class="id">[{_esc(mid)}]</span>'
                         f'<br><span class="small">{who}</span></li>')
        mistakes = f"<ul>{''.join(named)}</ul>" if named else '<span class="small">none</span>'
        cls = ' class="num bad"' if st["lost"] else ' class="num"'
        out.append(f"<tr><td>{_esc(ex)}</td><td class=num>{st['full']} / {st['students']}</td>"
                   f"<td{cls}>{_fmt(st['lost'])} of {_fmt(st['max'])}</td><td>{mistakes}</td></tr>")
    out.append("</table>")
    return out


def _section_review(results: list) -> list:
    review = sorted((r for r in results if needs_review(r)), key=lambda r: (r.assignment, r.student))
    out = ['<h2 id="review">Flagged for a person</h2>']
    if not review:
        return out + ["<p>No submission is flagged.</p>"]
    out.append("<table><tr><th>student</th><th>notebook</th><th>why</th></tr>")
    for r in review:
        why = "<br>".join(_esc(w) for w in why_review(r))
        out.append(f"<tr><td>{_student(r)}</td><td>{_esc(r.assignment)}</td><td>{why}</td></tr>")
    return out + ["</table>"]


def _section_running(by_notebook: dict) -> list:
    out = ['<h2 id="running">How grading went</h2>',
           "<table><tr><th>notebook</th><th class=num>graded</th><th class=num>seconds: median</th>"
           "<th class=num>slowest</th><th>what stopped kernels</th><th>not graded</th></tr>"]
    for aid, results in by_notebook.items():
        times = [r.seconds for r in results if r.seconds]
        stops = Counter(kind for r in results for kind in _limits(r))
        stopped = ", ".join(f"{kind}: {n}" for kind, n in stops.most_common()) or "none"
        faults = sum(bool(r.fault) for r in results)
        errors = sum(bool(r.error) and not r.fault for r in results)
        missing = [f"{faults} by the grader's fault (grade again)"] if faults else []
        missing += [f"{errors} could not be run (no notebook, unreadable)"] if errors else []
        out.append(f"<tr><td>{_esc(aid)}</td><td class=num>{len(results)}</td>"
                   f"<td class=num>{f'{statistics.median(times):.1f}' if times else '-'}</td>"
                   f"<td class=num>{f'{max(times):.1f}' if times else '-'}</td><td>{_esc(stopped)}</td>"
                   f"<td>{_esc('; '.join(missing) or 'none')}</td></tr>")
    return out + ["</table>"]


def class_page(results: list) -> str:
    by_notebook = defaultdict(list)
    for r in sorted(results, key=lambda r: (r.assignment, r.student)):
        by_notebook[r.assignment].append(r)
    table = mistakes_by_exercise(results)
    students = len({r.student for r in results})
    contents = " &middot; ".join(f'<a href="#{_esc(a)}">{_esc(a)}</a>' for a in by_notebook)
    body = [f"<h1>Class report</h1><p>{students} student(s), {len(results)} notebook(s). {contents} &middot; "
            f'<a href="#review">flagged</a> &middot; <a href="#running">how grading went</a></p>',
            '<p class="small">Mistakes are counted by cause: messages that differ only in numbers, shapes or quoted '
            "values are one mistake, with its id in brackets. Each name links to that student's feedback page. "
            "Written answers are graded by a person and are not part of these counts.</p>"]
    for aid, rs in by_notebook.items():
        body += _section_notebook(aid, rs, table)
    body += _section_review(results) + _section_running(by_notebook)
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Class report</title>"
            f"<style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def write_class_page(results: list, path: Path) -> None:
    Path(path).write_text(class_page(results), encoding="utf-8")
