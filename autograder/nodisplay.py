"""A matplotlib backend for grading: figures are drawn by the student's code but
never rendered to images, which nothing graded looks at (it saves the PNG
encoding of every plot in every graded notebook). The grader selects it with
``MPLBACKEND=module://autograder.nodisplay``."""
from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg

FigureCanvas = FigureCanvasAgg
FigureManager = FigureManagerBase


def show(*args, **kwargs):
    import matplotlib.pyplot as plt
    plt.close("all")
