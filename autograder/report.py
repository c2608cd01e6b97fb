"""Print and write grading results: the per-notebook table, grades.csv, the
class report and summary (table and plot), and per-student HTML feedback with
the hidden tests redacted."""
import csv
import html
import re
import textwrap
from pathlib import Path

import nbformat

from . import files
from .results import NotebookResult

HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", re.DOTALL)


def _fmt(x: float) -> str:
    return f"{x:g}"


def exercise_table(result: NotebookResult) -> str:
    """One line per exercise: points / max, and the first failure message."""
    rows, order = {}, []
    for cell in result.cells:
        if cell.exercise not in rows:
            rows[cell.exercise] = {"score": 0.0, "max": 0.0, "manual": cell.manual, "message": "", "graded": True}
            order.append(cell.exercise)
        row = rows[cell.exercise]
        row["graded"] = row["graded"] and cell.graded
        row["score"] += cell.score
        row["max"] += cell.max_score
        if cell.message and not row["message"]:
            row["message"] = cell.message
    width = max([len(e) for e in order] + [8])
    lines = [f"{result.assignment}  ({result.notebook})"]
    if result.error:
        lines.append(f"  could not be graded: {result.error}")
    for name in order:
        row = rows[name]
        if row["manual"] and row["graded"]:
            said = row["message"] or "written answer, graded by a person"
            lines.append(f"  {name:<{width}}  {_fmt(row['score']):>3} / {_fmt(row['max']):<3}  {said}")
            continue
        if row["manual"]:
            lines.append(f"  {name:<{width}}    - / {_fmt(row['max']):<3}  written answer: awaiting a human grader")
            continue
        mark = "ok  " if row["score"] == row["max"] else "FAIL"
        line = f"  {name:<{width}}  {_fmt(row['score']):>3} / {_fmt(row['max']):<3}  {mark}"
        if row["message"]:
            line += f"  {row['message']}"
        lines.append(line)
    manual_max = result.max_score - result.auto_max
    summary = f"  autograded: {_fmt(result.auto_score)} / {_fmt(result.auto_max)}"
    waiting = sum(c.max_score for c in result.cells if c.manual and not c.graded)
    if manual_max and result.written_score is not None:
        summary += (f"; written answers: {_fmt(result.written_score)} / {_fmt(manual_max - waiting)} graded"
                    + (f" so far ({_fmt(waiting)} more points await a person)" if waiting else "")
                    + f"; total {_fmt(result.score)} / {_fmt(result.max_score)}")
    elif manual_max:
        summary += f"; written answers: {_fmt(manual_max)} more points, graded by a person"
    lines.append(summary)
    for exercise, text in result.comments.items():
        lines.append(f"  the grader's comment on {exercise}: {text}")
    if result.notes:
        lines.append("  notes:")
        lines += [f"    - {n}" for n in result.notes]
    if result.flags:
        lines.append("  flagged for a human to read (code a correct answer does not need):")
        lines += [f"    - {f}" for f in result.flags]
    if result.sandbox and result.sandbox != "isolated":
        lines.append(f"  sandbox: {result.sandbox}")
    return "\n".join(lines)


def needs_review(r: NotebookResult) -> bool:
    """A person should look: flagged code, a notebook that could not be graded, a dead kernel, a fault of
    the grader's."""
    return bool(r.flags or r.error or r.fault or any("kernel" in n for n in r.notes))


