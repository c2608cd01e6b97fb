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
# ... and carry the kernel's full language_info, so that JupyterLab opens them unchanged (autograder/release.py).
from autograder.release import KernelLanguageInfo  # noqa: E402
from nbgrader.converters import GenerateAssignment  # noqa: E402

c.GenerateAssignment.preprocessors = list(GenerateAssignment.class_traits()["preprocessors"].default()) + [
    KernelLanguageInfo]

# Each cell's time (autograder/settings.py: 60 s; nbgrader's default is 30 s).
from autograder.settings import Limits  # noqa: E402

c.Execute.timeout = Limits.cell_timeout
c.Execute.interrupt_on_timeout = True
# nbgrader gives up on a notebook when a cell's output arrives more than 4 s
# after its reply, which happens on a busy machine; wait longer.
c.Execute.iopub_timeout = 20
c.Execute.startup_timeout = 120
# Once a notebook is graded its kernel has nothing left to do: stop it at once.
c.Execute.shutdown_kernel = "immediate"

# Our Execute step (autograder/execute.py): a dead or stuck kernel costs only
# the cells from there on, a notebook has a total time limit, output is capped.
# Named by its path, so that it is imported (with PyTorch, for the judges' channel) only by a command that
# autogrades: every nbgrader command and the formgrader's server read this file, and PyTorch's import took 2.4 s.
from nbconvert.preprocessors import ClearMetadataPreprocessor  # noqa: E402
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, IgnorePattern,  # noqa: E402
                                    LimitOutput, SaveAutoGrades)

c.Autograde.autograde_preprocessors = ["autograder.execute.GuardedExecute", IgnorePattern, ClearMetadataPreprocessor,
                                       LimitOutput, SaveAutoGrades, AssignLatePenalties, CheckCellMetadata]
