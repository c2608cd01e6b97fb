"""Hidden tests of notebook 10 (a GPT), one module per exercise.

References, computed here in the grader: the course's ``lib.gpt`` (the model and its
loss) and ``lib.sampling`` (``sample_next`` and ``generate``), and the usual mistakes put
into the same computations on purpose, so that a wrong answer can be named. Sampling is
judged on many draws from a seeded generator (the frequencies, and which tokens can ever
come out), never on one draw. Whether ``generate`` runs each new token alone against a cache
is read off the shapes of the operators the student's code runs.

Graded code may not call PyTorch's fused attention and Transformer operators, nor its
cross-entropy (``lm_loss`` is the exercise), nor the course's references of this notebook.
``generate`` is graded with a ``sample_next`` of the grader's (``fixtures.py``), so that a
mistake in ``sample_next`` costs only its own points.
"""
from ..kernel import Bans

REFERENCES = {  # exercise -> its references in lib.gpt and lib.sampling, in the notebook's order
    "GPT": ("GPT",),
    "lm_loss": ("lm_loss",),
    "sample_next": ("sample_next",),
    "generate": ("generate",),
}
BANS = Bans(ops=("transformer", "multi_head", "scaled_dot_product", "cross_entropy", "nll_loss"),
            references=tuple(n for v in REFERENCES.values() for n in v),
            modules=("nn.Transformer", "nn.TransformerEncoder", "nn.TransformerDecoder", "nn.TransformerEncoderLayer",
                     "nn.TransformerDecoderLayer", "nn.MultiheadAttention", "F.multi_head_attention_forward",
                     "nn.CrossEntropyLoss", "nn.NLLLoss", "F.cross_entropy", "F.nll_loss"))
FIXTURES = ("autograder.checks.gpt.fixtures",)
