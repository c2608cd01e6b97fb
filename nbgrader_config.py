# Stock nbgrader reads this file when run from the repository root; the real
# configuration is autograder/nbgrader_config.py.
import os

c = get_config()  # noqa: F821
load_subconfig(os.path.join(os.path.dirname(os.path.abspath(__file__)), "autograder", "nbgrader_config.py"))  # noqa: F821
