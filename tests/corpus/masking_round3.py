"""Held-out set 3 (round 3), notebook 04: causal_mask, padding_mask."""
from . import Port

ASSIGNMENT = "04_masking"

PORTS = [
    # --- causal_mask ---------------------------------------------------------------------------------------
    Port("JAX _get_causal_mask (jnp.tril(jnp.ones((T, S), dtype=jnp.bool_)))",
         "jax-ml/jax jax/_src/nn/functions.py, _get_causal_mask(T, S): mask = jnp.tril(jnp.ones((T, S), "
         "dtype=jnp.bool_)); return mask[None, None, :, :] (used by jax.nn.dot_product_attention(is_causal=True); "
         "the two leading axes of its (B, N, T, S) layout dropped, made on `device`)",
         "causal_mask", '''
import torch


def causal_mask(size, device=None):
    T = S = size
    mask = torch.tril(torch.ones((T, S), dtype=torch.bool, device=device))
    return mask
'''),

    Port("x-transformers attend.create_causal_mask (ones(i, j).triu(j - i + 1): True = masked)",
         "lucidrains/x-transformers x_transformers/attend.py, create_causal_mask(i, j, device): return "
         "torch.ones((i, j), device=device, dtype=torch.bool).triu(j - i + 1); Attend uses it as sim = "
         "sim.masked_fill(causal_mask, mask_value), or passes mask = ~causal_mask to the fused kernel",
         "causal_mask", '''
import torch


def create_causal_mask(i, j, device):
    return torch.ones((i, j), device=device, dtype=torch.bool).triu(j - i + 1)


def causal_mask(size, device=None):
    return create_causal_mask(size, size, device=device)
''', breach="returns x-transformers' causal mask, True above the diagonal for the keys to hide: the inverse of "
            "the course's True = may attend",
         names=("inverted", "opposite", "true = may attend", "upper", "above the diagonal", "blocked")),

    Port("TransformerLens AbstractAttention causal mask (tril(ones(n_ctx, n_ctx)).bool(), a CPU buffer moved later)",
         "TransformerLensOrg/TransformerLens transformer_lens/components/abstract_attention.py before #1450 "
         "('Construct causal masks on the fly', commit 80b9567e): causal_mask = torch.tril(torch.ones((n_ctx, "
         "n_ctx)).bool()); self.register_buffer('mask', causal_mask), which reaches the GPU with the module's "
         ".to(device) (here the move written out)",
         "causal_mask", '''
import torch


def causal_mask(size, device=None):
    causal_mask = torch.tril(torch.ones((size, size)).bool())
    return causal_mask.to(device)
''', breach="the mask is built on the CPU and then copied to `device` (TransformerLens's buffer), not made "
            "directly on the device asked for",
         names=("device", "cpu", "copy")),

    # --- padding_mask --------------------------------------------------------------------------------------
    Port("SamLynnEvans/Transformer create_masks: src_mask = (src != opt.src_pad).unsqueeze(-2)",
         "SamLynnEvans/Transformer Batch.py, create_masks(src, trg, opt): src_mask = (src != "
         "opt.src_pad).unsqueeze(-2).to(opt.device) (the device is the tokens' own here)",
         "padding_mask", '''
def padding_mask(tokens, pad_id):
    src_mask = (tokens != pad_id).unsqueeze(-2).to(tokens.device)
    return src_mask
'''),

    Port("OpenNMT-py tgt_pad_mask = tgt.eq(pad_idx).unsqueeze(1) (True = padding)",
         "OpenNMT/OpenNMT-py onmt/decoders/transformer.py (commit 97111d9), TransformerDecoder.forward: "
         "tgt_pad_mask = tgt[:, :, 0].eq(pad_idx).unsqueeze(1)  # [B, 1, T_tgt]; the attention then does "
         "scores.masked_fill(mask, -1e18) (the tokens have no feature axis here)",
         "padding_mask", '''
def padding_mask(tokens, pad_id):
    pad_idx = pad_id
    tgt_pad_mask = tokens.eq(pad_idx).unsqueeze(1)  # [B, 1, T_tgt]
    return tgt_pad_mask
''', breach="True where the token IS padding (OpenNMT-py's masks mark what to hide): the inverse of the course's "
            "True = may attend",
         names=("inverted", "opposite", "true = may attend", "true where the token is", "not pad_id", "padding is true")),

    Port("AllenNLP util.get_text_field_mask (token_tensor != padding_id, shape (batch, num_tokens))",
         "allenai/allennlp allennlp/nn/util.py, get_text_field_mask(text_field_tensors, num_wrapping_dims=0, "
         "padding_id=0): for a 2-D token tensor, return token_tensor != padding_id, a (batch_size, num_tokens) "
         "bool mask (the attention modules add the query axis themselves)",
         "padding_mask", '''
def padding_mask(tokens, pad_id):
    padding_id = pad_id
    token_tensor = tokens
    return token_tensor != padding_id
''', breach="returns a (B, T) mask, without the query axis of the course's (B, 1, T)",
         names=("(b, 1, t)", "shape", "unsqueeze", "(b, t)", "query axis", "middle")),
]
