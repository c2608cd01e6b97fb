"""A matplotlib backend for grading: figures are drawn by the student's code but
never rendered to images, which nothing graded looks at (it saves the PNG
encoding of every plot in every graded notebook). Nor are they laid out:
``tight_layout`` measures every label with the renderer, 0.2 s of processor time
a figure, a quarter of a short notebook's kernel. The grader selects it with
``MPLBACKEND=module://autograder.nodisplay``, for the kernels it starts only."""
from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

FigureCanvas = FigureCanvasAgg
FigureManager = FigureManagerBase


def show(*args, **kwargs):
    import matplotlib.pyplot as plt
    plt.close("all")


def _no_layout(figure, *args, **kwargs):
    """Figure.tight_layout (and plt.tight_layout) where nothing is drawn: nothing to lay out."""


Figure.tight_layout = _no_layout