def write_grades_csv(results, path: Path) -> None:
    """One row per notebook. score / max_score count every point: the autograded ones, and the written answers'
    (``written_max``) as a person grades them (in the Formgrader: grade --gradebook). ``written`` is the points of
    the written answers graded so far (an answer left as released counts 0), empty while none is."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student_id", "assignment", "notebook", "score", "max_score", "autograded", "autograded_max",
                    "written", "written_max", "needs_review"])
        for r in sorted(results, key=lambda r: (r.student, r.assignment)):
            written_max = r.max_score - r.auto_max
            written = _fmt(r.written_score) if written_max and r.written_score is not None else ""
            w.writerow([r.student, r.assignment, r.notebook, _fmt(r.score), _fmt(r.max_score), _fmt(r.auto_score),
                        _fmt(r.auto_max), written, _fmt(written_max), "yes" if needs_review(r) else ""])


def exercise_stats(results):
    """(assignment, exercise) -> {students, full, mean share of points, the message of the commonest failure,
    counted by cause}."""
    stats = {}
    for r in results:
        per = {}
        for c in r.cells:
            if c.manual:
                continue
            row = per.setdefault(c.exercise, [0.0, 0.0, None])
            row[0] += c.score
            row[1] += c.max_score
            row[2] = row[2] or (c if c.mistake else None)
        for ex, (score, most, failed) in per.items():
            st = stats.setdefault((r.assignment, ex), {"students": 0, "full": 0, "share": 0.0, "messages": {}})
            st["students"] += 1
            st["full"] += score == most
            st["share"] += score / most if most else 1.0
            if failed:  # counted by cause (results.mistake_id), as class.html counts them
                count, said = st["messages"].get(failed.mistake, (0, failed.message))
                st["messages"][failed.mistake] = (count + 1, said)
    for st in stats.values():
        st["share"] /= st["students"]
        count, said = max(st["messages"].values(), key=lambda cs: cs[0]) if st["messages"] else (0, "")
        st["top"] = textwrap.shorten(said, 120, placeholder=" ...")  # cut between words
    return stats


def class_summary(results) -> str:
    """A table: for each exercise, how many students got full marks and the commonest failure."""
    stats = exercise_stats(results)
    width = max([len(f"{a} {e}") for a, e in stats] + [20])
    lines = [f"{'exercise':<{width}}  full marks  mean   commonest failure"]
    for (aid, ex), st in sorted(stats.items(), key=lambda kv: kv[1]["share"]):
        lines.append(f"{aid + ' ' + ex:<{width}}  {st['full']:>4} / {st['students']:<4} {st['share']:>5.0%}  "
                     f"{st['top']}")
    return "\n".join(lines)


def plot_summary(results, path: Path) -> None:
    """A bar per exercise: the share of students without full marks, most failed first."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stats = sorted(exercise_stats(results).items(), key=lambda kv: kv[1]["full"] / kv[1]["students"])
    names = [f"{a[:2]} {e}" for (a, e), _ in stats]
    failing = [100 * (1 - st["full"] / st["students"]) for _, st in stats]
    fig, ax = plt.subplots(figsize=(7, 0.3 * len(names) + 1.2))
    ax.barh(names[::-1], failing[::-1], color="tab:red")
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of students without full marks")
    ax.set_title("Which exercises the class fails most")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_class_report(results, path: Path, refused=(), unfinished: int = 0) -> None:
    """Every notebook's table; those a person should review first. ``refused``: (folder, why) of the
    submissions that could not be graded at all; ``unfinished``: how many an interrupted run left ungraded."""
    ordered = sorted(results, key=lambda r: (not needs_review(r), r.student, r.assignment))
    parts = ["Class report", ""]
    if unfinished:
        parts += [f"INCOMPLETE: grading was interrupted with {unfinished} notebook(s) not graded yet; run the "
                  f"same grade command again to grade them (what is graded here is kept).", ""]
    faults = [r for r in results if r.fault]
    if faults:
        parts += [f"{len(faults)} notebook(s) NOT GRADED through a fault of the grader, not of the student "
                  f"(run the same grade command again to grade them):"]
        parts += [f"  {r.student} {r.assignment}: {r.fault}" for r in faults] + [""]
    parts += [class_summary(results), ""]
    if refused:
        parts += [f"{len(refused)} folder(s) NOT GRADED:"] + [f"  {folder}: {why}" for folder, why in refused] + [""]
    review = [r for r in ordered if needs_review(r)]
    parts.append(f"{len(review)} notebook(s) flagged for a person to review (listed first)." if review else
                 "No notebook is flagged for review.")
    written = [c for r in results for c in r.cells if c.manual and not c.graded]
    if written:
        notebooks = len({(r.student, r.assignment) for r in results if not r.written_graded})
        parts.append(f"{len(written)} written answer(s) in {notebooks} notebook(s) await a human grader "
                     f"(nbgrader's Formgrader, after grade --gradebook); the scores here leave them out.")
    for r in ordered:
        parts += ["", f"student {r.student}", exercise_table(r)]
    path.write_text("\n".join(parts) + "\n")


