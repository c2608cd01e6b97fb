"""Kernel-side helper of notebook 07's tests (sent to the kernel as trusted code): whether a function hands
back the very object it was given. It holds no expected value: the judge decides what the answer means."""


def same_object(fn, *args):
    """fn(*args), and whether that result is the last argument itself (not a new object)."""
    result = fn(*args)
    return result, result is args[-1]
