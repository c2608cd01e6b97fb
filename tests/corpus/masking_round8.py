"""Eighth held-out set, graded before any change to the judges.

Held-out set 8, notebook 04: ports of WeNet (wenet-e2e/wenet, wenet/utils/mask.py), Hugging Face BLOOM,
open_clip (mlfoundations), gordicaleksa/pytorch-original-transformer and tunz/transformer-pytorch, each read at
its source.
"""
from tests.corpus import Port

ASSIGNMENT = "04_masking"

PORTS = [
    Port(
        "wenet_subsequent_mask",
        "wenet-e2e/wenet wenet/utils/mask.py subsequent_mask (arange.expand(size, size) <= arange.unsqueeze(-1))",
        "causal_mask",
        r'''
def causal_mask(size: int, device=None) -> torch.Tensor:
    """Create mask for subsequent steps (size, size).

    This mask is used only in decoder which works in an auto-regressive mode.
    This means the current step could only do attention with its left steps.
    """
    arange = torch.arange(size, device=device)
    mask = arange.expand(size, size)
    arange = arange.unsqueeze(-1)
    mask = mask <= arange
    return mask
''',
    ),
    Port(
        "bloom_make_causal_mask",
        "huggingface/transformers src/transformers/models/bloom/modeling_bloom.py _make_causal_mask "
        "(torch.ones(..., dtype=torch.bool, device=device).triu_(diagonal=1)), without the batch expand",
        "causal_mask",
        r'''
def causal_mask(size: int, device=None) -> torch.Tensor:
    """
    Make causal mask used for self-attention.
    """
    target_length = size
    mask = torch.ones((target_length, target_length), dtype=torch.bool, device=device)
    mask.triu_(diagonal=1)
    return mask
''',
        breach="BLOOM's causal mask is True where a key must be hidden (the strict upper triangle): the opposite "
               "of the course's True = may attend, so every query would see only its future",
        names=("invert", "opposite", "may attend", "upper triangle", "future"),
    ),
    Port(
        "open_clip_build_causal_mask",
        "mlfoundations/open_clip src/open_clip/transformer.py TextTransformer.build_causal_mask (torch.empty, "
        "fill_(float('-inf')), triu_(1)); the device argument passed to torch.empty",
        "causal_mask",
        r'''
def causal_mask(size: int, device=None) -> torch.Tensor:
    # lazily create causal attention mask, with full attention between the tokens
    # pytorch uses additive attention mask; fill with -inf
    mask = torch.empty(size, size, device=device)
    mask.fill_(float("-inf"))
    mask.triu_(1)  # zero out the lower diagonal
    return mask
''',
        breach="open_clip's causal mask is an additive float mask (0 where allowed, -inf above the diagonal) for "
               "nn.MultiheadAttention, not a boolean mask with True = may attend",
        names=("float", "bool", "additive", "-inf", "dtype"),
    ),
    Port(
        "gordic_src_mask_4d",
        "gordicaleksa/pytorch-original-transformer utils/data_utils.py get_masks_and_count_tokens_src "
        "(src_mask = (src_token_ids_batch != pad_token_id).view(batch_size, 1, 1, -1))",
        "padding_mask",
        r'''
def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    batch_size = tokens.shape[0]

    # src_mask shape = (B, 1, 1, S) check out attention function in transformer_model.py where masks are applied
    # src_mask only masks pad tokens as we want to ignore their representations (no information in there...)
    src_mask = (tokens != pad_id).view(batch_size, 1, 1, -1)
    return src_mask
''',
        breach="the project's source mask has shape (B, 1, 1, S), with a head axis already in place for its "
               "multi-head attention, instead of the course's (B, 1, T)",
        names=("shape", "(b, 1, t)", "(b, 1, 1", "4-d", "dimension", "head axis"),
    ),
    Port(
        "wenet_non_pad_mask_from_lengths",
        "wenet-e2e/wenet wenet/utils/mask.py make_pad_mask / make_non_pad_mask (mask from the lengths, "
        "seq_range >= lengths) with the encoder's .unsqueeze(1); the lengths counted from the tokens, max_len "
        "kept a Python int (WeNet turns it into a tensor, which a meta-device check cannot read back)",
        "padding_mask",
        r'''
def make_pad_mask(lengths, max_len=None):
    """Make mask tensor containing indices of padded part."""
    batch_size = lengths.size(0)
    if max_len is None:
        max_len = torch.max(lengths)
    seq_range = torch.arange(0, max_len, dtype=torch.int64, device=lengths.device)
    seq_range_expand = seq_range.unsqueeze(0).expand(batch_size, max_len)
    seq_length_expand = lengths.unsqueeze(-1)
    mask = seq_range_expand >= seq_length_expand
    return mask


def make_non_pad_mask(lengths, max_len=None):
    """1 for non-padded part and 0 for padded part."""
    return ~make_pad_mask(lengths, max_len)


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    lengths = (tokens != pad_id).sum(-1)                       # (B,)
    return make_non_pad_mask(lengths, tokens.size(1)).unsqueeze(1)   # (B, 1, T)
''',
        breach="WeNet builds the padding mask from sequence lengths, True for the first `length` positions: it "
               "assumes the padding comes at the end, so a left-padded row hides its real tokens and shows its "
               "padding",
        names=("left", "length", "at the end", "first n", "right-padded", "compare each token"),
    ),
    Port(
        "tunz_create_pad_mask",
        "tunz/transformer-pytorch utils/utils.py create_pad_mask (mask = (t == pad).unsqueeze(-2))",
        "padding_mask",
        r'''
def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    t, pad = tokens, pad_id
    mask = (t == pad).unsqueeze(-2)
    return mask
''',
        breach="tunz's pad mask is True at the padding (t == pad), for masked_fill_(mask, -1e9): the inverse of "
               "the course's True = a real token that may be attended",
        names=("invert", "opposite", "== pad", "true at the padding", "may attend"),
    ),
]