def _redacted(nb):
    """The autograded notebook with hidden test code and tracebacks removed, and every cell cut to a size
    the renderer handles quickly (its markdown parser takes quadratic time on some inputs)."""
    for cell in nb.cells:
        cell.source = _cut(cell.source, MAX_CELL)
        if cell.cell_type != "code":
            continue
        if "BEGIN HIDDEN TESTS" in cell.source:
            cell.source = HIDDEN.sub("# (hidden tests: their code is not shown)", cell.source)
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                out["traceback"] = [f"{out.get('ename', 'Error')}: {out.get('evalue', '')}"]
            for key, value in (out.get("data") or {}).items():
                if isinstance(value, str):
                    out["data"][key] = _cut(value, MAX_CELL if key.startswith("text/") else MAX_OUTPUT)
            if isinstance(out.get("text"), str):
                out["text"] = _cut(out["text"], MAX_CELL)
    return nb


MAX_CELL = 10_000  # characters of a cell's source or text output shown in feedback
MAX_OUTPUT = 2_000_000  # characters of an image shown
RENDER_SECONDS = 30  # past this, a feedback page is written as plain text


def _cut(text, limit: int) -> str:
    text = "".join(text) if isinstance(text, list) else text
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n\n[the rest ({len(text) - limit} characters) is not shown in this feedback]"


# What a feedback page keeps of the notebook's HTML (its rendered markdown, its outputs): the student wrote it, so
# no script, style, form, frame or event handler, and images only from inside the page (data: URLs), so that opening
# it fetches nothing. nbconvert's own clean_html keeps bleach's short list, without headings, paragraphs, tables'
# headers or images: every text cell of the page read as raw tags (<h1 id=...>, <p>).
SAFE_TAGS = {"a", "abbr", "b", "blockquote", "br", "caption", "code", "dd", "del", "details", "div", "dl", "dt", "em",
             "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s", "samp", "small",
             "span", "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u",
             "ul", "var"}
SAFE_ATTRIBUTES = {"class", "id", "title", "alt", "colspan", "rowspan", "align"}


def _safe_attribute(tag: str, name: str, value: str) -> bool:
    if name in SAFE_ATTRIBUTES:
        return True
    if tag == "a" and name == "href":
        return value.startswith(("#", "http://", "https://", "mailto:"))
    return tag == "img" and name == "src" and value.startswith("data:image/")


def clean_html(element) -> str:
    """``element`` (HTML a student's notebook gave) with only the tags and attributes a page of text needs."""
    import bleach
    element = element.decode() if isinstance(element, bytes) else str(element)
    return bleach.clean(element, tags=SAFE_TAGS, attributes=_safe_attribute,
                        protocols={"http", "https", "mailto", "data"})


_exporter = None


def _render(nb, header: str) -> str:
    """The page, rendered by nbconvert in this (renderer) process. The exporter is made once per process, and the
    HTML it sanitizes is remembered by its text: the notebook's own cells are the same on every student's page."""
    global _exporter
    if _exporter is None:
        from functools import lru_cache

        from nbconvert import HTMLExporter
        remembered = lru_cache(maxsize=1024)(clean_html)  # a notebook has some fifty cells

        def clean(element):
            return remembered(element) if len(element) <= MAX_CELL else clean_html(element)
        _exporter = HTMLExporter(template_name="classic", exclude_input_prompt=True, sanitize_html=True,
                                 filters={"clean_html": clean})
    body, _ = _exporter.from_notebook_node(nb)
    return body.replace("<body>", "<body>" + header, 1)


