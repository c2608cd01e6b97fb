"""Grades for a learning management system: the CSV files Canvas's and Moodle's gradebooks import, a plain
wide CSV, and an upload to Canvas through its API (``canvasapi``).

The grades are those ``grade`` recorded in its output folder (``results.jsonl``), with the written answers' grades
a person gave in the Formgrader (the course's gradebook: ``grade --gradebook``): one column per notebook, its points
out of its maximum. A roster maps the
course's student ids (the folder names of submitted/) to the LMS's ids; without one, a student's course id stands
for their login.

    python -m autograder export GRADED --format canvas|moodle|csv [--roster roster.csv] [--out FILE]
    CANVAS_API_TOKEN=... python -m autograder export GRADED --format canvas --canvas-url URL --canvas-course ID
"""
import csv
import io
import os
import sys
from pathlib import Path

from .gradebook import linked, read_written
from .results import Store

# A roster's columns: student_id, and any of these (a column left out, or a cell left empty, is not known)
ROSTER_FIELDS = ("name", "canvas_id", "sis_user_id", "sis_login_id", "section", "email", "idnumber", "username")
CANVAS_TOKEN = "CANVAS_API_TOKEN"  # the environment variable that holds the Canvas token (never a flag: ps shows those)


class ExportError(Exception):
    """The export cannot be written as asked: no grades, a roster without student_id, an assignment not in Canvas."""


def _fmt(x: float) -> str:
    return f"{x:g}"


def load_grades(graded: Path, gradebook: Path | None = None) -> tuple[dict, list, list]:
    """({student: {assignment: (score, max)}}, the assignments in order, the notebooks with written answers no
    person has graded yet) from ``graded``/results.jsonl, with the written answers' grades of the course's
    gradebook (``gradebook``, or the one ``grade --gradebook`` recorded into)."""
    store = Path(graded) / "results.jsonl"
    if not store.is_file():
        raise ExportError(f"{store} does not exist: export reads the folder `python -m autograder grade` wrote")
    results = [r for _, r in Store(store).load().values()]
    gradebook = gradebook or linked(graded)
    if gradebook is not None:
        read_written(gradebook, results)
    grades, assignments, ungraded = {}, set(), []
    for r in sorted(results, key=lambda r: (r.student, r.assignment)):
        student, aid = r.student, r.assignment
        grades.setdefault(student, {})[aid] = (r.score, r.max_score)
        assignments.add(aid)
        if not r.written_graded:
            ungraded.append((student, aid))
    if not grades:
        raise ExportError(f"{store} holds no graded notebook")
    return grades, sorted(assignments), ungraded


def read_roster(path: Path | None, students) -> tuple[dict, list]:
    """({student_id: {field: value}} for every student, the students the roster does not list). A student not
    listed gets their course id as login (sis_login_id and username) and as name."""
    given = {}
    if path is not None:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            if "student_id" not in (reader.fieldnames or []):
                raise ExportError(f"{path}: a roster needs a student_id column (the folder names of submitted/), "
                                  f"and any of {', '.join(ROSTER_FIELDS)}")
            for row in reader:
                given[row["student_id"].strip()] = {k: (row.get(k) or "").strip() for k in ROSTER_FIELDS}
    unlisted = sorted(s for s in students if s not in given)
    roster = {}
    for s in students:
        row = dict(given.get(s) or {k: "" for k in ROSTER_FIELDS})
        if s not in given:
            row.update(name=s, sis_login_id=s, username=s)
        roster[s] = row
    return roster, unlisted


def _csv(rows) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


def _maxima(grades, assignments) -> list:
    return [max(g[aid][1] for g in grades.values() if aid in g) for aid in assignments]


def canvas_csv(grades, assignments, roster) -> str:
    """Canvas's gradebook import: Student, ID, SIS User ID, SIS Login ID, Section, then one column per assignment
    (titled with the notebook's name), and a Points Possible row. A blank cell changes nothing in Canvas."""
    rows = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *assignments],
            ["Points Possible", "", "", "", "", *map(_fmt, _maxima(grades, assignments))]]
    for s in sorted(grades):
        p = roster[s]
        rows.append([p["name"] or s, p["canvas_id"], p["sis_user_id"], p["sis_login_id"], p["section"],
                     *(_fmt(grades[s][a][0]) if a in grades[s] else "" for a in assignments)])
    return _csv(rows)


