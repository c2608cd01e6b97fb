"""Hidden tests of notebook 11 (efficient attention), one module per exercise.

References, computed here in the grader from plain tensor operations: the
running maximum and sum of a row's blocks (``online_softmax_merge.py``),
attention with its whole score matrix (``tiled_attention.py``), and
grouped-query attention with its key/value heads repeated for each group
(``grouped_query_attention.py``), each with the usual mistakes put in on
purpose so that a wrong answer can be named. Whether tiled attention ever
holds more scores than one block's is read off the shapes of the operators the
student's code runs (recorded in the kernel): never from timings or memory use.

Graded code may not call PyTorch's fused attention operators (banned at the
dispatcher), nor ``nn.MultiheadAttention``, nor the course's references of this
notebook (those of earlier notebooks are allowed).
"""
from ..kernel import Bans

REFERENCES = {  # exercise -> its references in lib.tiled_attention and lib.grouped_query
    "online_softmax_merge": ("online_softmax_merge",),
    "tiled_attention": ("tiled_attention",),
    "GroupedQueryAttention": ("GroupedQueryAttention",),
}
BANS = Bans(ops=("scaled_dot_product", "multi_head"), references=tuple(n for v in REFERENCES.values() for n in v),
            modules=("nn.MultiheadAttention", "F.multi_head_attention_forward"))
