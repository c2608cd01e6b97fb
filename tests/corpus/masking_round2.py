"""Held-out ports of notebook 04 (causal and padding masks) in the styles of public projects the course's own
corpus does not use (gpt-fast, KerasNLP / Keras, JoeyNMT, Trax)."""
from . import Port

ASSIGNMENT = "04_masking"

PORTS = [
    # --- causal_mask ----------------------------------------------------------------------------------
    Port("gpt-fast setup_caches causal_mask, built under `with torch.device(device)`",
         "pytorch-labs/gpt-fast model.py, Transformer.setup_caches: self.causal_mask = torch.tril(torch.ones("
         "self.max_seq_length, self.max_seq_length, dtype=torch.bool)); generate.py calls setup_caches inside "
         "`with torch.device(device):`", "causal_mask", '''
def causal_mask(size, device=None):
    with torch.device(device if device is not None else "cpu"):
        return torch.tril(torch.ones(size, size, dtype=torch.bool))
'''),
    Port("KerasNLP compute_causal_mask (an int32 0/1 mask)",
         "keras-team/keras-nlp keras_nlp/layers/modeling/transformer_layer_utils.py, compute_causal_mask(batch_size, "
         "input_length, output_length, cache_index=0): i = arange(output_length)[:, None] + cache_index; j = "
         "arange(input_length); mask = expand_dims(cast(i >= j, dtype='int32'), axis=0); broadcast_to (batch_size, "
         "output_length, input_length) (one batch row taken here)", "causal_mask", '''
def compute_causal_mask(batch_size, input_length, output_length, cache_index=0, device=None):
    i = torch.arange(output_length, device=device)[:, None] + cache_index
    j = torch.arange(input_length, device=device)
    mask = (i >= j).to(torch.int32)[None]
    return mask.broadcast_to((batch_size, output_length, input_length))


def causal_mask(size, device=None):
    return compute_causal_mask(1, size, size, device=device)[0]
''', breach="an int32 mask of 1s and 0s (KerasNLP casts its masks to int32 and merges them with ops.minimum) "
            "instead of a bool mask",
         names=("bool", "int32", "integer", "dtype")),

    # --- padding_mask ---------------------------------------------------------------------------------
    Port("JoeyNMT Batch.src_mask",
         "joeynmt/joeynmt joeynmt/batch.py, Batch.__init__: self.src_mask = (self.src != pad_index).unsqueeze(1)",
         "padding_mask", '''
def padding_mask(tokens, pad_id):
    src, pad_index = tokens, pad_id
    src_mask = (src != pad_index).unsqueeze(1)
    return src_mask
'''),
    Port("Trax PaddingMask (shape (batch, 1, 1, length))",
         "google/trax trax/layers/attention.py, PaddingMask(pad=0): content_positions = (x != pad); return "
         "content_positions.reshape((batch_size, 1, 1, sequence_length)) ('axis 1 will broadcast to cover any "
         "number of attention heads and axis 2 ... decoder sequence positions')", "padding_mask", '''
def PaddingMask(pad=0):
    def f(x):
        if len(x.shape) != 2:
            raise ValueError(
                f"Input to PaddingMask must be a rank 2 tensor with shape "
                f"(batch_size, sequence_length); instead got shape {tuple(x.shape)}.")
        batch_size = x.shape[0]
        sequence_length = x.shape[1]
        content_positions = (x != pad)
        return content_positions.reshape((batch_size, 1, 1, sequence_length))
    return f


def padding_mask(tokens, pad_id):
    return PaddingMask(pad=pad_id)(tokens)
''', breach="shape (B, 1, 1, T) with an extra head axis (Trax's multi-head layout) instead of (B, 1, T): against "
            "single-head scores (B, T, T) it broadcasts to (B, B, T, T)",
         names=("(b, 1, t)", "(b, 1, 1, t)", "4-d", "extra dim", "head axis", "shape")),
    Port("Keras Embedding(mask_zero=True).compute_mask, expanded as MultiHeadAttention does",
         "keras-team/keras keras/src/layers/core/embedding.py, Embedding.compute_mask: if not self.mask_zero: "
         "return None; return ops.not_equal(inputs, 0); MultiHeadAttention._compute_attention_mask: value_mask "
         "-> ops.expand_dims(value_mask, -2), shape [B, 1, S]", "padding_mask", '''
def compute_mask(inputs, mask_zero=True):
    if not mask_zero:
        return None
    return torch.not_equal(inputs, 0)


def padding_mask(tokens, pad_id):
    value_mask = compute_mask(tokens)
    return value_mask.unsqueeze(-2)          # shape is [B, 1, S]
''', breach="padding is always id 0 (Keras' mask_zero convention): the pad_id argument is ignored, so with another "
            "pad id the padding is not masked and real tokens with id 0 are",
         names=("pad_id", "fixed 0", "hard-coded", "id 0", "always 0", "mask_zero")),
]
