"""Ported code of notebook 04 (causal and padding masks) in the styles of public projects."""
from . import Port

ASSIGNMENT = "04_masking"

POLARITY = ("true = masked", "inverted", "polarity", "true where masked", "opposite")
NOT_BOOL = ("bool", "float", "additive", "dtype", "-inf")

PORTS = [
    # --- causal_mask ----------------------------------------------------------------------------------
    Port("nanoGPT causal bias buffer (tril of ones)",
         "karpathy/nanoGPT model.py CausalSelfAttention: register_buffer('bias', torch.tril(torch.ones(block_size, "
         "block_size))...); used as att.masked_fill(self.bias[:, :, :T, :T] == 0, -inf)", "causal_mask", '''
def causal_mask(size, device=None):
    # causal mask to ensure that attention is only applied to the left in the input sequence
    return torch.tril(torch.ones(size, size, device=device)) != 0
'''),
    Port("d2l decoder valid lengths through sequence_mask",
         "d2l-ai/d2l-en TransformerDecoderBlock: dec_valid_lens = torch.arange(1, num_steps + 1, device=X.device); "
         "d2l.sequence_mask: torch.arange(maxlen)[None, :] < valid_len[:, None]", "causal_mask", '''
def causal_mask(size, device=None):
    # Shape of dec_valid_lens: (num_steps,): query i may see the first i + 1 keys
    dec_valid_lens = torch.arange(1, size + 1, device=device)
    return torch.arange(size, dtype=torch.float32, device=device)[None, :] < dec_valid_lens[:, None]
'''),
    Port("nn.Transformer.generate_square_subsequent_mask (float mask, -inf above the diagonal)",
         "pytorch torch/nn/modules/transformer.py _generate_square_subsequent_mask: torch.triu(torch.full((sz, sz), "
         "float('-inf'), dtype=dtype, device=device), diagonal=1)", "causal_mask", '''
def causal_mask(size, device=None, dtype=None):
    """Generate a square causal mask for the sequence.

    The masked positions are filled with float('-inf'). Unmasked positions are filled with float(0.0).
    """
    if dtype is None:
        dtype = torch.float32
    return torch.triu(torch.full((size, size), float("-inf"), dtype=dtype, device=device), diagonal=1)
''', breach="an additive float mask (0.0 where allowed, -inf above the diagonal) instead of a bool mask with "
            "True = may attend", names=NOT_BOOL),
    Port("Annotated Transformer subsequent_mask (shape (1, size, size))",
         "harvardnlp/annotated-transformer subsequent_mask(size): attn_shape = (1, size, size); "
         "subsequent_mask = torch.triu(torch.ones(attn_shape), diagonal=1).type(torch.uint8); "
         "return subsequent_mask == 0", "causal_mask", '''
def causal_mask(size, device=None):
    "Mask out subsequent positions."
    attn_shape = (1, size, size)
    subsequent_mask = torch.triu(torch.ones(attn_shape, device=device), diagonal=1).type(torch.uint8)
    return subsequent_mask == 0
''', breach="returns shape (1, size, size) with a leading batch axis, not (size, size)",
         names=("(1,", "leading", "extra dim", "3-d", "(size, size)")),
    Port("LLMs-from-scratch causal mask (triu above the diagonal, 1 = masked)",
         "rasbt/LLMs-from-scratch ch03 CausalAttention: mask = torch.triu(torch.ones(context_length, "
         "context_length), diagonal=1); attn_scores.masked_fill_(mask.bool(), -torch.inf)", "causal_mask", '''
def causal_mask(size, device=None):
    return torch.triu(torch.ones(size, size, device=device), diagonal=1).bool()
''', breach="True marks the future keys to hide (the masked positions), the opposite of True = may attend",
         names=POLARITY),

    # --- padding_mask ---------------------------------------------------------------------------------
    Port("Annotated Transformer Batch.src_mask",
         "harvardnlp/annotated-transformer class Batch: self.src_mask = (src != pad).unsqueeze(-2)",
         "padding_mask", '''
def padding_mask(tokens, pad_id):
    return (tokens != pad_id).unsqueeze(-2)
'''),
    Port("attention-is-all-you-need-pytorch get_pad_mask",
         "jadore801120/attention-is-all-you-need-pytorch transformer/Models.py: def get_pad_mask(seq, pad_idx): "
         "return (seq != pad_idx).unsqueeze(-2)", "padding_mask", '''
def padding_mask(tokens, pad_id):
    seq, pad_idx = tokens, pad_id
    return (seq != pad_idx).unsqueeze(-2)
'''),
    Port("nn.MultiheadAttention key_padding_mask (True = padding, ignored)",
         "PyTorch docs nn.MultiheadAttention.forward key_padding_mask (N, S): 'a True value indicates that the "
         "corresponding key value will be ignored'; built as src_tokens.eq(padding_idx) (fairseq, torch tutorials)",
         "padding_mask", '''
def padding_mask(tokens, pad_id):
    key_padding_mask = tokens.eq(pad_id)   # (N, S), True where the key is padding
    return key_padding_mask.unsqueeze(1)
''', breach="True where the key IS padding (nn.MultiheadAttention's key_padding_mask polarity), the opposite of "
            "True = real token", names=POLARITY),
    Port("Hugging Face extended attention mask (B, 1, 1, T), additive",
         "huggingface/transformers modeling_utils.py get_extended_attention_mask: extended = attention_mask[:, None, "
         "None, :]; extended = (1.0 - extended) * torch.finfo(dtype).min", "padding_mask", '''
def padding_mask(tokens, pad_id, dtype=torch.float32):
    attention_mask = (tokens != pad_id).long()
    extended_attention_mask = attention_mask[:, None, None, :]
    extended_attention_mask = extended_attention_mask.to(dtype=dtype)  # fp16 compatibility
    return (1.0 - extended_attention_mask) * torch.finfo(dtype).min
''', breach="an additive float mask of shape (B, 1, 1, T) (0 for tokens, the dtype's minimum for padding) instead "
            "of a bool (B, 1, T) mask", names=NOT_BOOL),
    Port("d2l valid_lens (count the real tokens, then sequence_mask)",
         "d2l-ai/d2l-en: valid_len = (X != vocab['<pad>']).type(torch.int32).sum(1) (build_array_nmt); "
         "sequence_mask: torch.arange(maxlen)[None, :] < valid_len[:, None]", "padding_mask", '''
def padding_mask(tokens, pad_id):
    valid_len = (tokens != pad_id).type(torch.int32).sum(1)
    maxlen = tokens.size(1)
    mask = torch.arange(maxlen, dtype=torch.float32, device=tokens.device)[None, :] < valid_len[:, None]
    return mask.unsqueeze(1)
''', breach="derives a length per sentence and keeps the first len keys: assumes right padding, so padding at the "
            "start or in the middle of a sentence is masked in the wrong places",
         names=("right padding", "left padding", "length", "middle", "start of")),
]
