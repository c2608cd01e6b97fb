"""Hidden tests of notebook 03 (the position-wise feed-forward network), one module per exercise.

References: PyTorch's built-ins, computed here in the grader, from weights the
judges set themselves; notebook 01's ``scaled_dot_product_attention`` runs
trusted in the kernel for ``stack_attention``. The exercises are built from
nn.Linear, ReLU and dropout, which students may use: only the course's
reference ``FeedForward`` is off limits.
"""
from ..kernel import Bans

REFERENCES = {  # exercise -> its references in lib.feed_forward, in the notebook's order
    "stack_attention": (),
    "FeedForward": ("FeedForward",),
}
BANS = Bans(references=tuple(n for v in REFERENCES.values() for n in v))
