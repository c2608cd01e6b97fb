"""Tenth held-out set, notebook 08: ports of PaddlePaddle/Paddle, ml-explore/mlx, hyunwoongko/transformer and the
tensorflow/text NMT tutorial, each read at its source."""
from tests.corpus import Port

ASSIGNMENT = "08_encoder_decoder"

PORTS = [
    Port("paddle_decoder_layer", "PaddlePaddle/Paddle python/paddle/nn/layer/transformer.py "
         "TransformerDecoderLayer.forward (residual = tgt; if normalize_before: norm; sublayer; residual + dropout; "
         "if not normalize_before: norm; for self_attn, cross_attn(tgt, memory, memory) and the feed-forward)",
         "DecoderLayer", r'''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.normalize_before = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)      # linear2(dropout(activation(linear1(tgt))))
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        tgt = x
        residual = tgt
        if self.normalize_before:
            tgt = self.norm1(tgt)
        tgt = self.self_attn(tgt, tgt, tgt, tgt_mask)[0]
        tgt = residual + self.dropout1(tgt)
        if not self.normalize_before:
            tgt = self.norm1(tgt)

        residual = tgt
        if self.normalize_before:
            tgt = self.norm2(tgt)
        tgt = self.cross_attn(tgt, memory, memory, memory_mask)[0]
        tgt = residual + self.dropout2(tgt)
        if not self.normalize_before:
            tgt = self.norm2(tgt)

        residual = tgt
        if self.normalize_before:
            tgt = self.norm3(tgt)
        tgt = self.ff(tgt)
        tgt = residual + self.dropout3(tgt)
        if not self.normalize_before:
            tgt = self.norm3(tgt)
        return tgt
'''),
    Port("mlx_decoder_layer", "ml-explore/mlx python/mlx/nn/layers/transformer.py at 657f466 "
         "TransformerDecoderLayer.__call__, post-norm branch (y = self_attention(x, x, x); x = ln1(x + y); "
         "y = cross_attention(y, memory, memory); x = ln2(x + y); y = ln3(x + mlp(x)))", "DecoderLayer", r'''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.ff = FeedForward(d_model, d_ff, dropout)     # linear1, activation, dropout3, linear2
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            y = self.norm1(x)
            y = self.self_attn(y, y, y, tgt_mask)[0]
            y = self.dropout1(y)
            x = x + y

            y = self.norm2(x)
            y = self.cross_attn(y, memory, memory, memory_mask)[0]
            y = self.dropout2(y)
            x = x + y

            y = self.norm3(x)
            y = self.ff(y)
            y = x + y
        else:
            y = self.self_attn(x, x, x, tgt_mask)[0]
            y = self.dropout1(y)
            x = self.norm1(x + y)

            y = self.cross_attn(y, memory, memory, memory_mask)[0]
            y = self.dropout2(y)
            x = self.norm2(x + y)

            y = self.ff(x)
            y = self.norm3(x + y)
        return y
''', breach="post-norm: the cross-attention takes its queries from y, the raw self-attention output, not from the "
            "normalized residual stream x = norm1(x + y)",
         names=("query", "queries", "raw", "self-attention output", "instead of x", "normalized")),
    Port("hyunwoongko_transformer", "hyunwoongko/transformer models/model/transformer.py, models/model/decoder.py and "
         "models/embedding/transformer_embedding.py (TransformerEmbedding: drop_out(tok_emb(x) + pos_emb(x)), no "
         "sqrt(d_model); make_trg_mask: pad mask & tril)", "Transformer", r'''
class Transformer(nn.Module):
    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=128, n_heads=4, n_layers=2, d_ff=512,
                 dropout=0.1, max_len=256, pad_id=0):
        super().__init__()
        self.d_model = d_model
        self.pad_id = pad_id
        self.src_embed = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model)
        nn.init.normal_(self.src_embed.weight, std=d_model ** -0.5)
        nn.init.normal_(self.tgt_embed.weight, std=d_model ** -0.5)
        self.positions = SinusoidalPositions(max_len, d_model)
        self.dropout = nn.Dropout(dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.output = nn.Linear(d_model, tgt_vocab_size)

    def _emb(self, table, x):
        # TransformerEmbedding: token embedding + positional encoding, then dropout
        return self.dropout(self.positions(table(x)))

    def encode(self, src, src_mask):
        x = self._emb(self.src_embed, src)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt, memory, src_mask, tgt_mask):
        trg = self._emb(self.tgt_embed, tgt)
        for layer in self.decoder_layers:
            trg = layer(trg, memory, tgt_mask, src_mask)
        # pass to LM head
        return self.output(trg)

    def forward(self, src, tgt_in):
        src_mask = (src != self.pad_id).unsqueeze(1)                          # make_src_mask
        # make_trg_mask masks padded query rows, (B, 1, T, 1), relying on its masked_fill(-10000); with this course's
        # -inf masking that would give NaN rows, so the padding is hidden on the key side, which changes only the
        # logits at padded positions
        trg_pad_mask = (tgt_in != self.pad_id).unsqueeze(1)
        trg_len = tgt_in.shape[1]
        trg_sub_mask = torch.tril(torch.ones(trg_len, trg_len, device=tgt_in.device)).bool()
        trg_mask = trg_pad_mask & trg_sub_mask
        enc_src = self.encode(src, src_mask)
        return self.decode(tgt_in, enc_src, src_mask, trg_mask)
''', breach="the token embeddings are not multiplied by sqrt(d_model) before the positions are added "
            "(tok_emb + pos_emb)",
         names=("sqrt", "scale", "scaling", "d_model ** 0.5", "multipl")),
    Port("tf_nmt_greedy", "tensorflow/text docs/tutorials/nmt_with_attention.ipynb Decoder.get_next_token and "
         "Translator.translate (next_token = argmax; done = done | (next_token == end_token); "
         "next_token = tf.where(done, 0, next_token); tokens.append(next_token); break when reduce_all(done))",
         "greedy_decode", r'''
@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    src_mask = padding_mask(src, model.pad_id)
    context = model.encode(src, src_mask)
    batch_size = src.shape[0]
    # get_initial_state: start tokens and done flags
    next_token = torch.full((batch_size, 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros((batch_size, 1), dtype=torch.bool, device=src.device)
    ys = next_token
    tokens = []
    for _ in range(max_len):
        logits = model.decode(ys, context, src_mask, causal_mask(ys.shape[1], device=src.device))
        next_token = logits[:, -1:].argmax(-1)
        # If a sequence produces an `end_token`, set it `done`
        done = done | (next_token == eos_id)
        # Once a sequence is done it only produces 0-padding.
        next_token = torch.where(done, torch.full_like(next_token, model.pad_id), next_token)
        tokens.append(next_token)
        ys = torch.cat([ys, next_token], dim=1)
        if bool(done.all()):
            break
    return torch.cat(tokens, dim=-1)
''', breach="the done flag is set before the padding, so the eos token itself is replaced by padding: no row of the "
            "output contains eos",
         names=("eos", "end token", "end_token", "replaced", "overwrit")),
]
