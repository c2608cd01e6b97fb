"""The instructor's and self-learner's tools, built on stock nbgrader.

    python -m autograder release            regenerate notebooks/ from solutions/
    python -m autograder check NOTEBOOK     grade one notebook against its source
    python -m autograder grade DIR --out D  grade a folder of submissions, write grades.csv
"""
import sys

# nbformat validates notebooks with jsonschema, which imports rfc3987_syntax when it is installed (Jupyter's
# server pulls it in as an extra); that module builds a grammar as it is imported: 0.7 s of CPU in every grading
# process, twice per `grade` run. Notebook schemas check no IRI formats, so the grader goes without it.
sys.modules.setdefault("rfc3987_syntax", None)
