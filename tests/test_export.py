"""python -m autograder export: Canvas's and Moodle's gradebook CSVs, the wide CSV, and the upload to Canvas through
canvasapi, against a fake Canvas on loopback that records what it is sent (never a real LMS)."""
import csv
import io
import json
import subprocess
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from autograder import course
from autograder.export import ExportError, load_grades, read_roster, upload_to_canvas
from autograder.report import write_grades_csv
from autograder.results import CellResult, NotebookResult, Store

A, B = "01_self_attention", "02_positions"
# Canvas's gradebook import (its own export's layout): five identity columns, then the assignments, and a row of
# the points possible. Moodle's CSV import maps a user by username, ID number or email, and columns to grade items.
CANVAS_IDENTITY = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_IDENTITY = ["Username", "ID number", "Email address", "Full name"]


def result(student, aid, auto, auto_max, written=None, written_max=4.0):
    cells = [CellResult("x", "x", auto, auto_max, False),
             CellResult("why", "why", written or 0.0, written_max, True, graded=written is not None)]
    return NotebookResult(student, aid, f"{aid}.ipynb", cells)


@pytest.fixture
def graded(tmp_path):
    """grade's output folder for three students: ada did both notebooks (her written answer of 01 graded 3),
    'lee, bo' only 01, cy only 02."""
    store = Store(tmp_path / "graded" / "results.jsonl")
    results = [result("ada", A, 11, 11, written=3), result("ada", B, 7, 9), result("lee, bo", A, 8, 11),
               result("cy", B, 0, 9)]
    for r in results:
        store.add(r, "key")
    (tmp_path / "roster.csv").write_text("student_id,name,canvas_id,sis_user_id,sis_login_id,section,email,idnumber,"
                                         "username\nada,\"Lovelace, Ada\",101,S1,ada@uni,Sec A,ada@uni.edu,N1,alove\n"
                                         "\"lee, bo\",Bo Lee,,S2,,Sec B,bo@uni.edu,N2,blee\n")
    return tmp_path / "graded", results


def export(*args):
    return subprocess.run([sys.executable, "-m", "autograder", "export", *map(str, args)], capture_output=True,
                          text=True, cwd=course.ROOT)


def exported(folder, fmt, roster, out):
    """(the rows of the file ``export --format fmt`` wrote, what it said on stderr)."""
    proc = export(folder, "--format", fmt, "--roster", roster, "--out", out)
    assert proc.returncode == 0, proc.stderr
    return list(csv.reader(open(out, newline="", encoding="utf-8"))), proc.stderr


def test_canvas_csv_has_canvas_columns_points_possible_and_mapped_ids(graded, tmp_path):
    got, said = exported(graded[0], "canvas", tmp_path / "roster.csv", tmp_path / "c.csv")
    assert got[0] == CANVAS_IDENTITY + [A, B]
    assert got[1] == ["Points Possible", "", "", "", "", "15", "13"]
    assert got[2] == ["Lovelace, Ada", "101", "S1", "ada@uni", "Sec A", "14", "7"]  # written 3 counted in 01
    assert got[3] == ["cy", "", "", "cy", "", "", "0"]  # not on the roster: the course id is the login
    assert got[4] == ["Bo Lee", "", "S2", "", "Sec B", "8", ""]  # no 02: blank, which Canvas leaves alone
    assert "1 student(s) not in" in said and "cy" in said
    assert "written answers no person has graded" in said


def test_moodle_csv_has_columns_to_map_users_and_grade_items(graded, tmp_path):
    got, _ = exported(graded[0], "moodle", tmp_path / "roster.csv", tmp_path / "m.csv")
    assert got[0] == MOODLE_IDENTITY + [A, B]
    assert got[1] == ["alove", "N1", "ada@uni.edu", "Lovelace, Ada", "14", "7"]
    assert got[2] == ["cy", "", "", "cy", "", "0"]
    assert got[3] == ["blee", "N2", "bo@uni.edu", "Bo Lee", "8", ""]


def test_the_wide_csv_adds_up_and_agrees_with_grades_csv(graded, tmp_path):
    folder, results = graded
    proc = export(folder, "--out", tmp_path / "w.csv")  # csv is the default format
    assert proc.returncode == 0, proc.stderr
    got = {r["student_id"]: r for r in csv.DictReader(open(tmp_path / "w.csv"))}
    assert (got["ada"][A], got["ada"][f"{A} max"], got["ada"]["total"], got["ada"]["total max"]) == \
        ("14", "15", "21", "28")
    assert (got["cy"][A], got["cy"]["total"]) == ("", "0")
    write_grades_csv(results, tmp_path / "grades.csv")  # what grade writes: the same points per notebook
    for row in csv.DictReader(open(tmp_path / "grades.csv")):
        assert got[row["student_id"]][row["assignment"]] == row["score"]