def moodle_csv(grades, assignments, roster) -> str:
    """Moodle's grade import (Grades > Import > CSV file): identity columns to map a user by (username, ID number
    or email address), then one column per notebook, to map to a grade item."""
    rows = [["Username", "ID number", "Email address", "Full name", *assignments]]
    for s in sorted(grades):
        p = roster[s]
        rows.append([p["username"], p["idnumber"], p["email"], p["name"] or s,
                     *(_fmt(grades[s][a][0]) if a in grades[s] else "" for a in assignments)])
    return _csv(rows)


def plain_csv(grades, assignments, roster) -> str:
    """One row per student: their ids, each notebook's points and maximum, and the totals."""
    rows = [["student_id", *ROSTER_FIELDS, *(x for a in assignments for x in (a, f"{a} max")), "total",
             "total max"]]
    for s in sorted(grades):
        cells, total, most = [], 0.0, 0.0
        for a in assignments:
            score, top = grades[s].get(a, (None, None))
            cells += ["", ""] if score is None else [_fmt(score), _fmt(top)]
            total, most = total + (score or 0.0), most + (top or 0.0)
        rows.append([s, *(roster[s][k] for k in ROSTER_FIELDS), *cells, _fmt(total), _fmt(most)])
    return _csv(rows)


FORMATS = {"canvas": canvas_csv, "moodle": moodle_csv, "csv": plain_csv}


def canvas_user(p: dict) -> str | None:
    """How Canvas's API names a student: their Canvas id, or an SIS id with its prefix, as its API accepts."""
    if p["canvas_id"]:
        return p["canvas_id"]
    if p["sis_user_id"]:
        return f"sis_user_id:{p['sis_user_id']}"
    if p["sis_login_id"]:
        return f"sis_login_id:{p['sis_login_id']}"
    return None


def upload_to_canvas(grades, assignments, roster, url: str, course_id: str, token: str) -> list:
    """Post every grade to the course's assignments of the same names (one bulk update per assignment); returns
    [(assignment, number of grades, Canvas's progress id)]. Nothing is posted when an assignment is missing."""
    try:
        from canvasapi import Canvas
    except ImportError as e:
        raise ExportError("uploading to Canvas needs canvasapi: pip install -e .[lms]") from e
    from canvasapi.exceptions import CanvasException
    try:
        return _upload(Canvas(url, token).get_course(course_id), grades, assignments, roster, course_id)
    except CanvasException as e:
        raise ExportError(f"Canvas refused: {type(e).__name__}: {e}") from e


def _upload(course, grades, assignments, roster, course_id) -> list:
    found = {a.name: a for a in course.get_assignments()}
    missing = [aid for aid in assignments if aid not in found]
    if missing:
        raise ExportError(f"no assignment named {', '.join(missing)} in Canvas course {course_id}: create "
                          f"{'them' if len(missing) > 1 else 'it'} there (the notebook's name as its title), or "
                          f"import the CSV of --format canvas, which creates them")
    done = []
    for aid in assignments:
        data = {canvas_user(roster[s]): {"posted_grade": _fmt(g[aid][0])} for s, g in sorted(grades.items())
                if aid in g and canvas_user(roster[s])}
        progress = found[aid].submissions_bulk_update(grade_data=data)
        done.append((aid, len(data), getattr(progress, "id", None)))
    return done


def cmd_export(args) -> int:
    try:
        grades, assignments, ungraded = load_grades(Path(args.graded), args.gradebook and Path(args.gradebook))
        roster, unlisted = read_roster(Path(args.roster) if args.roster else None, grades)
        if args.roster and unlisted:
            print(f"{len(unlisted)} student(s) not in {args.roster}, exported with their course id as login: "
                  f"{', '.join(unlisted[:10])}{' ...' if len(unlisted) > 10 else ''}", file=sys.stderr)
        if ungraded:
            print(f"{len(ungraded)} notebook(s) have written answers no person has graded yet: their points are the "
                  f"autograded ones until then", file=sys.stderr)
        if args.canvas_url:
            token = os.environ.get(CANVAS_TOKEN)
            if not token or not args.canvas_course:
                raise ExportError(f"an upload needs --canvas-course and the token in the environment variable "
                                  f"{CANVAS_TOKEN}")
            for aid, n, progress in upload_to_canvas(grades, assignments, roster, args.canvas_url,
                                                     args.canvas_course, token):
                print(f"posted {n} grade(s) of {aid} to Canvas (progress {progress})")
            return 0
        out = Path(args.out or Path(args.graded) / f"grades-{args.format}.csv")
        out.write_text(FORMATS[args.format](grades, assignments, roster), encoding="utf-8")
        print(f"wrote {out}: {len(grades)} student(s), {len(assignments)} notebook(s)")
        return 0
    except (ExportError, OSError) as e:
        print(f"export: {e}", file=sys.stderr)
        return 2
