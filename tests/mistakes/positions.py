"""Mistake catalogue of notebook 02 (position vectors)."""
from . import Alternative, Mistake

ASSIGNMENT = "02_positions"

_TABLE_HEAD = '''
def sinusoidal_positions(max_len, d_model):
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    p = torch.arange(max_len, dtype=torch.float32)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
'''

_SIN_MODULE = '''
from torch import nn
class SinusoidalPositions(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.max_len = max_len
        {init}
    def forward(self, x):
        T = x.shape[1]
        if T > self.max_len:
            raise ValueError(f"sequence length {{T}} is longer than max_len {{self.max_len}}")
        {forward}
'''

_LEARNED_MODULE = '''
from torch import nn
class LearnedPositions(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.max_len = max_len
        {init}
    def forward(self, x):
        T = x.shape[1]
        {check}
        {forward}
'''
_CHECK = 'if T > self.max_len:\n            raise ValueError(f"sequence length {T} is longer than max_len {self.max_len}")'
_BUFFER = 'self.register_buffer("pe", sinusoidal_positions(max_len, d_model))'


def sin_module(init=_BUFFER, forward="return x + self.pe[:T].to(x.dtype)"):
    return _SIN_MODULE.format(init=init, forward=forward)


def learned_module(init="self.table = nn.Parameter(torch.randn(max_len, d_model) * 0.02)",
                   forward="return x + self.table[:T]", check=_CHECK):
    return _LEARNED_MODULE.format(init=init, forward=forward, check=check)