def test_what_cannot_be_exported_is_said(tmp_path, graded):
    proc = export(tmp_path / "nothing", "--format", "canvas")
    assert proc.returncode == 2 and "results.jsonl" in proc.stderr and "does not exist" in proc.stderr
    (tmp_path / "bad.csv").write_text("id,name\n1,x\n")
    proc = export(graded[0], "--roster", tmp_path / "bad.csv")
    assert proc.returncode == 2 and "student_id column" in proc.stderr
    proc = export(graded[0], "--format", "canvas", "--canvas-url", "http://127.0.0.1:9")
    assert proc.returncode == 2 and "CANVAS_API_TOKEN" in proc.stderr


class FakeCanvas(BaseHTTPRequestHandler):
    """The few endpoints canvasapi uses for an upload; every request is recorded on the server."""

    def _reply(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802 - http.server's name
        self.server.seen.append(("GET", self.path, self.headers.get("Authorization"), ""))
        path = urllib.parse.urlparse(self.path).path
        if path == "/api/v1/courses/7":
            return self._reply({"id": 7, "name": "Transformers"})
        if path == "/api/v1/courses/7/assignments":
            return self._reply([{"id": 100 + i, "name": n, "course_id": 7} for i, n in enumerate(self.server.names)])
        self.send_error(404)

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        self.server.seen.append(("POST", self.path, self.headers.get("Authorization"), body))
        self._reply({"id": 900 + len(self.server.seen), "workflow_state": "queued"})

    def log_message(self, *args):
        pass


@pytest.fixture
def canvas():
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeCanvas)
    server.seen, server.names = [], [A, B, "Quiz 1"]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def posted(seen) -> dict:
    """assignment id -> {student key: posted grade} of each bulk update the fake Canvas received."""
    out = {}
    for method, path, _, body in seen:
        if method == "POST":
            aid = int(path.split("/assignments/")[1].split("/")[0])
            assert path.endswith("/submissions/update_grades"), path
            form = urllib.parse.parse_qs(body)
            out[aid] = {k[len("grade_data["):].split("]")[0]: v[0] for k, v in form.items()}
    return out


def test_upload_posts_each_notebooks_grades_by_canvas_or_sis_id(graded, canvas, tmp_path):
    server, url = canvas
    grades, assignments, _ = load_grades(graded[0])
    roster, _ = read_roster(tmp_path / "roster.csv", grades)
    done = upload_to_canvas(grades, assignments, roster, url, "7", "secret-token")
    assert [(aid, n) for aid, n, _ in done] == [(A, 2), (B, 2)]
    assert posted(server.seen) == {100: {"101": "14", "sis_user_id:S2": "8"},
                                   101: {"101": "7", "sis_login_id:cy": "0"}}
    assert all(auth == "Bearer secret-token" for _, _, auth, _ in server.seen)


def test_upload_through_the_command_reads_the_token_from_the_environment(graded, canvas, tmp_path):
    import os
    server, url = canvas
    proc = subprocess.run([sys.executable, "-m", "autograder", "export", str(graded[0]), "--format", "canvas",
                           "--canvas-url", url, "--canvas-course", "7", "--roster", str(tmp_path / "roster.csv")],
                          capture_output=True, text=True, cwd=course.ROOT,
                          env=dict(os.environ, CANVAS_API_TOKEN="env-token"))
    assert proc.returncode == 0, proc.stderr
    assert "posted 2 grade(s) of 01_self_attention" in proc.stdout
    assert "env-token" not in proc.stdout + proc.stderr
    assert {auth for _, _, auth, _ in server.seen} == {"Bearer env-token"}


def test_nothing_is_posted_when_canvas_lacks_an_assignment(graded, canvas, tmp_path):
    server, url = canvas
    server.names = [A]  # 02_positions is not in the course
    grades, assignments, _ = load_grades(graded[0])
    roster, _ = read_roster(None, grades)
    with pytest.raises(ExportError, match="no assignment named 02_positions"):
        upload_to_canvas(grades, assignments, roster, url, "7", "t")
    assert not [s for s in server.seen if s[0] == "POST"]


def test_csv_cells_are_quoted_as_csv_requires(graded, tmp_path):
    folder, _ = graded
    assert export(folder, "--format", "canvas", "--out", tmp_path / "q.csv").returncode == 0
    text = (tmp_path / "q.csv").read_text()
    assert '"lee, bo"' in text  # a comma inside a cell
    assert list(csv.reader(io.StringIO(text)))[-1][0] == "lee, bo"
