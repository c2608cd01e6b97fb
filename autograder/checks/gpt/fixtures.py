"""A stand-in for ``sample_next`` that ``generate`` is graded with (runs in the student's kernel: a fixture).

It takes no random numbers: with temperature 0 it returns the most likely token, otherwise the second most
likely one, so the judge can tell the tokens ``generate`` appends from greedy ones. It records the keyword
arguments it was called with (a generator by its type), so the judge can see they were passed on.
"""
import torch

CALLS = []


def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    CALLS.append({"shape": list(logits.shape), "temperature": temperature, "top_k": top_k, "top_p": top_p,
                  "generator": type(generator).__name__ if generator is not None else None})
    if temperature == 0:
        return logits.argmax(dim=-1)
    return logits.topk(2, dim=-1).indices[..., 1]


def calls():
    """What it was called with, then forgotten."""
    out = list(CALLS)
    CALLS.clear()
    return out


def generator(seed):
    """A generator in the kernel, seeded (a generator cannot travel between grader and kernel)."""
    return torch.Generator().manual_seed(seed)
