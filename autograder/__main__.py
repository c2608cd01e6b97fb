"""Command line: python -m autograder {release,check,grade,export,similar,bundle}."""
import argparse
import hashlib
import signal
import sys
from pathlib import Path

from . import course, intake
from .bundle import bundle
from .class_page import write_class_page
from .gradebook import GRADEBOOK_LINK, read_written, record, register
from .export import CANVAS_TOKEN, FORMATS, cmd_export
from .cluster import ClusterError
from .grading import zero_result
from .settings import Limits, Similar, default_jobs
from .runner import check_notebook, grade_many
from .fingerprint import fingerprint, version
from .release import release
from .results import Store
from .sandbox import preflight
from .report import (bare_page, class_summary, exercise_table, feedback_page, needs_review, plot_summary,
                     render_pages, write_class_report, write_feedback, write_grades_csv)


CLUSTER_HELP = ("grade on the Dask cluster whose scheduler is at ADDRESS (tcp://host:8786) instead of this "
                "machine's cores; its workers must hold this course (see deploy/dask/)")


def cmd_release(args) -> int:
    for path in release(assignment_ids=args.assignments or None):
        print(f"released {path.relative_to(course.ROOT)}")
    if args.gradebook:
        register(Path(args.gradebook), args.assignments or course.assignments())
        print(f"registered {len(args.assignments or course.assignments())} assignment(s) in "
              f"{Path(args.gradebook) / 'gradebook.db'}, for the Formgrader")
    return 0


def cmd_check(args) -> int:
    path = Path(args.notebook)
    if path.is_dir():
        return check_folder(path, args.jobs, args.cluster)
    if args.cluster:
        print("--cluster grades a folder of notebooks; for one notebook, leave it out", file=sys.stderr)
        return 2
    if not path.is_file():
        print(f"no such notebook: {path}", file=sys.stderr)
        return 2
    try:
        result = check_notebook(path, args.assignment)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    print(exercise_table(result))
    return 0 if result.full_marks else 1


def check_folder(folder: Path, jobs: int, cluster: str | None = None) -> int:
    """Grade every course notebook under ``folder`` (say notebooks/) at once."""
    found = []
    for nb in sorted(p for p in folder.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts):
        try:
            found.append((nb, course.detect_assignment(nb)))
        except ValueError:
            print(f"skipping {nb}: not a notebook of this course", file=sys.stderr)
    if not found:
        print(f"no course notebooks under {folder}", file=sys.stderr)
        return 2
    try:
        results = grade_many([(f"you{i}", aid, nb) for i, (nb, aid) in enumerate(found)], jobs=jobs,
                             progress=sys.stderr.isatty(), cluster=cluster)
    except ClusterError as e:
        print(e, file=sys.stderr)
        return 2
    for r, (nb, _) in zip(results, found):
        r.notebook = str(nb)
        print(exercise_table(r), end="\n\n")
    width = max(len(r.assignment) for r in results)
    print("progress")
    for r in results:
        mark = "done" if r.full_marks else "to do"
        print(f"  {r.assignment:<{width}}  {r.auto_score:>4g} / {r.auto_max:<4g} {mark}")
    total, most = sum(r.auto_score for r in results), sum(r.auto_max for r in results)
    print(f"  {'all':<{width}}  {total:>4g} / {most:<4g} autograded points")
    return 0 if all(r.full_marks for r in results) else 1