def _plain(nb, header: str) -> str:
    """The notebook as escaped text, for when rendering it would take too long."""
    parts = [header, "<p>(shown as plain text: this notebook took too long to render)</p>"]
    for cell in nb.cells:
        parts.append(f"<pre>{html.escape(cell.source)}</pre>")
        for out in cell.get("outputs", []):
            text = out.get("text") or (out.get("data") or {}).get("text/plain") or out.get("evalue") or ""
            parts.append(f"<pre>{html.escape(str(text))}</pre>")
    return "<!DOCTYPE html><html><body>" + "\n".join(parts) + "</body></html>"


def _default_signals() -> None:
    """A forked renderer does not inherit ``grade``'s handlers: stopped when its page is done (SIGTERM), or with
    the grader (Ctrl-C), it ends quietly instead of printing a KeyboardInterrupt's traceback."""
    import signal
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def render_pages(pages: list, jobs: int = 1, seconds: float = RENDER_SECONDS) -> list:
    """[(nb, header)] -> one HTML page each, rendered in ``jobs`` forked processes. A page still rendering
    ``seconds`` after its process took it up is written as plain text (``_plain``), and that process is replaced;
    a page whose rendering raised comes back as the exception."""
    import multiprocessing
    import time
    if not pages:
        return []
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    out = [None] * len(pages)
    todo = list(range(len(pages)))[::-1]
    pools = [ctx.Pool(1, initializer=_default_signals) for _ in range(max(1, min(jobs, len(pages))))]
    busy = [None] * len(pools)  # per process: (page, its job, when it was given)
    try:
        while todo or any(busy):
            for k, pool in enumerate(pools):
                if busy[k] is None and todo:
                    i = todo.pop()
                    busy[k] = (i, pool.apply_async(_render, pages[i]), time.monotonic())
                elif busy[k] is not None:
                    i, job, given = busy[k]
                    if job.ready():
                        try:
                            out[i] = job.get()
                        except Exception as e:  # noqa: BLE001 - one page's failure is reported with that page
                            out[i] = e
                        busy[k] = None
                    elif time.monotonic() - given > seconds:
                        pool.terminate()
                        pools[k] = ctx.Pool(1, initializer=_default_signals)
                        out[i], busy[k] = _plain(*pages[i]), None
            time.sleep(0.005)
    finally:
        for pool in pools:
            pool.terminate()
    return out


def feedback_page(result: NotebookResult, autograded: Path | None):
    """What one student's feedback page shows: their graded notebook with the hidden tests' code and tracebacks
    redacted (None when there is none), and the header: points and messages per exercise."""
    table = html.escape(exercise_table(result))
    points = f"autograded {_fmt(result.auto_score)} / {_fmt(result.auto_max)} points"
    if result.max_score > result.auto_max and result.written_score is not None:
        points += (f"; in all, with the written answers{'' if result.written_graded else ' graded so far'}, "
                   f"{_fmt(result.score)} / {_fmt(result.max_score)}")
    header = f"<h1>Feedback: {html.escape(result.assignment)}</h1><p>{points}</p><pre>{table}</pre>"
    if autograded is not None and autograded.is_file():
        return _redacted(nbformat.reads(files.read(autograded).decode(), as_version=4)), header
    return None, header


def write_feedback(result: NotebookResult, path: Path, body, root: Path | None = None) -> None:
    """One student's feedback page into ``path``: ``body`` as ``render_pages`` gave it (an exception it raised is
    raised here, for the caller to report with that student)."""
    if isinstance(body, Exception):
        raise body
    files.write(path, body, root=root)


def bare_page(header: str) -> str:
    """A feedback page with no notebook under its header."""
    return f"<!DOCTYPE html><html><body>{header}</body></html>"