MISTAKES = [
    # --- sinusoidal_positions
    Mistake("sin and cos swapped (cos on the even dimensions)", "sinusoidal_positions", _TABLE_HEAD + '''
    angle = p / 10000 ** (two_i / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.cos(angle)
    pe[:, 1::2] = torch.sin(angle)
    return pe
''', ("sinusoidal_positions_formula",), "sin and cos are swapped"),
    Mistake("first half sin, second half cos (the slide erratum)", "sinusoidal_positions", _TABLE_HEAD + '''
    angle = p / 10000 ** (two_i / d_model)
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=-1)
''', ("sinusoidal_positions_formula",), "Interleave them"),
    Mistake("exponent i instead of 2i", "sinusoidal_positions", _TABLE_HEAD + '''
    angle = p / 10000 ** ((two_i / 2) / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe
''', ("sinusoidal_positions_formula",), "uses i instead of 2i"),
    Mistake("odd dimensions with their own frequency 10000^((2i+1)/d)", "sinusoidal_positions", _TABLE_HEAD + '''
    k = torch.arange(d_model, dtype=torch.float32)
    angle = p / 10000 ** (k / d_model)
    return torch.where(k % 2 == 0, torch.sin(angle), torch.cos(angle))
''', ("sinusoidal_positions_formula",), "same frequency as dimension 2i"),
    Mistake("integer division in the exponent (all frequencies 1)", "sinusoidal_positions", _TABLE_HEAD + '''
    angle = p / 10000 ** (two_i.long() // d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe
''', ("sinusoidal_positions_formula",), "integer division"),
    Mistake("positions from 1", "sinusoidal_positions", _TABLE_HEAD + '''
    angle = (p + 1) / 10000 ** (two_i / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe
''', ("sinusoidal_positions_formula",), "positions start at 0"),
    Mistake("10000^(2i/d) multiplied instead of divided", "sinusoidal_positions", _TABLE_HEAD + '''
    angle = p * 10000 ** (two_i / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe
''', ("sinusoidal_positions_formula",), "divide it instead"),
    Mistake("only sines (one formula for every dimension)", "sinusoidal_positions", _TABLE_HEAD + '''
    k = torch.arange(d_model, dtype=torch.float32)
    return torch.sin(p / 10000 ** (k / d_model))
''', ("sinusoidal_positions_formula",), "every dimension is a sine"),
    Mistake("table built with NumPy (float64)", "sinusoidal_positions", '''
import numpy as np
def sinusoidal_positions(max_len, d_model):
    if d_model % 2:
        raise ValueError("d_model must be even")
    angle = np.arange(max_len)[:, None] / 10000 ** (np.arange(0, d_model, 2) / d_model)
    pe = np.zeros((max_len, d_model))
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)
    return torch.from_numpy(pe)
''', ("sinusoidal_positions_formula",), "build the table in float32"),
    Mistake("no ValueError for an odd d_model", "sinusoidal_positions", '''
def sinusoidal_positions(max_len, d_model):
    p = torch.arange(max_len, dtype=torch.float32)[:, None]
    angle = p / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe
''', ("sinusoidal_positions_odd",), "raise a ValueError"),
    Mistake("odd d_model silently truncated", "sinusoidal_positions", '''
def sinusoidal_positions(max_len, d_model):
    p = torch.arange(max_len, dtype=torch.float32)[:, None]
    angle = p / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    pe = torch.stack([torch.sin(angle), torch.cos(angle)], dim=-1).reshape(max_len, -1)
    return pe[:, :d_model]
''', ("sinusoidal_positions_odd",), "returned a tensor of shape (10, 7)"),
    Mistake("sinusoidal_positions importing the course reference", "sinusoidal_positions", '''
from lib.positions import sinusoidal_positions
''', ("sinusoidal_positions_formula", "sinusoidal_positions_odd"), "not defined"),  # lib.positions is not there while 02 is graded
    Mistake("odd d_model refused with assert (AssertionError, not ValueError)", "sinusoidal_positions", '''
def sinusoidal_positions(max_len, d_model):
    assert d_model % 2 == 0, "d_model must be even"
    p = torch.arange(max_len, dtype=torch.float32)[:, None]
    angle = p / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe
''', ("sinusoidal_positions_odd",), "raised AssertionError"),
    # --- SinusoidalPositions
    Mistake("SinusoidalPositions adds the whole table", "SinusoidalPositions",
            sin_module(forward="return x + self.pe.to(x.dtype)"),
            ("SinusoidalPositions_forward",), "first T rows"),
    Mistake("SinusoidalPositions slices by the batch size", "SinusoidalPositions",
            sin_module(forward="return x + self.pe[:x.shape[0]].to(x.dtype)"),
            ("SinusoidalPositions_forward",), "first T rows", also=('SinusoidalPositions_too_long',)),
    Mistake("SinusoidalPositions returns only the position vectors", "SinusoidalPositions",
            sin_module(forward="return self.pe[:T].to(x.dtype).expand_as(x)"),
            ("SinusoidalPositions_forward",), "not the vectors alone"),
    Mistake("SinusoidalPositions scales x by sqrt(d_model)", "SinusoidalPositions",
            sin_module(forward="return x * math.sqrt(x.shape[-1]) + self.pe[:T].to(x.dtype)"),
            ("SinusoidalPositions_forward",), "sqrt(d_model)"),
    Mistake("SinusoidalPositions without a length check", "SinusoidalPositions", '''
from torch import nn
class SinusoidalPositions(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.register_buffer("pe", sinusoidal_positions(max_len, d_model))
    def forward(self, x):
        return x + self.pe[:x.shape[1]].to(x.dtype)
''', ("SinusoidalPositions_too_long",), "must raise a ValueError"),
    Mistake("SinusoidalPositions refuses T == max_len (off by one)", "SinusoidalPositions", '''
from torch import nn
class SinusoidalPositions(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.max_len = max_len
        self.register_buffer("pe", sinusoidal_positions(max_len, d_model))
    def forward(self, x):
        if x.shape[1] >= self.max_len:
            raise ValueError(f"sequence length {x.shape[1]} is too long for max_len {self.max_len}")
        return x + self.pe[:x.shape[1]].to(x.dtype)
''', ("SinusoidalPositions_too_long",), "exactly max_len = 7 long is allowed", also=('SinusoidalPositions_forward',)),
    Mistake("SinusoidalPositions table as an nn.Parameter", "SinusoidalPositions",
            sin_module(init="self.pe = nn.Parameter(sinusoidal_positions(max_len, d_model))"),
            ("SinusoidalPositions_buffer",), "register_buffer"),
    Mistake("SinusoidalPositions table as a plain tensor attribute", "SinusoidalPositions",
            sin_module(init="self.pe = sinusoidal_positions(max_len, d_model)"),
            ("SinusoidalPositions_buffer",), "stayed on the CPU"),
    Mistake("SinusoidalPositions building a CPU table inside forward", "SinusoidalPositions",
            sin_module(init="self.d_model = d_model",
                       forward="return x + sinusoidal_positions(T, self.d_model).to(x.dtype)"),
            ("SinusoidalPositions_buffer",), "device=x.device"),
    Mistake("SinusoidalPositions not keeping x's dtype", "SinusoidalPositions",
            sin_module(forward="return x + self.pe[:T]"),
            ("SinusoidalPositions_buffer",), "must keep x's dtype"),
    Mistake("SinusoidalPositions table as a plain attribute, moved to x's device in forward", "SinusoidalPositions",
            sin_module(init="self.pe = sinusoidal_positions(max_len, d_model)",
                       forward="return x + self.pe[:T].to(device=x.device, dtype=x.dtype)"),
            ("SinusoidalPositions_buffer",), "stayed on the CPU"),
    # --- LearnedPositions
    Mistake("LearnedPositions as a plain tensor (never trained)", "LearnedPositions",
            learned_module(init="self.table = torch.randn(max_len, d_model) * 0.02"),
            ("LearnedPositions_forward", "LearnedPositions_trained"), "no trainable parameters"),
    Mistake("LearnedPositions starting from zeros", "LearnedPositions",
            learned_module(init="self.table = nn.Parameter(torch.zeros(max_len, d_model))"),
            ("LearnedPositions_trained",), "start all zero"),
    Mistake("LearnedPositions using the table's .data (no gradient)", "LearnedPositions",
            learned_module(forward="return x + self.table.data[:T]"),
            ("LearnedPositions_trained",), "no gradient can reach it"),
    Mistake("LearnedPositions with positions from 1", "LearnedPositions",
            learned_module(init="self.table = nn.Parameter(torch.randn(max_len + 1, d_model) * 0.02)",
                           forward="return x + self.table[1:T + 1]"),
            ("LearnedPositions_forward",), "positions run from 0", also=('LearnedPositions_trained',)),
    Mistake("LearnedPositions with an nn.Embedding and no length check (IndexError)", "LearnedPositions",
            learned_module(init="self.embedding = nn.Embedding(max_len, d_model)",
                           forward="return x + self.embedding(torch.arange(T, device=x.device))", check="pass"),
            ("LearnedPositions_too_long",), "must raise a ValueError"),
    Mistake("LearnedPositions raising a ValueError that names no numbers", "LearnedPositions",
            learned_module(check='if T > self.max_len:\n            raise ValueError("sequence too long")'),
            ("LearnedPositions_too_long",), "name both numbers"),
    Mistake("LearnedPositions with an extra bias parameter", "LearnedPositions",
            learned_module(init="self.table = nn.Parameter(torch.randn(max_len, d_model) * 0.02)\n"
                                "        self.bias = nn.Parameter(torch.zeros(d_model))",
                           forward="return x + self.table[:T] + self.bias"),
            ("LearnedPositions_forward", "LearnedPositions_trained"), "exactly max_len * d_model"),
    Mistake("LearnedPositions adding a copy of the table made in __init__", "LearnedPositions",
            learned_module(init="self.table = nn.Parameter(torch.randn(max_len, d_model) * 0.02)\n"
                                "        self.frozen = self.table.detach().clone()",
                           forward="return x + self.frozen[:T]"),
            ("LearnedPositions_forward", "LearnedPositions_trained"), "not a copy made in __init__", elsewhere='not .data, .detach() or a copy'),
    Mistake("LearnedPositions starting with the same vector at every position", "LearnedPositions",
            learned_module(init="self.table = nn.Parameter(torch.ones(max_len, d_model))"),
            ("LearnedPositions_trained",), "every position starts with the same vector"),
    Mistake("LearnedPositions with nn.Embedding(..., padding_idx=0)", "LearnedPositions",
            learned_module(init="self.embedding = nn.Embedding(max_len, d_model, padding_idx=0)",
                           forward="return x + self.embedding(torch.arange(T, device=x.device))"),
            ("LearnedPositions_trained",), "padding_idx"),
    Mistake("LearnedPositions scaling its vectors by 1/sqrt(d_model) before the add", "LearnedPositions",
            learned_module(forward="return x + self.table[:T] * x.shape[-1] ** -0.5"),
            ("LearnedPositions_forward",), "the position vectors are scaled by", also=("LearnedPositions_trained",)),
]

