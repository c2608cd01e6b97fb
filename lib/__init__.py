"""Shared code for the course "Transformers from scratch, autograded".

One module per idea:

- ``device``          picking CUDA / Apple MPS / CPU, and seeding
- ``self_attention``  reference solutions of notebook 01
- ``plots``           attention heatmaps and other pictures
- ``testing``         readable assertions used by the notebooks' checks
- ``guard``           marks the reference code, so graders can switch it off

Later notebooks import earlier components from here, so a student who got
stuck in one notebook can still finish the next.
"""