def find_submissions(submitted: Path):
    """(found, missing, refused) in a folder laid out like nbgrader's submitted/: found holds
    (student, assignment, notebook), missing (student, assignment) with no notebook, refused
    (folder, why) for folders that cannot be graded, each with the reason."""
    known = set(course.assignments())
    found, missing, refused = [], [], []
    for student_dir in sorted(p for p in submitted.iterdir() if p.is_dir()):
        why = student_id_problem(student_dir)
        if why:
            refused.append((student_dir, why))
            continue
        for adir in sorted(p for p in student_dir.iterdir() if p.is_dir()):
            if adir.name not in known:
                print(f"skipping {adir}: no assignment called {adir.name}", file=sys.stderr)
                continue
            if adir.is_symlink():
                refused.append((adir, "it is a symbolic link, not a folder"))
                continue
            notebooks = sorted(p for p in adir.glob("*.ipynb") if not p.name.startswith("."))
            preferred = [p for p in notebooks if p.name == f"{adir.name}.ipynb"]
            if preferred or notebooks:
                found.append((student_dir.name, adir.name, (preferred or notebooks)[0]))
            else:
                missing.append((student_dir.name, adir.name))
    return found, missing, refused


def student_id_problem(folder: Path) -> str:
    """Why a folder's name cannot be a student id, or ''. Any name nbgrader accepts is graded, glob
    characters included (the grader hands nbgrader ids of its own)."""
    name = folder.name
    if folder.is_symlink():
        return "it is a symbolic link, not a folder"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "its name is not valid UTF-8; rename the folder"
    if name.startswith("."):
        return "names starting with '.' are hidden folders, not student ids (nbgrader skips them too)"
    if name != name.strip():
        return "the name starts or ends with white space, which nbgrader strips; rename the folder"
    return ""


class NotIsolated(Exception):
    """Kernels cannot be isolated on this machine, and the instructor did not accept that."""


def submission_key(path: Path, limits: Limits) -> str:
    """What a result was graded from: the notebook's bytes, the course's version and the limits. A result kept
    from an earlier run is reused only while all three are the same."""
    data, _ = intake.read_bytes(path)
    h = hashlib.sha256(data if data is not None else b"(unreadable)")
    h.update(f"|{version(fingerprint())}|{limits!r}".encode())
    return h.hexdigest()[:24]


