# The course's nbgrader configuration. Stock nbgrader commands run from the
# repository root read it through the root nbgrader_config.py; the project's
# own commands (python -m autograder ...) load it too, then point the course
# root at a scratch folder.
import os

c = get_config()  # noqa: F821 - provided by traitlets when it loads this file

c.CourseDirectory.root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
c.CourseDirectory.course_id = "transformers-from-scratch"

# The visible check cells and graded test cells are read-only and restored from
# the gradebook at grading time; students fill in only the solution cells.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Each cell has 60 s (nbgrader's default is 30 s); no test cell needs more than 2 s.
c.Execute.timeout = 60
c.Execute.interrupt_on_timeout = True
