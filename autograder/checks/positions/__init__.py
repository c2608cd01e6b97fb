"""Hidden tests of notebook 02 (position vectors), one module per exercise.

References: the expected tables are computed here, in float64, by a formula
written independently of ``lib.positions`` (one frequency per column); the
course's ``sinusoidal_positions`` runs trusted in the kernel for the modules'
exercises. PyTorch has no built-in for position vectors, so only the course's
references are off limits.
"""
import torch

from ..kernel import Bans

REFERENCES = {  # exercise -> its references in lib.positions, in the notebook's order
    "sinusoidal_positions": ("sinusoidal_positions",),
    "SinusoidalPositions": ("SinusoidalPositions",),
    "LearnedPositions": ("LearnedPositions",),
}
BANS = Bans(references=tuple(n for v in REFERENCES.values() for n in v))


def table(max_len, d_model, *, layout="interleaved", first="sin", freq="2i", start=0, op="divide"):
    """A (max_len, d_model) sinusoidal table in float64: right by default, or with one mistake."""
    p = torch.arange(start, start + max_len, dtype=torch.float64)[:, None]
    half = d_model // 2
    i = torch.arange(half, dtype=torch.float64)
    if layout == "interleaved":
        k = torch.arange(d_model, dtype=torch.float64)
        exponent = {"2i": 2 * (k // 2), "i": k // 2, "k": k, "2k": 2 * k, "2i+2": 2 * (k // 2) + 2,
                    "none": 0 * k}[freq] / d_model
    else:
        exponent = torch.cat([2 * i, 2 * i]) / d_model
    scale = 10000.0 ** exponent
    angle = p / scale if op == "divide" else p * scale
    if layout == "interleaved":
        if first == "sin only":
            return torch.sin(angle)
        even = torch.arange(d_model) % 2 == 0
        first_fn, second_fn = (torch.sin, torch.cos) if first == "sin" else (torch.cos, torch.sin)
        return torch.where(even, first_fn(angle), second_fn(angle))
    first_fn, second_fn = (torch.sin, torch.cos) if first == "sin" else (torch.cos, torch.sin)
    return torch.cat([first_fn(angle[:, :half]), second_fn(angle[:, half:])], dim=1)


def expected_table(max_len, d_model):
    """The right table, in float32 like the course's (PyTorch's default dtype)."""
    return table(max_len, d_model).float()
