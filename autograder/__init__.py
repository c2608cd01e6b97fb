"""The instructor's and self-learner's tools, built on stock nbgrader.

    python -m autograder release            regenerate notebooks/ from solutions/
    python -m autograder check NOTEBOOK     grade one notebook against its source
    python -m autograder grade DIR --out D  grade a folder of submissions, write grades.csv
"""
