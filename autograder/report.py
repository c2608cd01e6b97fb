"""Print and write grading results."""
import csv
from pathlib import Path

from .grading import NotebookResult


def _fmt(x: float) -> str:
    return f"{x:g}"


def exercise_table(result: NotebookResult) -> str:
    """One line per exercise: points / max, and the first failure message."""
    rows, order = {}, []
    for cell in result.cells:
        if cell.exercise not in rows:
            rows[cell.exercise] = {"score": 0.0, "max": 0.0, "manual": cell.manual, "message": ""}
            order.append(cell.exercise)
        row = rows[cell.exercise]
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
    if manual_max:
        summary += f"; written answers: {_fmt(manual_max)} more points, graded by a person"
    lines.append(summary)
    return "\n".join(lines)


def write_grades_csv(results, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student_id", "assignment", "notebook", "score", "max_score"])
        for r in sorted(results, key=lambda r: (r.student, r.assignment)):
            w.writerow([r.student, r.assignment, r.notebook, _fmt(r.score), _fmt(r.max_score)])
