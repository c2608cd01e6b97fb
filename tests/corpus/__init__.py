"""Code the course did not write: implementations of the exercises in the styles of public projects (The
Annotated Transformer, nanoGPT, d2l, the PyTorch documentation, LLaMA, Hugging Face, blog posts), ported to the
course's API with the smallest changes that fit it. One module per notebook.

Unlike the mistake catalogue (tests/mistakes/), these were written from what those projects do, not from the
grader's messages: a port keeps its project's conventions, and where a convention breaks the course's contract
the entry says so (``breach``) and lists the words a message naming that cause would contain (``names``), chosen
before the port was graded. tests/test_mistakes.py grades every port: faithful ones keep full marks, breaches
lose points, and it reports the share of breaches whose message names the cause.
"""
from dataclasses import dataclass


@dataclass
class Port:
    name: str
    style: str          # the project (and file or section) whose convention the port follows
    cell: str           # grade_id of the answer cell the port fills
    code: str           # the port
    breach: str = ""    # what breaks the course's contract, in words ('' = a faithful port)
    names: tuple = ()   # a message naming the breach contains one of these (case-insensitive)
