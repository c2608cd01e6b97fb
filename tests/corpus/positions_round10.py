"""Tenth held-out set, notebook 02: ports of MAE's 1-D sin-cos embedding, NeMo's FixedPositionalEncoding and
learned position embedding, and xformers' SinePositionalEmbedding, each read at its source."""
from tests.corpus import Port

ASSIGNMENT = "02_positions"

PORTS = [
    Port("mae_sincos", "facebookresearch/mae util/pos_embed.py get_1d_sincos_pos_embed_from_grid(embed_dim, pos) "
         "(assert embed_dim % 2 == 0; omega = 1 / 10000**(arange(D/2) / (D/2)); out = einsum('m,d->md', pos, omega); "
         "emb = np.concatenate([emb_sin, emb_cos], axis=1), float64 numpy turned into float32 by "
         "torch.from_numpy(pos_embed).float() as models_mae does; pos = 0 .. max_len - 1)", "sinusoidal_positions", r'''
def sinusoidal_positions(max_len: int, d_model: int) -> torch.Tensor:
    embed_dim = d_model
    assert embed_dim % 2 == 0
    omega = torch.arange(embed_dim // 2, dtype=torch.float64)
    omega /= embed_dim / 2.
    omega = 1. / 10000**omega                      # (D/2,)
    pos = torch.arange(max_len, dtype=torch.float32).to(torch.float64).reshape(-1)  # (M,)
    out = torch.einsum('m,d->md', pos, omega)     # (M, D/2), outer product

    emb_sin = torch.sin(out)                       # (M, D/2)
    emb_cos = torch.cos(out)                       # (M, D/2)

    emb = torch.cat([emb_sin, emb_cos], dim=1)     # (M, D)
    return emb.float()                             # torch.from_numpy(pos_embed).float()
''', breach="puts all the sines in the first half of the dimensions and all the cosines in the second half "
            "(concatenate) instead of interleaving sin on even and cos on odd dimensions; odd d_model fails an assert, "
            "not a ValueError",
         names=("half", "concatenat", "interleav", "even", "odd", "layout")),
    Port("nemo_fixed_table", "NVIDIA/NeMo nemo/collections/nlp/modules/common/transformer/transformer_modules.py "
         "FixedPositionalEncoding.__init__ (div_term = exp(-log(10000) / hidden_size * arange(0, hidden_size, 2)); "
         "pos_enc[:, 0::2] = sin, pos_enc[:, 1::2] = cos; pos_enc.div_(math.sqrt(hidden_size)); the table that "
         "register_buffer('pos_enc', ...) stores)", "sinusoidal_positions", r'''
def sinusoidal_positions(max_len: int, d_model: int) -> torch.Tensor:
    hidden_size, max_sequence_length = d_model, max_len
    pos_enc = torch.zeros(max_sequence_length, hidden_size)
    position = torch.arange(0.0, max_sequence_length).unsqueeze(1)
    coef = -math.log(10000.0) / hidden_size
    div_term = torch.exp(coef * torch.arange(0.0, hidden_size, 2))
    pos_enc[:, 0::2] = torch.sin(position * div_term)
    pos_enc[:, 1::2] = torch.cos(position * div_term)
    pos_enc.div_(math.sqrt(hidden_size))
    return pos_enc
''', breach="divides the whole table by sqrt(d_model) (pos_enc.div_(math.sqrt(hidden_size))), so every entry is "
            "sin/cos scaled down by 1/sqrt(d); odd d_model also ends in a RuntimeError from the slice assignment, "
            "not a ValueError",
         names=("sqrt", "scaled", "divid", "1/sqrt", "scale")),
    Port("xformers_sine", "facebookresearch/xformers xformers/components/positional_embedding/sine.py (before the "
         "components were deleted) SinePositionalEmbedding.forward (the table is computed in forward for "
         "seq_len = x.shape[1]: div = exp(-log(10000) * 2 * (dim // 2) / dim_model), pos[:, 0::2] = sin, "
         "pos[:, 1::2] = cos, output + pos.unsqueeze(0); max_len is accepted but, like xformers' *args, never used)",
         "SinusoidalPositions", r'''
class SinusoidalPositions(nn.Module):
    def __init__(self, max_len: int, d_model: int, *args, **kwargs):
        super().__init__()
        self.dim_model = d_model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq_len = x.shape[1]
        pos = (
            torch.arange(0, seq_len, device=x.device, dtype=torch.float32)
            .unsqueeze(1)
            .repeat(1, self.dim_model)
        )
        dim = (
            torch.arange(0, self.dim_model, device=x.device, dtype=torch.float32)
            .unsqueeze(0)
            .repeat(seq_len, 1)
        )
        div = torch.exp(-math.log(10000) * (2 * (dim // 2) / self.dim_model))
        pos *= div
        pos[:, 0::2] = torch.sin(pos[:, 0::2])
        pos[:, 1::2] = torch.cos(pos[:, 1::2])

        output = x.unsqueeze(-1) if x.ndim == 2 else x

        return output + pos.unsqueeze(0)
''', breach="has no table of max_len positions and no length check: a sequence longer than max_len gets freshly "
            "computed positions instead of the ValueError naming both numbers (and there is no buffer)",
         names=("max_len", "valueerror", "longer", "length", "buffer")),
    Port("nemo_learned", "NVIDIA/NeMo nemo/collections/nlp/modules/common/transformer/transformer_modules.py "
         "TransformerEmbedding(learn_positional_encodings=True), its position part (self.position_embedding = "
         "nn.Embedding(max_sequence_length, hidden_size); if seq_length > self.max_sequence_length: raise "
         "ValueError('Input sequence is longer than maximum allowed sequence length for positional encoding'); "
         "position_ids = arange(start_pos, start_pos + seq_length); token embeddings + position embeddings; the "
         "token/type embeddings, LayerNorm and dropout of the full embedding left out)", "LearnedPositions", r'''
class LearnedPositions(nn.Module):
    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.max_sequence_length = max_len
        self.position_embedding = nn.Embedding(max_len, d_model)

    def forward(self, x: torch.Tensor, start_pos: int = 0) -> torch.Tensor:
        seq_length = x.size(1)
        if seq_length > self.max_sequence_length:
            raise ValueError(
                "Input sequence is longer than maximum allowed sequence length for positional encoding"
            )
        position_ids = torch.arange(
            start=start_pos, end=start_pos + seq_length, dtype=torch.long, device=x.device
        )
        position_ids = position_ids.unsqueeze(0).expand(x.shape[:-1])
        position_embeddings = self.position_embedding(position_ids)
        return x + position_embeddings
''', breach="the ValueError for a too long sequence names neither the sequence length nor max_len "
            "('Input sequence is longer than maximum allowed sequence length for positional encoding')",
         names=("message", "both numbers", "name", "numbers", "max_len")),
]
