"""Fourth held-out set, notebook 04: BART, litgpt, the F.scaled_dot_product_attention docs, HF, fairseq, Flax."""
from . import Port

ASSIGNMENT = "04_masking"

PORTS = [
    Port("Hugging Face BART _make_causal_mask (finfo.min everywhere, masked_fill_ 0 on and below the diagonal)",
         "huggingface/transformers models/bart/modeling_bart.py (4.2x), _make_causal_mask: mask = torch.full("
         "(tgt_len, tgt_len), torch.finfo(dtype).min, device=device); mask_cond = torch.arange(mask.size(-1), "
         "device=device); mask.masked_fill_(mask_cond < (mask_cond + 1).view(mask.size(-1), 1), 0) (no batch / past "
         "expansion)", "causal_mask", '''
def causal_mask(size, device=None, dtype=torch.float32):
    tgt_len = size
    mask = torch.full((tgt_len, tgt_len), torch.finfo(dtype).min, device=device)
    mask_cond = torch.arange(mask.size(-1), device=device)
    mask.masked_fill_(mask_cond < (mask_cond + 1).view(mask.size(-1), 1), 0)
    mask = mask.to(dtype)
    return mask
''', breach="an additive float mask (0 where allowed, the dtype's minimum above the diagonal) instead of a boolean "
            "mask with True = may attend", names=("bool", "dtype", "float", "additive")),
    Port("litgpt build_mask_cache (torch.ones(..., dtype=torch.bool, device=device), tril, unsqueeze(0).unsqueeze(0))",
         "Lightning-AI/litgpt litgpt/model.py, build_mask_cache(max_seq_length, device): ones = torch.ones("
         "(max_seq_length, max_seq_length), device=device, dtype=torch.bool); return torch.tril(ones).unsqueeze(0)"
         ".unsqueeze(0)", "causal_mask", '''
def causal_mask(size, device=None):
    ones = torch.ones((size, size), device=device, dtype=torch.bool)
    return torch.tril(ones).unsqueeze(0).unsqueeze(0)
''', breach="returns shape (1, 1, size, size) (batch and head axes added) instead of (size, size)",
         names=("shape", "(size, size)", "dimension")),
    Port("PyTorch F.scaled_dot_product_attention documentation reference (temp_mask = torch.ones(L, S, "
         "dtype=torch.bool).tril(diagonal=0))",
         "pytorch/pytorch torch/nn/functional.py docstring of scaled_dot_product_attention, the reference "
         "implementation: if is_causal: temp_mask = torch.ones(L, S, dtype=torch.bool).tril(diagonal=0) (made on the "
         "default device; attn_bias is on query.device and the mask is moved when applied)", "causal_mask", '''
def causal_mask(size, device=None):
    L, S = size, size
    temp_mask = torch.ones(L, S, dtype=torch.bool).tril(diagonal=0)
    return temp_mask
''', breach="ignores the device argument: the mask is always made on the default device (CPU)",
         names=("device",)),
    Port("Hugging Face create_extended_attention_mask_for_decoder comparison (seq_ids[None, :] <= seq_ids[:, None])",
         "huggingface/transformers modeling_utils.py, ModuleUtilsMixin.create_extended_attention_mask_for_decoder: "
         "seq_ids = torch.arange(seq_length, device=device); causal_mask = seq_ids[None, None, :].repeat(batch_size, "
         "seq_length, 1) <= seq_ids[None, :, None] (without the batch repeat and the attention_mask product)",
         "causal_mask", '''
def causal_mask(size, device=None):
    seq_ids = torch.arange(size, device=device)
    causal_mask = seq_ids[None, :].repeat(size, 1) <= seq_ids[:, None]
    return causal_mask
'''),
    Port("fairseq encoder_padding_mask = src_tokens.eq(self.padding_idx) (shape (B, T), True = padding)",
         "facebookresearch/fairseq fairseq/models/transformer/transformer_encoder.py, forward_scriptable: "
         "encoder_padding_mask = src_tokens.eq(self.padding_idx)", "padding_mask", '''
def padding_mask(tokens, pad_id):
    encoder_padding_mask = tokens.eq(pad_id)
    return encoder_padding_mask
''', breach="True marks the padding (fairseq's key_padding_mask convention) and the shape is (B, T), not (B, 1, T) "
            "with True = real token", names=("invert", "true where", "shape", "(b, 1, t)", "opposite")),
    Port("Flax WMT example padding masks from `inputs > 0` (pad id 0 built in)",
         "google/flax examples/wmt/models.py, Encoder / Transformer.encode: encoder_mask = nn.make_attention_mask("
         "inputs > 0, inputs > 0, dtype=...) (the padding id 0 is built into the comparison; the key side kept as "
         "(B, 1, T) booleans for the course)", "padding_mask", '''
def padding_mask(tokens, pad_id):
    key_input = tokens > 0
    return key_input[..., None, :]
''', breach="ignores pad_id: padding is taken to be id 0 (tokens > 0), so other pad ids are not hidden",
         names=("pad_id",)),
]
