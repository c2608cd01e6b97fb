"""A long-lived nbgrader process that autogrades one submission per request.

Importing nbgrader takes seconds; a class of 30 notebooks would pay it 30
times with one ``nbgrader autograde`` process each. ``grade_many`` starts one
worker per job instead, in that worker's scratch course folder, and sends it
requests on stdin, one JSON line each:
``{"assignment": ..., "student": ..., "env": {...}}``. For each, the worker
sets the environment (read by the sandboxed kernel and the Execute step), runs
nbgrader's own autograde for that student, and answers with one line
``@@result {"success": ..., "log": ...}``. The grader kills and replaces a
worker that does not answer in time.

    python -m autograder.worker COURSE_ROOT
"""
import json
import os
import sys

MARK = "@@result "


def main(root: str) -> None:
    from nbgrader.apps import NbGraderAPI
    from traitlets.config.loader import PyFileConfigLoader

    os.chdir(root)
    config = PyFileConfigLoader("nbgrader_config.py", path=root).load_config()
    api = NbGraderAPI(config=config)
    out = sys.stdout
    sys.stdout = sys.stderr  # anything else nbgrader prints stays out of the answers
    out.write(MARK + json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        task = json.loads(line)
        os.environ.update(task["env"])
        result = api.autograde(task["assignment"], task["student"], force=True, create=True)
        answer = {"success": bool(result.get("success")), "log": (result.get("log") or "")[-4000:],
                  "error": (result.get("error") or "")[-2000:]}
        out.write(MARK + json.dumps(answer) + "\n")
        out.flush()


if __name__ == "__main__":
    main(sys.argv[1])
