"""How large a tensor does a computation create? The largest tensor any PyTorch operator makes while it runs.

Used by notebook 11 as "peak score memory": full attention makes a (T_q, T_k) score
matrix per head, tiled attention a (T_q, block) slice at most. Only tensors with memory
of their own count: views (slices, transposes) and in-place results reuse their input's.
Operators inside a fused kernel are invisible here: only what the kernel returns counts.
"""
import torch
from torch.utils._pytree import tree_flatten
from torch.utils._python_dispatch import TorchDispatchMode

from lib.guard import without_dynamo


@without_dynamo
class LargestTensor(TorchDispatchMode):
    """Records the largest new tensor (by bytes) that an operator returns inside ``with LargestTensor() as big:``.

    big.bytes, big.numel, big.shape and big.op (the operator's name) describe it.
    """

    def __init__(self):
        super().__init__()
        self.bytes, self.numel, self.shape, self.op = 0, 0, (), None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        given = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        inputs = {t.untyped_storage().data_ptr() for t in given}
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in inputs:
                nbytes = t.numel() * t.element_size()
                if nbytes > self.bytes:
                    self.bytes, self.numel, self.shape, self.op = nbytes, t.numel(), tuple(t.shape), func.__name__
        return out


def largest_tensor(fn, *args, **kwargs) -> LargestTensor:
    """Run fn(*args, **kwargs); return the record of the largest tensor it created (.bytes, .numel, .shape, .op)."""
    with LargestTensor() as big:
        fn(*args, **kwargs)
    return big


def largest_tensor_bytes(fn, *args, **kwargs) -> int:
    """Bytes of the largest tensor any operator created while fn(*args, **kwargs) ran."""
    return largest_tensor(fn, *args, **kwargs).bytes