ALTERNATIVES = [
    Alternative("table from a Python loop with math.sin and math.cos", "sinusoidal_positions", '''
def sinusoidal_positions(max_len, d_model):
    if d_model % 2 != 0:
        raise ValueError(f"d_model = {d_model} is odd")
    rows = []
    for pos in range(max_len):
        row = []
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            row += [math.sin(angle), math.cos(angle)]
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float32).reshape(max_len, d_model)
'''),
    Alternative("table from torch.stack and reshape, with exp/log frequencies", "sinusoidal_positions", '''
def sinusoidal_positions(max_len, d_model):
    if d_model % 2:
        raise ValueError("odd d_model")
    position = torch.arange(max_len).float().unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    angle = position * div_term
    return torch.stack((angle.sin(), angle.cos()), dim=-1).flatten(1)
'''),
    Alternative("table computed in float64, returned as float32", "sinusoidal_positions", '''
def sinusoidal_positions(max_len, d_model):
    if d_model % 2:
        raise ValueError(f"d_model={d_model} must be even")
    p = torch.arange(max_len, dtype=torch.float64)[:, None]
    angle = p / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.float()
'''),
    Alternative("SinusoidalPositions computing the table in forward on x's device", "SinusoidalPositions", '''
from torch import nn
class SinusoidalPositions(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.max_len, self.d_model = max_len, d_model
    def forward(self, x):
        T = x.size(-2)
        if T > self.max_len:
            raise ValueError(f"T = {T} > max_len = {self.max_len}")
        p = torch.arange(T, device=x.device, dtype=torch.float32)[:, None]
        two_i = torch.arange(0, self.d_model, 2, device=x.device, dtype=torch.float32)
        angle = p / 10000 ** (two_i / self.d_model)
        pe = torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(T, self.d_model)
        return x + pe.to(x.dtype)
'''),
    Alternative("SinusoidalPositions with a persistent buffer and type_as", "SinusoidalPositions", '''
from torch import nn
class SinusoidalPositions(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.register_buffer("table", sinusoidal_positions(max_len, d_model).unsqueeze(0))
    def forward(self, x):
        if x.size(1) > self.table.size(1):
            raise ValueError(f"input of length {x.size(1)} exceeds max_len={self.table.size(1)}")
        return x + self.table[:, : x.size(1)].type_as(x)
'''),
    Alternative("LearnedPositions with nn.Embedding and position indices", "LearnedPositions",
                learned_module(init="self.embedding = nn.Embedding(max_len, d_model)",
                               forward="return x + self.embedding(torch.arange(T, device=x.device))")),
    Alternative("LearnedPositions with a (1, max_len, d_model) parameter", "LearnedPositions",
                learned_module(init="self.pos = nn.Parameter(torch.empty(1, max_len, d_model))\n"
                                    "        nn.init.normal_(self.pos, std=0.02)",
                               forward="return x + self.pos[:, :T]")),
    Alternative("LearnedPositions with one column per position (d_model, max_len)", "LearnedPositions",
                learned_module(init="self.P = nn.Parameter(torch.randn(d_model, max_len))",
                               forward="return x + self.P[:, :T].T")),
]
