"""Fifth held-out set, notebook 04: bentrevett/pytorch-seq2seq, jadore801120/attention-is-all-you-need-pytorch
(current and first versions), OpenAI sparse_attention, AllenNLP."""
from tests.corpus import Port

ASSIGNMENT = "04_masking"

PORTS = [
    Port(
        "pytorch-seq2seq make_trg_mask subsequent mask",
        "bentrevett/pytorch-seq2seq, '6 - Attention is All You Need.ipynb': Seq2Seq.make_trg_mask "
        "(torch.tril(torch.ones((trg_len, trg_len), device=self.device)).bool())",
        "causal_mask",
        r'''
def causal_mask(size: int, device=None) -> torch.Tensor:
    trg_sub_mask = torch.tril(torch.ones((size, size), device=device)).bool()
    return trg_sub_mask
''',
    ),
    Port(
        "attention-is-all-you-need-pytorch get_subsequent_mask: shape (1, T, T)",
        "jadore801120/attention-is-all-you-need-pytorch, transformer/Models.py: get_subsequent_mask "
        "((1 - triu(ones((1, len_s, len_s)), diagonal=1)).bool())",
        "causal_mask",
        r'''
def causal_mask(size: int, device=None) -> torch.Tensor:
    subsequent_mask = (1 - torch.triu(torch.ones((1, size, size), device=device), diagonal=1)).bool()
    return subsequent_mask
''',
        breach="the mask has shape (1, size, size) (a leading batch axis), not (size, size)",
        names=("shape", "(1,", "leading", "extra dim", "extra axis", "batch dim", "batch axis", "3-d", "3d",
               "three dim"),
    ),
    Port(
        "Sparse Transformer get_attn_mask('all'): float band matrix of shape (1, 1, n, n)",
        "openai/sparse_attention, attention.py: get_attn_mask(n, 'all') (tf.matrix_band_part(tf.ones([n, n]), -1, 0) "
        "reshaped to [1, 1, n, n], used as w * b + -1e9 * (1 - b))",
        "causal_mask",
        r'''
def causal_mask(size: int, device=None) -> torch.Tensor:
    b = torch.ones(size, size, device=device).tril()     # tf.matrix_band_part(tf.ones([n, n]), -1, 0)
    b = b.reshape(1, 1, size, size)
    return b
''',
        breach="a float mask of 1.0/0.0 (meant to be multiplied into the scores) of shape (1, 1, size, size) "
               "instead of a bool (size, size) tensor; masked_fill(~mask) fails on it and adding it hides nothing",
        names=("float", "bool", "dtype", "boolean", "1.0", "0.0", "shape", "(1, 1"),
    ),
    Port(
        "attention-is-all-you-need-pytorch get_pad_mask",
        "jadore801120/attention-is-all-you-need-pytorch, transformer/Models.py: get_pad_mask(seq, pad_idx)",
        "padding_mask",
        r'''
def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    return (tokens != pad_id).unsqueeze(-2)
''',
    ),
    Port(
        "attention-is-all-you-need-pytorch (first version) get_attn_padding_mask: True on padding",
        "jadore801120/attention-is-all-you-need-pytorch (2017), transformer/Models.py: get_attn_padding_mask "
        "(seq_k.data.eq(PAD).unsqueeze(1), used with masked_fill_(mask, -inf)); pad id taken from the argument",
        "padding_mask",
        r'''
def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    pad_attn_mask = tokens.eq(pad_id).unsqueeze(1)   # bx1xsk, True where the key is padding
    return pad_attn_mask
''',
        breach="inverted polarity: True marks the padding keys (the positions to hide), while the course's masks "
               "are True where the key may be attended",
        names=("polarity", "invert", "opposite", "reversed", "true where", "true for padding", "true marks",
               "true = pad", "negat", "may attend"),
    ),
    Port(
        "AllenNLP get_text_field_mask: (batch, num_tokens)",
        "allenai/allennlp, nn/util.py: get_text_field_mask (token_tensor != padding_id)",
        "padding_mask",
        r'''
def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    return tokens != pad_id     # (batch_size, num_tokens)
''',
        breach="returns shape (B, T) without the middle query axis: against scores (B, T_q, T_k) it broadcasts "
               "the batch against the queries (an error, or the wrong mask when B == T)",
        names=("shape", "(b, t)", "(b, 1, t)", "unsqueeze", "query dim", "query axis", "middle", "missing dim",
               "broadcast", "2-d", "2d"),
    ),
]
