"""Mistake catalogue of notebook 04 (masking)."""
from . import Alternative, Mistake

ASSIGNMENT = "04_masking"

MISTAKES = [
    Mistake("causal mask without the diagonal (the j < i erratum)", "causal_mask", '''
def causal_mask(size, device=None):
    return torch.ones(size, size, dtype=torch.bool, device=device).tril(-1)
''', ("causal_mask_values", "causal_mask_attention"), "Slides that write j < i are wrong"),
    Mistake("causal mask as the upper triangle (the future)", "causal_mask", '''
def causal_mask(size, device=None):
    return torch.ones(size, size, dtype=torch.bool, device=device).triu()
''', ("causal_mask_values", "causal_mask_attention"), "upper triangle"),
    Mistake("causal mask inverted (True = blocked)", "causal_mask", '''
def causal_mask(size, device=None):
    return torch.ones(size, size, dtype=torch.bool, device=device).triu(1)
''', ("causal_mask_values", "causal_mask_attention"), "True where attention is blocked"),
    Mistake("causal mask of floats 0/1", "causal_mask", '''
def causal_mask(size, device=None):
    return torch.tril(torch.ones(size, size, device=device))
''', ("causal_mask_values", "causal_mask_attention"), "dtype torch.float32"),
    Mistake("causal mask of integers", "causal_mask", '''
def causal_mask(size, device=None):
    return torch.ones(size, size, dtype=torch.int64, device=device).tril()
''', ("causal_mask_values", "causal_mask_attention"), "a mask must be boolean"),
    Mistake("causal mask is PyTorch's additive float mask", "causal_mask", '''
from torch import nn
def causal_mask(size, device=None):
    return nn.Transformer.generate_square_subsequent_mask(size, device=device)
''', ("causal_mask_values", "causal_mask_attention"), "additive float mask"),
    Mistake("causal mask with a batch dimension (1, size, size)", "causal_mask", '''
def causal_mask(size, device=None):
    return torch.ones(1, size, size, dtype=torch.bool, device=device).tril()
''', ("causal_mask_values",), "without a leading batch dimension"),
    Mistake("causal mask ignores the device", "causal_mask", '''
def causal_mask(size, device=None):
    return torch.ones(size, size, dtype=torch.bool).tril()
''', ("causal_mask_device",), "returned a mask on the cpu device"),
    Mistake("causal mask built on the CPU, then moved", "causal_mask", '''
def causal_mask(size, device=None):
    mask = torch.ones(size, size, dtype=torch.bool).tril()
    return mask.to(device) if device is not None else mask
''', ("causal_mask_device",), "on the CPU (operator 'ones') and moved it"),
    Mistake("causal mask importing the course reference", "causal_mask", '''
from lib.masking import causal_mask
''', ("causal_mask_values", "causal_mask_attention", "causal_mask_device"),
            "not defined"),  # lib.masking is not there while 04 is graded
    Mistake("padding mask of shape (B, T)", "padding_mask", '''
def padding_mask(tokens, pad_id):
    return tokens != pad_id
''', ("padding_mask_values", "padding_mask_attention"), "expected (B, 1, T)"),
    Mistake("padding mask of shape (B, T, 1) (hides queries)", "padding_mask", '''
def padding_mask(tokens, pad_id):
    return (tokens != pad_id).unsqueeze(-1)
''', ("padding_mask_values", "padding_mask_attention"), "masks the queries"),
    Mistake("padding mask True at the padding", "padding_mask", '''
def padding_mask(tokens, pad_id):
    return (tokens == pad_id).unsqueeze(1)
''', ("padding_mask_values", "padding_mask_attention"), "True at the padding"),
    Mistake("padding mask ignores pad_id (always 0)", "padding_mask", '''
def padding_mask(tokens, pad_id):
    return (tokens != 0).unsqueeze(1)
''', ("padding_mask_values", "padding_mask_attention"), "ignores the pad_id argument"),
    Mistake("padding mask of floats", "padding_mask", '''
def padding_mask(tokens, pad_id):
    return (tokens != pad_id).float().unsqueeze(1)
''', ("padding_mask_values", "padding_mask_attention"), "dtype torch.float32"),
    Mistake("padding mask expanded to (B, T, T)", "padding_mask", '''
def padding_mask(tokens, pad_id):
    B, T = tokens.shape
    return (tokens != pad_id)[:, None, :].expand(B, T, T)
''', ("padding_mask_values",), "(B, T, T)"),
    Mistake("padding mask made on the CPU", "padding_mask", '''
def padding_mask(tokens, pad_id):
    mask = torch.zeros(tokens.shape[0], 1, tokens.shape[1], dtype=torch.bool)
    mask[:, 0, :] = tokens != pad_id
    return mask
''', ("padding_mask_device",), "derive the mask from the tokens"),
    Mistake("padding mask from the lengths (assumes right padding)", "padding_mask", '''
def padding_mask(tokens, pad_id):
    lengths = (tokens != pad_id).sum(-1, keepdim=True)
    return (torch.arange(tokens.shape[-1], device=tokens.device) < lengths).unsqueeze(1)
''', ("padding_mask_values", "padding_mask_attention"), "padding sits at the end of each row"),
    Mistake("padding mask importing the course reference", "padding_mask", '''
from lib.masking import padding_mask
''', ("padding_mask_values", "padding_mask_attention", "padding_mask_device"),
            "not defined"),  # lib.masking is not there while 04 is graded
]

ALTERNATIVES = [
    Alternative("causal mask by comparing aranges", "causal_mask", '''
def causal_mask(size, device=None):
    i = torch.arange(size, device=device)
    return i[None, :] <= i[:, None]
'''),
    Alternative("causal mask from a float tril, then .bool()", "causal_mask", '''
def causal_mask(size, device=None):
    return torch.tril(torch.ones(size, size, device=device)).bool()
'''),
    Alternative("causal mask as the complement of triu(1)", "causal_mask", '''
def causal_mask(size, device=None):
    return ~torch.ones(size, size, dtype=torch.bool, device=device).triu(diagonal=1)
'''),
    Alternative("causal mask filled row by row", "causal_mask", '''
def causal_mask(size, device=None):
    mask = torch.zeros(size, size, dtype=torch.bool, device=device)
    for i in range(size):
        mask[i, : i + 1] = True
    return mask
'''),
    Alternative("causal mask from a full True tensor", "causal_mask", '''
def causal_mask(size, device=None):
    return torch.full((size, size), True, device=device).tril()
'''),
    Alternative("padding mask with ne and None-indexing", "padding_mask", '''
def padding_mask(tokens, pad_id):
    return tokens.ne(pad_id)[:, None, :]
'''),
    Alternative("padding mask with view", "padding_mask", '''
def padding_mask(tokens, pad_id):
    B, T = tokens.shape
    return (tokens != pad_id).view(B, 1, T)
'''),
    Alternative("padding mask with torch.where", "padding_mask", '''
def padding_mask(tokens, pad_id):
    return torch.where(tokens == pad_id, False, True).unsqueeze(1)
'''),
    Alternative("padding mask: ones_like, then False at the padding", "padding_mask", '''
def padding_mask(tokens, pad_id):
    mask = torch.ones_like(tokens, dtype=torch.bool).masked_fill(tokens == pad_id, False)
    return mask[:, None, :]
'''),
]
