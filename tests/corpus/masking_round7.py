"""Seventh held-out set, graded before any change to the judges.

Ports for notebook 04 (masking), from projects no earlier set used: MaxText
(src/maxtext/layers/attention_op.py, the causal mask of generate_attention_mask), ParlAI
(parlai/agents/transformer/modules: the decoder's _create_selfattn_mask and the encoder's padding mask), Burn (Rust,
burn-nn attention/mask.rs generate_autoregressive_mask), Hugging Face transformers masking_utils
(padding_mask_function) and FSMT (make_padding_mask).
"""
from tests.corpus import Port

ASSIGNMENT = "04_masking"

PORTS = [
    Port(
        name="maxtext_causal_iota",
        style="AI-Hypercomputer/maxtext src/maxtext/layers/attention_op.py, AttentionOp.generate_attention_mask "
              "(row_ids / col_ids from broadcasted_iota, causal_mask = col_ids <= row_ids + next_pos), "
              "next_pos = 0, jax.lax.broadcasted_iota as torch.arange",
        cell="causal_mask",
        code=r'''
def causal_mask(size: int, device=None) -> torch.Tensor:
    mask_shape = (size, size)
    # row_ids indicates the position of query
    # col_ids indicates the position of kv
    row_ids = torch.arange(mask_shape[0], dtype=torch.int32, device=device)[:, None].expand(mask_shape)
    col_ids = torch.arange(mask_shape[1], dtype=torch.int32, device=device)[None, :].expand(mask_shape)
    next_pos = 0
    return col_ids <= row_ids + next_pos
''',
    ),
    Port(
        name="parlai_selfattn_mask",
        style="facebookresearch/ParlAI parlai/agents/transformer/modules/decoder.py, "
              "BaseTransformerDecoderLayer._create_selfattn_mask (torch.tril(x.new(time, time).fill_(1)), a mask "
              "of the activations' float dtype that ParlAI's attention compares with 0), without the batch expand",
        cell="causal_mask",
        code=r'''
def causal_mask(size: int, device=None) -> torch.Tensor:
    # make sure that we don't look into the future
    mask = torch.tril(torch.empty(size, size, device=device).fill_(1))
    return mask
''',
        breach="ParlAI's causal mask is a float tensor of 1s and 0s (its attention tests mask == 0), not torch.bool: "
               "used as a boolean mask, ~mask and masked_fill fail or hide nothing",
        names=("bool", "dtype", "float", "boolean"),
    ),
    Port(
        name="burn_autoregressive_mask",
        style="tracel-ai/burn crates/burn-nn/src/modules/attention/mask.rs, generate_autoregressive_mask "
              "(Tensor::<2, Bool>::tril_mask([seq_length, seq_length], 0, device): True above the diagonal, the "
              "positions Burn's attention masks out), without the batch expand",
        cell="causal_mask",
        code=r'''
def causal_mask(size: int, device=None) -> torch.Tensor:
    # tril_mask: true for the elements *above* the diagonal, which Burn's MHA fills with the minimum value
    mask = torch.ones(size, size, dtype=torch.bool, device=device).triu(diagonal=1)
    return mask
''',
        breach="Burn's autoregressive mask marks the positions to hide (True = masked, the future): the course's "
               "convention is the opposite, True = may attend, so used here it lets each token see only the future",
        names=("invert", "opposite", "true = may attend", "may attend", "future", "upper", "j <= i"),
    ),
    Port(
        name="hf_padding_mask_function",
        style="huggingface/transformers src/transformers/masking_utils.py, padding_mask_function (returns "
              "padding_mask[batch_idx, kv_idx] of the 2-D attention_mask, True = real token) expanded over "
              "(batch, kv) indices as _non_vmap_expansion_sdpa does, with a single query index",
        cell="padding_mask",
        code=r'''
def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    attention_mask = tokens != pad_id            # the 2-D attention_mask a tokenizer returns, as booleans

    def padding_mask_function(padding_mask):
        def inner_mask(batch_idx, head_idx, q_idx, kv_idx):
            return padding_mask[batch_idx, kv_idx]
        return inner_mask

    batch_idx = torch.arange(tokens.shape[0], device=tokens.device)[:, None, None]
    kv_idx = torch.arange(tokens.shape[1], device=tokens.device)[None, None, :]
    return padding_mask_function(attention_mask)(batch_idx, None, None, kv_idx)      # (B, 1, T)
''',
    ),
    Port(
        name="parlai_encoder_padding_mask",
        style="facebookresearch/ParlAI parlai/agents/transformer/modules/encoder.py, "
              "TransformerEncoder.forward_embedding (mask = input != self.padding_idx, shape [B, key_len]; "
              "MultiHeadAttention reshapes it to (B, 1, key_len) itself)",
        cell="padding_mask",
        code=r'''
def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    mask = tokens != pad_id
    return mask
''',
        breach="ParlAI's padding mask is (B, T): its attention adds the query axis itself. Without the middle 1 it "
               "does not broadcast against scores (B, T_q, T_k): the batch axis lines up with the queries",
        names=("shape", "(B, 1, T)", "unsqueeze", "broadcast", "middle", "query axis", "dimension"),
    ),
    Port(
        name="fsmt_make_padding_mask",
        style="huggingface/transformers src/transformers/models/fsmt/modeling_fsmt.py, make_padding_mask (\"True "
              "for pad tokens\", input_ids.eq(padding_idx), None when nothing is padded)",
        cell="padding_mask",
        code=r'''
def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """True for pad tokens"""
    padding_mask = tokens.eq(pad_id)
    if not padding_mask.any():
        padding_mask = None
    return padding_mask
''',
        breach="FSMT's padding mask (fairseq's key_padding_mask) is True for the pad tokens, the opposite of "
               "True = may attend; it is (B, T) without the query axis, and None when no token is padding",
        names=("invert", "opposite", "true = may attend", "may attend", "None", "shape", "(B, 1, T)"),
    ),
]
