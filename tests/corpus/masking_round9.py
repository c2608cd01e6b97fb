"""Ninth held-out set, notebook 04: ports of the masks of XLM, Meta's lingua, a PyTorch translator, a from-scratch
Transformer and SpeechBrain, each read at its source."""
from tests.corpus import Port

ASSIGNMENT = "04_masking"

PORTS = [
    Port("xlm_causal", "facebookresearch/XLM xlm/model/transformer.py get_masks(slen, lengths, causal=True) "
         "(alen = torch.arange(slen, dtype=torch.long, device=lengths.device); attn_mask = alen[None, None, :]"
         ".repeat(bs, slen, 1) <= alen[None, :, None]; without the batch axis, which comes from lengths, and without its "
         "sanity asserts)",
         "causal_mask", r'''
def causal_mask(size: int, device=None) -> torch.Tensor:
    slen = size
    alen = torch.arange(slen, dtype=torch.long, device=device)
    # triangular inferior attention (causal)
    attn_mask = alen[None, :].repeat(slen, 1) <= alen[:, None]
    return attn_mask
'''),
    Port("lingua_causal", "facebookresearch/lingua lingua/transformer.py causal_mask(b, h, q_idx, kv_idx): "
         "return q_idx >= kv_idx (a FlexAttention mask_mod, here evaluated on a column and a row of "
         "torch.arange(size, device=device) instead of by create_block_mask)", "causal_mask", r'''
def _lingua_causal_mask_mod(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def causal_mask(size: int, device=None) -> torch.Tensor:
    idx = torch.arange(size, device=device)
    return _lingua_causal_mask_mod(None, None, idx[:, None], idx[None, :])
'''),
    Port("aladdin_causal", "aladdinpersson/Machine-Learning-Collection ML/Pytorch/more_advanced/"
         "transformer_from_scratch/transformer_from_scratch.py Transformer.make_trg_mask (trg_mask = torch.tril("
         "torch.ones((trg_len, trg_len))).expand(N, 1, trg_len, trg_len); return trg_mask.to(self.device): a float "
         "mask of ones and zeros, read with mask == 0; without the expand, which needs the batch)", "causal_mask", r'''
def causal_mask(size: int, device=None) -> torch.Tensor:
    trg_len = size
    trg_mask = torch.tril(torch.ones((trg_len, trg_len)))
    return trg_mask.to(device)
''', breach="a float mask of 1.0 and 0.0 (made for masked_fill(mask == 0, ...)) instead of a bool mask, built on the "
            "CPU and then moved to the device",
         names=("bool", "dtype", "float", "device")),
    Port("devjwsong_padding", "devjwsong/transformer-translator-pytorch src/custom_data.py CustomDataset.make_mask "
         "(e_mask = (self.src_data != pad_id).unsqueeze(1)  # (num_samples, 1, L); pad_id is a global of its "
         "constants.py, the argument here)", "padding_mask", r'''
def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    e_mask = (tokens != pad_id).unsqueeze(1)  # (num_samples, 1, L)
    return e_mask
'''),
    Port("speechbrain_padding", "speechbrain/speechbrain speechbrain/lobes/models/transformer/Transformer.py "
         "get_key_padding_mask(padded_input, pad_idx) (key_padded_mask = padded_input.eq(pad_idx): True at the "
         "padding, shape (B, T), PyTorch's key_padding_mask convention)", "padding_mask", r'''
def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    padded_input, pad_idx = tokens, pad_id
    if len(padded_input.shape) == 4:
        bz, time, ch1, ch2 = padded_input.shape
        padded_input = padded_input.reshape(bz, time, ch1 * ch2)

    key_padded_mask = padded_input.eq(pad_idx).to(padded_input.device)

    # if the input is more than 2d, mask the locations where they are silence
    # across all channels
    if len(padded_input.shape) > 2:
        key_padded_mask = key_padded_mask.float().prod(dim=-1).bool()
        return key_padded_mask.detach()

    return key_padded_mask.detach()
''', breach="inverted and the wrong shape: True marks the padding (PyTorch's key_padding_mask convention) and the mask "
            "is (B, T), without the middle axis that broadcasts over the queries",
         names=("inverted", "true where", "(b, 1, t)", "shape", "opposite")),
    Port("xlm_lengths_padding", "facebookresearch/XLM xlm/model/transformer.py get_masks(slen, lengths, causal=False) "
         "(alen = torch.arange(slen, device=lengths.device); mask = alen < lengths[:, None]: a sentence's first "
         "lengths[b] positions are real; XLM's batches carry the lengths, counted here as the non-pad tokens of each "
         "row; unsqueeze(1) gives the course's (B, 1, T), where XLM reshapes it inside the attention; its sanity asserts, "
         "which call .item(), are left out)",
         "padding_mask", r'''
def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    lengths = (tokens != pad_id).sum(dim=1)
    slen = tokens.size(1)
    alen = torch.arange(slen, dtype=torch.long, device=lengths.device)
    mask = alen < lengths[:, None]
    return mask.unsqueeze(1)
''', breach="assumes the padding comes last: the mask keeps the first n positions of a row with n real tokens, so a "
            "left-padded row (or padding in the middle) marks padding as real and real tokens as padding",
         names=("left", "first n", "lengths", "padding always came last", "right")),
]
