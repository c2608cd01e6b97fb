"""Tenth held-out set, notebook 04: ports of Gemma's (JAX) attention-mask helpers, jsbaan/transformer-from-scratch's
construct_future_mask and padding mask, and hyunwoongko/transformer's make_trg_mask, each read at its source."""
from tests.corpus import Port

ASSIGNMENT = "04_masking"

PORTS = [
    Port("gemma_causal", "google-deepmind/gemma gemma/gm/utils/_attention_mask.py _make_causal_mask (causal_mask = "
         "jnp.tril(jnp.ones((seq_len, seq_len), dtype=jnp.bool)), True = may attend; the part that does not depend "
         "on the input mask, JAX to torch)", "causal_mask", r'''
def causal_mask(size: int, device=None) -> torch.Tensor:
    seq_len = size
    return torch.tril(torch.ones((seq_len, seq_len), dtype=torch.bool, device=device))
'''),
    Port("jsbaan_causal", "jsbaan/transformer-from-scratch utils.py construct_future_mask(seq_len) (subsequent_mask = "
         "torch.triu(torch.full((seq_len, seq_len), 1), diagonal=1); return subsequent_mask == 0: 1's for all valid "
         "connections; the course's device argument passed to torch.full)", "causal_mask", r'''
def causal_mask(size: int, device=None) -> torch.Tensor:
    seq_len = size
    subsequent_mask = torch.triu(torch.full((seq_len, seq_len), 1, device=device), diagonal=1)
    return subsequent_mask == 0
'''),
    Port("hyunwoongko_causal", "hyunwoongko/transformer models/model/transformer.py Transformer.make_trg_mask "
         "(trg_sub_mask = torch.tril(torch.ones(trg_len, trg_len)).type(torch.ByteTensor).to(self.device); "
         "the device argument plays self.device)", "causal_mask", r'''
def causal_mask(size: int, device=None) -> torch.Tensor:
    trg_len = size
    trg_sub_mask = torch.tril(torch.ones(trg_len, trg_len)).type(torch.ByteTensor)
    return trg_sub_mask if device is None else trg_sub_mask.to(device)
''', breach="returns a uint8 (ByteTensor) 0/1 matrix instead of a bool mask: ~mask of a uint8 tensor is 255/254, "
            "not a logical not, and masked_fill refuses uint8 masks",
         names=("uint8", "byte", "bool", "dtype", "bytetensor")),
    Port("gemma_padding", "google-deepmind/gemma gemma/gm/utils/_attention_mask.py _make_causal_mask, its padding "
         "part (input_mask: 'True for non-padded tokens only', attn_mask = input_mask[..., None, :], shape [B, 1, L]; "
         "input_mask = tokens != pad_id as the Gemma samplers build it)", "padding_mask", r'''
def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    input_mask = tokens != pad_id                 # True for non-padded tokens only
    if len(input_mask.shape) != 2:
        raise ValueError(
            f'Input mask must be 2D (shape [B, L]), but got {input_mask.shape}.'
        )
    attn_mask = input_mask[..., None, :]
    return attn_mask
'''),
    Port("t5gemma_padding", "google-deepmind/gemma gemma/research/t5gemma/t5gemma.py make_bidirectional_attn_mask("
         "input_mask) (attn_mask = input_mask[..., jnp.newaxis, :] * input_mask[..., :, jnp.newaxis], [B, L, L]; "
         "input_mask = tokens != pad_id)", "padding_mask", r'''
def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    input_mask = tokens != pad_id
    attn_mask = input_mask[..., None, :] * input_mask[..., :, None]
    return attn_mask
''', breach="returns a (B, T, T) mask that hides padding queries (rows) as well as padding keys: the rows of padding "
            "positions are entirely False (their softmax is NaN), and the shape is not (B, 1, T)",
         names=("(b, t, t)", "queries", "rows", "shape", "query")),
    Port("jsbaan_padding", "jsbaan/transformer-from-scratch transformer.py / encoder.py src_padding_mask = "
         "encoder_input != transformer.padding_idx, 'Shape (N, S)' (MultiHeadAttention.mask_logits adds the missing "
         "axes itself with src_padding_mask[:, None, None, :])", "padding_mask", r'''
def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    src_padding_mask = tokens != pad_id
    return src_padding_mask
''', breach="returns a (B, T) mask without the middle query axis: against scores (B, T_q, T_k) it lines the batch up "
            "with the queries (an error, or silently the wrong mask when B == T_q)",
         names=("(b, t)", "unsqueeze", "middle", "shape", "query axis", "broadcast")),
]
