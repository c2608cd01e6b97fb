"""Hidden tests of notebook 09 (long sequences and positions), one module per exercise.

References, computed here in the grader from plain tensor operations: the masks
(``masks.py``), Linformer attention (``linformer.py``) and rotary positions
(``rotary.py``); for ``greedy_decode_cached`` the course's ``lib.transformer``
(notebook 08's ``greedy_decode``, which the cache must reproduce exactly) and a
cached decoder written here with the usual mistakes put in on purpose, so that a
failure can name its cause. Whether each decoding step computes attention for the
newest token only is read off the operators the student's code runs (their names
and output shapes, recorded in the kernel): never from timings.

No PyTorch operator builds these for you, so only the course's references of this
notebook are switched off while graded code runs.
"""
from ..kernel import Bans

REFERENCES = {  # exercise -> its references in lib.local_attention, lib.linformer, lib.rotary, lib.kv_cache
    "sliding_window_mask": ("sliding_window_mask",),
    "global_tokens_mask": ("global_tokens_mask",),
    "LinformerSelfAttention": ("LinformerSelfAttention",),
    "apply_rotary": ("apply_rotary",),
    "greedy_decode_cached": ("greedy_decode_cached",),
}
BANS = Bans(references=tuple(n for v in REFERENCES.values() for n in v))
