"""Pick the fastest device there is, and make runs repeatable."""
import os
import random

import torch


def get_device() -> torch.device:
    """CUDA if present, then Apple MPS, then CPU.

    Set the environment variable COURSE_DEVICE (say ``cpu``) to override.
    """
    forced = os.environ.get("COURSE_DEVICE")
    if forced:
        return torch.device(forced)
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def seed_everything(seed: int = 0) -> None:
    """Seed Python's, NumPy's (if installed) and PyTorch's random generators."""
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        return
    np.random.seed(seed)