def grade_class(submitted: Path, out: Path, jobs: int, limits: Limits, progress: bool = True, cluster=None,
                allow_unisolated: bool = False, regrade: bool = False, gradebook: Path | None = None):
    """Grade a folder laid out like nbgrader's submitted/ and write every output into ``out``: grades.csv,
    report.txt, class.html, summary.txt and .png, feedback/ and autograded/. Returns (results, refused folders).
    With ``gradebook`` (an nbgrader course directory), the results also go into its gradebook and autograded/
    folder for the Formgrader, and the written answers' grades given there come back into every output
    (``autograder.gradebook``).

    Each result is recorded in ``out``/results.jsonl the moment it is graded (``autograder.results``). Run again
    on the same ``out``, it grades only what is missing, changed, or failed for the grader's own reasons (every
    notebook with ``regrade``). Interrupted (Ctrl-C, SIGTERM), it writes the outputs of what was graded so far
    and raises KeyboardInterrupt.

    Refuses (``NotIsolated``) where this machine cannot give each kernel namespaces of its own, unless
    ``allow_unisolated``: with per-process limits only, one student's code can reach the others'. On a
    cluster, each worker is asked the same, and one that cannot is refused by name."""
    if not cluster and not allow_unisolated:
        why = preflight()
        if why:
            raise NotIsolated(f"refusing to grade a class: {why}. Each student's kernel would run with "
                              f"per-process limits only, where one submission can reach the others and the "
                              f"grader's files. Grade on Linux with user namespaces (or as root), or pass "
                              f"--allow-unisolated to accept that.")
    submitted, out = Path(submitted).resolve(), Path(out).resolve()
    found, missing, refused = find_submissions(submitted)
    for folder, why in refused:
        print(f"NOT GRADED: {ascii(str(folder))}: {why}", file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    autograded = out / "autograded"
    store = Store(out / "results.jsonl")
    kept = {} if regrade else store.load()
    results, todo, keys = [], [], []
    for student, aid, path in found:
        key = submission_key(path, limits)
        old = kept.get((student, aid))
        if old and old[0] == key and not old[1].fault:
            results.append(old[1])
        else:
            todo.append((student, aid, path))
            keys.append(key)
    if results:
        print(f"kept {len(results)} notebook(s) graded by an earlier run into {out} (unchanged since); grading "
              f"{len(todo)} (--regrade grades every notebook again)", file=sys.stderr)
    fresh = {}

    def arrived(i, r):
        fresh[i] = r
        try:
            store.add(r, keys[i])
        except OSError as e:  # the disk is full, say: the grade is still reported, but a rerun grades it again
            r.notes.append(f"this result could not be recorded in {store.path.name} ({e})")

    interrupted = False
    try:
        grade_many(todo, jobs=jobs, keep_autograded=autograded, limits=limits, progress=progress,
                   hide=[submitted, out], cluster=cluster, allow_unisolated=allow_unisolated, on_result=arrived)
    except KeyboardInterrupt:
        interrupted = True
    results += [fresh[i] for i in sorted(fresh)]
    for student, aid in missing:
        results.append(zero_result(student, aid, "", "no notebook submitted"))
    unfinished = len(todo) - len(fresh)
    if gradebook is not None:
        try:  # the grades are in results.jsonl already: a gradebook that cannot be written costs no output
            (out / GRADEBOOK_LINK).write_text(str(Path(gradebook).resolve()) + "\n")  # export reads it from there
            recorded = record(gradebook, results, autograded)
            print(f"recorded {recorded} notebook(s) in {Path(gradebook).resolve() / 'gradebook.db'} (the "
                  f"Formgrader's); {read_written(gradebook, results)} written answer(s) graded there", file=sys.stderr)
        except Exception as e:  # noqa: BLE001 - said, and the outputs are written without it
            print(f"the gradebook in {gradebook} could not be updated ({type(e).__name__}: {str(e)[:300]}); the "
                  f"outputs below leave out its written grades: run the same command again", file=sys.stderr)
    write_outputs(results, out, refused, unfinished, jobs)
    if interrupted:
        raise KeyboardInterrupt(f"{unfinished} notebook(s) not graded")
    return results, refused


def write_outputs(results, out: Path, refused=(), unfinished: int = 0, jobs: int = 1) -> None:
    """grades.csv, report.txt, class.html, summary.txt and .png, and one feedback page per notebook, from ``results`` (the
    pages rendered ``jobs`` at a time). A page that fails to render is reported, and the others are written."""
    autograded = out / "autograded"
    write_grades_csv(results, out / "grades.csv")
    pages, bodies = {}, {}
    for i, r in enumerate(results):
        try:
            pages[i] = feedback_page(r, autograded / r.student / r.assignment / f"{r.assignment}.ipynb")
        except Exception as e:  # noqa: BLE001 - reported with its page below
            bodies[i] = e
    todo = [i for i, (nb, _) in pages.items() if nb is not None]
    bodies.update(zip(todo, render_pages([pages[i] for i in todo], jobs)))
    failed = []
    for i, r in enumerate(results):
        try:
            write_feedback(r, out / "feedback" / r.student / f"{r.assignment}.html",
                           bodies.get(i) or bare_page(pages[i][1]), root=out)
        except Exception as e:  # noqa: BLE001 - one page must not cost the others theirs
            failed.append((r, f"{type(e).__name__}: {str(e)[:200]}"))
            r.notes.append(f"its feedback page could not be written ({type(e).__name__}: {str(e)[:200]})")
    write_class_report(results, out / "report.txt", [(ascii(str(f)), why) for f, why in refused], unfinished)
    (out / "summary.txt").write_text(class_summary(results) + "\n")
    plot_summary(results, out / "summary.png")
    write_class_page(results, out / "class.html")
    for r, why in failed:
        print(f"feedback for {r.student} {r.assignment} could not be written: {why}", file=sys.stderr)


def cmd_grade(args) -> int:
    limits = Limits(cell_timeout=args.cell_timeout, notebook_timeout=args.notebook_timeout,
                    memory=args.memory_mb * 2**20)
    print(f"grading {args.submitted} " + (f"on the Dask cluster at {args.cluster}" if args.cluster
                                          else f"with {args.jobs} workers"))
    out = Path(args.out).resolve()
    try:
        results, refused = grade_class(Path(args.submitted), out, args.jobs, limits, cluster=args.cluster,
                                       allow_unisolated=args.allow_unisolated, regrade=args.regrade,
                                       gradebook=Path(args.gradebook) if args.gradebook else None)
    except (ClusterError, NotIsolated) as e:
        print(e, file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        print(f"\ninterrupted: {e}. Everything graded so far is kept in {out / 'results.jsonl'} and written to "
              f"grades.csv and report.txt; run the same command again to grade the rest.", file=sys.stderr)
        return 130
    for r in sorted(results, key=lambda r: (r.student, r.assignment)):
        mark = "  REVIEW" if needs_review(r) else ""
        print(f"{r.student:<20} {r.assignment:<24} {r.score:g} / {r.max_score:g}{mark}"
              + (f"  ({r.error})" if r.error else ""))
    print(f"\n{class_summary(results)}\n")
    if refused:
        print(f"{len(refused)} folder(s) NOT GRADED (see above and report.txt)")
    faults = [r for r in results if r.fault]
    if faults:
        print(f"{len(faults)} notebook(s) NOT GRADED through a fault of the grader (see report.txt); run the same "
              f"command again to grade them")
    print(f"wrote {out / 'grades.csv'}, report.txt, class.html, summary.txt, summary.png and feedback/ (hidden tests "
          f"redacted)")
    return 0


def cmd_similar(args) -> int:
    from . import similar
    submitted = Path(args.submitted)
    found, _, refused = find_submissions(submitted)
    for folder, why in refused:
        print(f"skipping {folder}: {why}", file=sys.stderr)
    pairs, empty = similar.compare(found, args.threshold)
    for p in pairs:
        print(f"{p.assignment:<24} {p.a.student:<20} {p.b.student:<20} {p.similarity:.0%}")
    print(f"{len(found)} submissions, {len(pairs)} pairs at or above {args.threshold:.0%}"
          + (f"; no code of their own: {', '.join(f'{s} ({a})' for s, a in empty)}" if empty else ""))
    similar.write_html(pairs, empty, len(found), args.threshold, Path(args.out))
    print(f"wrote {args.out}")
    return 0


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def cmd_bundle(args) -> int:
    try:
        names = bundle(args.upto, Path(args.out))
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    print(f"wrote {args.out}: {len(names)} files")
    for name in names:
        print(f"  {name}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("release", help="regenerate notebooks/ from solutions/ with nbgrader generate_assignment")
    p.add_argument("assignments", nargs="*", help="assignment ids (default: all)")
    p.add_argument("--gradebook", metavar="COURSE_DIR",
                   help="also register the assignments in this nbgrader course's gradebook.db (the Formgrader's)")
    p.set_defaults(run=cmd_release)
    p = sub.add_parser("check", help="grade a notebook, or every notebook in a folder, hidden tests included")
    p.add_argument("notebook", help="a notebook, or a folder such as notebooks/")
    p.add_argument("--jobs", type=int, default=default_jobs(), help="notebooks graded at once (default: cores)")
    p.add_argument("--assignment", help="assignment id, when the file and folder names do not tell")
    p.add_argument("--cluster", metavar="ADDRESS", help=CLUSTER_HELP)
    p.set_defaults(run=cmd_check)
    p = sub.add_parser("grade", help="grade a folder laid out like nbgrader's submitted/")
    p.add_argument("submitted", help="folder of <student_id>/<assignment_id>/<notebook>.ipynb")
    p.add_argument("--out", required=True, help="folder for grades.csv and the autograded notebooks")
    p.add_argument("--jobs", type=int, default=default_jobs(), help="notebooks graded at once (default: cores)")
    p.add_argument("--cluster", metavar="ADDRESS", help=CLUSTER_HELP)
    limits = Limits()  # the defaults, stated in autograder/settings.py
    p.add_argument("--cell-timeout", type=int, default=limits.cell_timeout,
                   help=f"seconds per cell (default {limits.cell_timeout})")
    p.add_argument("--notebook-timeout", type=int, default=limits.notebook_timeout,
                   help=f"seconds per notebook (default {limits.notebook_timeout})")
    p.add_argument("--memory-mb", type=int, default=limits.memory // 2**20,
                   help=f"memory limit of each kernel in MiB (default {limits.memory // 2**20})")
    p.add_argument("--allow-unisolated", action="store_true",
                   help="grade even where kernels cannot be isolated (no namespaces): per-process limits only")
    p.add_argument("--regrade", action="store_true",
                   help="grade every notebook again, even those an earlier run into --out already graded")
    p.add_argument("--gradebook", metavar="COURSE_DIR",
                   help="also record the grades in this nbgrader course's gradebook.db and autograded/ (the "
                        "Formgrader's), and read back the written answers' grades given there")
    p.set_defaults(run=cmd_grade)
    p = sub.add_parser("similar", help="pairs of submissions whose own code is much alike (copydetect, as MOSS)")
    p.add_argument("submitted", help="folder of <student_id>/<assignment_id>/<notebook>.ipynb")
    p.add_argument("--out", default="similarity.html", help="the report, side by side (default: similarity.html)")
    p.add_argument("--threshold", type=float, default=Similar.threshold,
                   help=f"share of one side's code found in the other (default {Similar.threshold})")
    p.set_defaults(run=cmd_similar)
    p = sub.add_parser("export", help="grades for Canvas's or Moodle's gradebook import, a wide CSV, or a Canvas upload")
    p.add_argument("graded", help="the folder grade wrote (--out of grade), with its results.jsonl")
    p.add_argument("--format", choices=sorted(FORMATS), default="csv", help="the file's columns (default csv)")
    p.add_argument("--roster", help="CSV: student_id and the LMS's ids (name, canvas_id, sis_user_id, sis_login_id, "
                                    "section, email, idnumber, username); without it a course id is the login")
    p.add_argument("--out", help="the file to write (default GRADED/grades-FORMAT.csv)")
    p.add_argument("--gradebook", metavar="COURSE_DIR", help="read the written answers' grades from this nbgrader "
                   "course's gradebook (default: the one grade --gradebook recorded into GRADED)")
    p.add_argument("--canvas-url", help=f"upload to this Canvas instead of writing a file (token: ${CANVAS_TOKEN})")
    p.add_argument("--canvas-course", help="the Canvas course's id, for --canvas-url")
    p.set_defaults(run=cmd_export)
    p = sub.add_parser("bundle", help="zip what students get: release notebooks up to NN, lib references before NN")
    p.add_argument("--upto", required=True, help="last notebook in the bundle: its id or two digits (04)")
    p.add_argument("out", help="the zip file to write")
    p.set_defaults(run=cmd_bundle)
    args = parser.parse_args(argv)
    # SIGTERM stops grade and check as Ctrl-C does: every worker and kernel is stopped, and grade writes what
    # was graded (tests/test_faults.py)
    before = signal.signal(signal.SIGTERM, _interrupt) if args.run in (cmd_grade, cmd_check) else None
    try:
        return args.run(args)
    except KeyboardInterrupt:  # the grader's workers and kernels are stopped by now
        print("\ninterrupted", file=sys.stderr)
        return 130
    finally:
        if before is not None:
            signal.signal(signal.SIGTERM, before)


if __name__ == "__main__":
    sys.exit(main())
