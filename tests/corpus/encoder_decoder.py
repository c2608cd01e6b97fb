"""Ported code of notebook 08 (decoder layer, encoder-decoder Transformer, greedy decoding) in the styles of public
projects."""
from . import Port

ASSIGNMENT = "08_encoder_decoder"

PRE_POST = ("post-norm", "pre-norm", "norm_first", "after the addition", "before the sublayer")
INCLUDE_EOS = ("eos itself", "including eos", "include eos", "without eos", "drops eos", "up to and including")


def _transformer(init_extra="", encode=None, decode=None, forward=None, embed_init=None):
    """A Transformer with the contract's attributes; the parts given replace the plain ones."""
    embed_init = embed_init or '''        nn.init.normal_(self.src_embed.weight, std=d_model ** -0.5)
        nn.init.normal_(self.tgt_embed.weight, std=d_model ** -0.5)
'''
    encode = encode or '''    def encode(self, src, src_mask):
        x = self.dropout(self.positions(self.src_embed(src) * math.sqrt(self.d_model)))
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x
'''
    decode = decode or '''    def decode(self, tgt, memory, src_mask, tgt_mask):
        x = self.dropout(self.positions(self.tgt_embed(tgt) * math.sqrt(self.d_model)))
        for layer in self.decoder_layers:
            x = layer(x, memory, tgt_mask, src_mask)
        return self.output(x)
'''
    forward = forward or '''    def forward(self, src, tgt_in):
        src_mask = padding_mask(src, self.pad_id)
        tgt_mask = causal_mask(tgt_in.shape[1], device=tgt_in.device) & padding_mask(tgt_in, self.pad_id)
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask, tgt_mask)
'''
    return f'''
class Transformer(nn.Module):
    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=128, n_heads=4, n_layers=2, d_ff=512,
                 dropout=0.1, max_len=256, pad_id=0):
        super().__init__()
        self.d_model = d_model
        self.pad_id = pad_id
        self.src_embed = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model)
{embed_init}        self.positions = SinusoidalPositions(max_len, d_model)
        self.dropout = nn.Dropout(dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.output = nn.Linear(d_model, tgt_vocab_size)
{init_extra}
{encode}
{decode}
{forward}'''


PORTS = [
    # --- DecoderLayer ---------------------------------------------------------------------------------
    Port("nn.TransformerDecoderLayer (_sa_block / _mha_block / _ff_block)",
         "pytorch torch/nn/modules/transformer.py, TransformerDecoderLayer.forward with norm_first and the "
         "_sa_block, _mha_block, _ff_block helpers", "DecoderLayer", '''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask):
        return self.dropout1(self.self_attn(x, x, x, attn_mask)[0])

    def _mha_block(self, x, mem, attn_mask):
        return self.dropout2(self.cross_attn(x, mem, mem, attn_mask)[0])

    def _ff_block(self, x):
        return self.dropout3(self.ff(x))
'''),
    Port("fairseq TransformerDecoderLayer (normalize_before, residual bookkeeping)",
         "facebookresearch/fairseq fairseq/modules/transformer_layer.py, TransformerDecoderLayerBase.forward: "
         "self_attn, encoder_attn, fc1/fc2 blocks, each residual = x; maybe norm before; x = residual + x; "
         "maybe norm after", "DecoderLayer", '''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.normalize_before = norm_first
        self.dropout_module = nn.Dropout(dropout)
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.norm1 = LayerNorm(d_model)                 # self_attn_layer_norm
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.norm2 = LayerNorm(d_model)                 # encoder_attn_layer_norm
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm3 = LayerNorm(d_model)                 # final_layer_norm

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        residual = x
        if self.normalize_before:
            x = self.norm1(x)
        x, attn = self.self_attn(query=x, key=x, value=x, mask=tgt_mask)
        x = self.dropout_module(x)
        x = residual + x
        if not self.normalize_before:
            x = self.norm1(x)

        residual = x
        if self.normalize_before:
            x = self.norm2(x)
        x, attn = self.cross_attn(query=x, key=memory, value=memory, mask=memory_mask)
        x = self.dropout_module(x)
        x = residual + x
        if not self.normalize_before:
            x = self.norm2(x)

        residual = x
        if self.normalize_before:
            x = self.norm3(x)
        x = self.ff(x)
        x = self.dropout_module(x)
        x = residual + x
        if not self.normalize_before:
            x = self.norm3(x)
        return x
'''),
    Port("HF BartDecoderLayer (post-norm) / MBartDecoderLayer (pre-norm)",
         "huggingface/transformers models/bart/modeling_bart.py BartDecoderLayer.forward and "
         "models/mbart/modeling_mbart.py MBartDecoderLayer.forward: residual = hidden_states; "
         "dropout; residual + hidden_states; layer norm after (BART) or before (mBART)", "DecoderLayer", '''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.dropout = nn.Dropout(dropout)
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.norm1 = LayerNorm(d_model)       # self_attn_layer_norm
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.norm2 = LayerNorm(d_model)       # encoder_attn_layer_norm
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm3 = LayerNorm(d_model)       # final_layer_norm

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        hidden_states = x
        residual = hidden_states
        if self.norm_first:
            hidden_states = self.norm1(hidden_states)
        hidden_states, _ = self.self_attn(hidden_states, hidden_states, hidden_states, tgt_mask)
        hidden_states = residual + self.dropout(hidden_states)
        if not self.norm_first:
            hidden_states = self.norm1(hidden_states)

        residual = hidden_states
        if self.norm_first:
            hidden_states = self.norm2(hidden_states)
        hidden_states, _ = self.cross_attn(hidden_states, memory, memory, memory_mask)
        hidden_states = residual + self.dropout(hidden_states)
        if not self.norm_first:
            hidden_states = self.norm2(hidden_states)

        residual = hidden_states
        if self.norm_first:
            hidden_states = self.norm3(hidden_states)
        hidden_states = residual + self.dropout(self.ff(hidden_states))
        if not self.norm_first:
            hidden_states = self.norm3(hidden_states)
        return hidden_states
'''),
    Port("Annotated Transformer DecoderLayer (three SublayerConnections)",
         "harvardnlp/annotated-transformer, DecoderLayer.forward: x = sublayer[0](x, self_attn(x, x, x, tgt_mask)); "
         "sublayer[1](x, src_attn(x, m, m, src_mask)); sublayer[2](x, feed_forward); "
         "SublayerConnection = x + dropout(sublayer(norm(x)))", "DecoderLayer", '''
class SublayerConnection(nn.Module):
    def __init__(self, norm, dropout):
        super().__init__()
        self.norm = norm
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, sublayer):
        return x + self.dropout(sublayer(self.norm(x)))


class DecoderLayer(nn.Module):
    "Decoder is made of self-attn, src-attn, and feed forward (defined below)"

    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = LayerNorm(d_model), LayerNorm(d_model), LayerNorm(d_model)
        self.sublayer = nn.ModuleList(SublayerConnection(n, dropout) for n in (self.norm1, self.norm2, self.norm3))

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        m = memory
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, tgt_mask)[0])
        x = self.sublayer[1](x, lambda x: self.cross_attn(x, m, m, memory_mask)[0])
        return self.sublayer[2](x, self.ff)
''', breach="always pre-norm (the norm before each sublayer), also when norm_first=False asks for post-norm",
         names=PRE_POST),
    Port("HF BartDecoderLayer returning a tuple of outputs",
         "huggingface/transformers models/bart/modeling_bart.py, BartDecoderLayer.forward: outputs = "
         "(hidden_states,); if output_attentions: outputs += (self_attn_weights, cross_attn_weights); return outputs",
         "DecoderLayer", '''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.dropout = nn.Dropout(dropout)
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.norm1 = LayerNorm(d_model)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.norm2 = LayerNorm(d_model)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm3 = LayerNorm(d_model)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None, output_attentions=False):
        def block(h, norm, sub):
            if self.norm_first:
                return h + self.dropout(sub(norm(h)))
            return norm(h + self.dropout(sub(h)))

        weights = {}

        def self_attention(h):
            out, weights["self"] = self.self_attn(h, h, h, tgt_mask)
            return out

        def cross_attention(h):
            out, weights["cross"] = self.cross_attn(h, memory, memory, memory_mask)
            return out

        hidden_states = block(x, self.norm1, self_attention)
        hidden_states = block(hidden_states, self.norm2, cross_attention)
        hidden_states = block(hidden_states, self.norm3, self.ff)
        outputs = (hidden_states,)
        if output_attentions:
            outputs += (weights["self"], weights["cross"])
        return outputs
''', breach="returns a tuple (hidden_states,) instead of the output tensor alone",
         names=("tuple", "one tensor", "only the output", "a tensor")),

    # --- Transformer ----------------------------------------------------------------------------------
    Port("fairseq TransformerModel (embed_scale, forward_embedding, extract_features, output_layer)",
         "facebookresearch/fairseq fairseq/models/transformer/transformer_encoder.py forward_embedding and "
         "transformer_decoder.py extract_features / output_layer; Embedding() initialized normal(0, dim ** -0.5)",
         "Transformer", '''
class Transformer(nn.Module):
    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=128, n_heads=4, n_layers=2, d_ff=512,
                 dropout=0.1, max_len=256, pad_id=0):
        super().__init__()
        self.d_model = d_model
        self.pad_id = pad_id
        self.embed_scale = math.sqrt(d_model)
        self.src_embed = self.build_embedding(src_vocab_size, d_model)
        self.tgt_embed = self.build_embedding(tgt_vocab_size, d_model)
        self.positions = SinusoidalPositions(max_len, d_model)          # embed_positions
        self.dropout = nn.Dropout(dropout)                              # dropout_module
        self.encoder_layers = nn.ModuleList([EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)])
        self.decoder_layers = nn.ModuleList([DecoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)])
        self.output = nn.Linear(d_model, tgt_vocab_size)                # output_projection

    @staticmethod
    def build_embedding(num_embeddings, embedding_dim):
        m = nn.Embedding(num_embeddings, embedding_dim)
        nn.init.normal_(m.weight, mean=0, std=embedding_dim ** -0.5)
        return m

    def forward_embedding(self, tokens, embed_tokens):
        x = self.embed_scale * embed_tokens(tokens)
        x = self.positions(x)
        return self.dropout(x)

    def encode(self, src, src_mask):
        x = self.forward_embedding(src, self.src_embed)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x

    def extract_features(self, prev_output_tokens, encoder_out, src_mask, self_attn_mask):
        x = self.forward_embedding(prev_output_tokens, self.tgt_embed)
        for layer in self.decoder_layers:
            x = layer(x, encoder_out, self_attn_mask, src_mask)
        return x

    def output_layer(self, features):
        return self.output(features)

    def decode(self, tgt, memory, src_mask, tgt_mask):
        return self.output_layer(self.extract_features(tgt, memory, src_mask, tgt_mask))

    def forward(self, src, tgt_in):
        src_mask = padding_mask(src, self.pad_id)
        tgt_mask = causal_mask(tgt_in.size(1), device=tgt_in.device) & padding_mask(tgt_in, self.pad_id)
        encoder_out = self.encode(src, src_mask)
        return self.decode(tgt_in, encoder_out, src_mask, tgt_mask)
'''),
    Port("d2l EncoderDecoder with TransformerEncoder / TransformerDecoder",
         "d2l-ai/d2l-en chapter_attention-mechanisms-and-transformers/transformer.md: "
         "X = pos_encoding(embedding(X) * math.sqrt(num_hiddens)); for blk in self.blks: X = blk(X, valid_lens); "
         "dense output layer; EncoderDecoder.forward(enc_X, dec_X)", "Transformer", '''
class Transformer(nn.Module):
    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=128, n_heads=4, n_layers=2, d_ff=512,
                 dropout=0.1, max_len=256, pad_id=0):
        super().__init__()
        self.num_hiddens = self.d_model = d_model
        self.pad_id = pad_id
        self.src_embed = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model)
        for emb in (self.src_embed, self.tgt_embed):
            nn.init.normal_(emb.weight, std=d_model ** -0.5)
        self.positions = SinusoidalPositions(max_len, d_model)
        self.dropout = nn.Dropout(dropout)
        self.encoder_layers = nn.ModuleList()          # d2l: self.blks = nn.Sequential(), add_module("block"+str(i))
        self.decoder_layers = nn.ModuleList()
        for i in range(n_layers):
            self.encoder_layers.append(EncoderLayer(d_model, n_heads, d_ff, dropout))
            self.decoder_layers.append(DecoderLayer(d_model, n_heads, d_ff, dropout))
        self.output = nn.Linear(d_model, tgt_vocab_size)              # dense

    def pos_encoding(self, X):
        return self.dropout(self.positions(X))

    def encode(self, src, src_mask):
        X = self.pos_encoding(self.src_embed(src) * math.sqrt(self.num_hiddens))
        for blk in self.encoder_layers:
            X = blk(X, src_mask)
        return X

    def decode(self, tgt, memory, src_mask, tgt_mask):
        X = self.pos_encoding(self.tgt_embed(tgt) * math.sqrt(self.num_hiddens))
        for blk in self.decoder_layers:
            X = blk(X, memory, tgt_mask, src_mask)
        return self.output(X)

    def forward(self, enc_X, dec_X):
        enc_valid = padding_mask(enc_X, self.pad_id)
        dec_valid = causal_mask(dec_X.shape[1], device=dec_X.device) & padding_mask(dec_X, self.pad_id)
        enc_outputs = self.encode(enc_X, enc_valid)
        return self.decode(dec_X, enc_outputs, enc_valid, dec_valid)
'''),
    Port("nn.Transformer (encoder_norm and decoder_norm after the stacks)",
         "pytorch torch/nn/modules/transformer.py, Transformer.__init__: encoder_norm = LayerNorm(d_model); "
         "TransformerEncoder(encoder_layer, num_encoder_layers, encoder_norm); the same for the decoder",
         "Transformer", _transformer(
             init_extra='''        self.encoder_norm = LayerNorm(d_model)
        self.decoder_norm = LayerNorm(d_model)
''',
             encode='''    def encode(self, src, src_mask):
        x = self.dropout(self.positions(self.src_embed(src) * math.sqrt(self.d_model)))
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return self.encoder_norm(x)
''',
             decode='''    def decode(self, tgt, memory, src_mask, tgt_mask):
        x = self.dropout(self.positions(self.tgt_embed(tgt) * math.sqrt(self.d_model)))
        for layer in self.decoder_layers:
            x = layer(x, memory, tgt_mask, src_mask)
        return self.output(self.decoder_norm(x))
'''),
         breach="an extra final LayerNorm after the encoder stack and after the decoder stack",
         names=("final layernorm", "final norm", "extra layernorm", "norm after the last", "encoder_norm")),
    Port("Annotated Transformer Generator (log_softmax on the output layer)",
         "harvardnlp/annotated-transformer, class Generator.forward: log_softmax(self.proj(x), dim=-1)",
         "Transformer", _transformer(
             init_extra='''        self.generator = lambda x: F.log_softmax(self.output(x), dim=-1)
''',
             decode='''    def decode(self, tgt, memory, src_mask, tgt_mask):
        x = self.dropout(self.positions(self.tgt_embed(tgt) * math.sqrt(self.d_model)))
        for layer in self.decoder_layers:
            x = layer(x, memory, tgt_mask, src_mask)
        return self.generator(x)
'''),
         breach="decode returns log-probabilities (log_softmax of the output layer) instead of logits",
         names=("log_softmax", "log-softmax", "log probabilities", "log-prob", "not logits")),
    Port("Annotated Transformer make_model (xavier_uniform_ on every matrix)",
         "harvardnlp/annotated-transformer, make_model: for p in model.parameters(): if p.dim() > 1: "
         "nn.init.xavier_uniform_(p)", "Transformer", _transformer(
             embed_init="",
             init_extra='''        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
'''),
         breach="embeddings initialized with xavier_uniform_ instead of normal with std d_model ** -0.5",
         names=("init", "standard deviation", "std", "xavier", "d_model ** -0.5")),
    Port("PyTorch translation tutorial create_mask (True = masked, PyTorch's convention)",
         "pytorch/tutorials beginner_source/translation_transformer.py, create_mask: tgt_mask = "
         "generate_square_subsequent_mask(...), src_padding_mask = (src == PAD_IDX)", "Transformer", _transformer(
             forward='''    def generate_square_subsequent_mask(self, sz, device):
        return torch.triu(torch.ones(sz, sz, dtype=torch.bool, device=device), diagonal=1)

    def create_mask(self, src, tgt):
        tgt_mask = self.generate_square_subsequent_mask(tgt.shape[1], tgt.device)
        src_padding_mask = (src == self.pad_id).unsqueeze(1)
        tgt_padding_mask = (tgt == self.pad_id).unsqueeze(1)
        return src_padding_mask, tgt_mask | tgt_padding_mask

    def forward(self, src, tgt_in):
        src_mask, tgt_mask = self.create_mask(src, tgt_in)
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask, tgt_mask)
'''),
         breach="masks in PyTorch's convention (True = not allowed): the course's layers read True as may attend",
         names=("invert", "opposite", "true = may attend", "true means", "reversed")),
    Port("fairseq share_decoder_input_output_embed (tied output weights)",
         "facebookresearch/fairseq transformer_decoder.py build_output_projection: if "
         "share_input_output_embed: output_projection.weight = embed_tokens.weight", "Transformer", _transformer(
             init_extra='''        self.output.weight = self.tgt_embed.weight      # share_decoder_input_output_embed
'''),
         breach="the output layer's weight is tied to tgt_embed's instead of being a parameter of its own",
         names=("tied", "tie", "shared", "same weight", "share")),

    # --- greedy_decode --------------------------------------------------------------------------------
    Port("HF generate greedy search (unfinished_sequences)",
         "huggingface/transformers generation/utils.py, GenerationMixin._greedy_search: next_tokens = next_tokens * "
         "unfinished_sequences + pad_token_id * (1 - unfinished_sequences); stop when unfinished_sequences.max() == 0",
         "greedy_decode", '''
@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    pad_token_id = model.pad_id
    src_mask = padding_mask(src, pad_token_id)
    encoder_outputs = model.encode(src, src_mask)
    input_ids = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    unfinished_sequences = torch.ones(src.shape[0], dtype=torch.long, device=src.device)
    for _ in range(max_len):
        logits = model.decode(input_ids, encoder_outputs, src_mask,
                              causal_mask(input_ids.shape[1], device=src.device))
        next_token_logits = logits[:, -1, :]
        next_tokens = torch.argmax(next_token_logits, dim=-1)
        next_tokens = next_tokens * unfinished_sequences + pad_token_id * (1 - unfinished_sequences)
        input_ids = torch.cat([input_ids, next_tokens[:, None]], dim=-1)
        unfinished_sequences = unfinished_sequences.mul((next_tokens != eos_id).long())
        if unfinished_sequences.max() == 0:
            break
    return input_ids[:, 1:]
'''),
    Port("OpenNMT-py GreedySearch (finished sentences leave the batch)",
         "OpenNMT/OpenNMT-py onmt/translate/greedy_search.py, GreedySearch.update_finished: finished hypotheses are "
         "stored and the alive batch is reduced with select_indices", "greedy_decode", '''
@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    batch_size = src.shape[0]
    src_mask = padding_mask(src, model.pad_id)
    memory_bank = model.encode(src, src_mask)
    hypotheses = [None] * batch_size
    select_indices = torch.arange(batch_size, device=src.device)
    alive_seq = torch.full((batch_size, 1), bos_id, dtype=torch.long, device=src.device)
    for step in range(max_len):
        logits = model.decode(alive_seq, memory_bank, src_mask, causal_mask(alive_seq.shape[1], device=src.device))
        topk_ids = logits[:, -1].argmax(dim=-1)
        alive_seq = torch.cat([alive_seq, topk_ids[:, None]], dim=1)
        is_finished = topk_ids.eq(eos_id)
        if step + 1 == max_len:
            is_finished.fill_(True)
        for i in is_finished.nonzero().flatten().tolist():
            hypotheses[select_indices[i].item()] = alive_seq[i, 1:]
        is_alive = ~is_finished
        if not is_alive.any():
            break
        select_indices = select_indices[is_alive]
        alive_seq = alive_seq[is_alive]
        memory_bank = memory_bank[is_alive]
        src_mask = src_mask[is_alive]
    length = max(len(h) for h in hypotheses)
    out = torch.full((batch_size, length), model.pad_id, dtype=torch.long, device=src.device)
    for b, h in enumerate(hypotheses):
        out[b, :len(h)] = h
    return out
'''),
    Port("Annotated Transformer greedy_decode (max_len steps, no end-of-sentence test)",
         "harvardnlp/annotated-transformer, greedy_decode: for i in range(max_len - 1): decode, take torch.max of "
         "the generator's last position, append; subsequent_mask", "greedy_decode", '''
def subsequent_mask(size, device=None):
    "Mask out subsequent positions."
    attn_shape = (1, size, size)
    return torch.triu(torch.ones(attn_shape, device=device), diagonal=1).type(torch.uint8) == 0


@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    ys = torch.zeros(src.shape[0], 1).fill_(bos_id).type_as(src.data)
    for i in range(max_len):
        out = model.decode(ys, memory, src_mask, subsequent_mask(ys.size(1), device=src.device))
        _, next_word = torch.max(out[:, -1], dim=1)
        ys = torch.cat([ys, next_word.unsqueeze(1).type_as(src.data)], dim=1)
    return ys[:, 1:]
''', breach="never stops at eos: every row runs max_len steps and keeps the model's tokens after eos instead of "
            "pad_id",
         names=("after eos", "pad_id after", "keeps going", "continues after", "stop")),
    Port("PyTorch translation tutorial greedy_decode (break when next_word == EOS), batched",
         "pytorch/tutorials beginner_source/translation_transformer.py, greedy_decode: "
         "if next_word == EOS_IDX: break (written for one sentence)", "greedy_decode", '''
@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    ys = torch.ones(src.shape[0], 1).fill_(bos_id).type(torch.long).to(src.device)
    for i in range(max_len):
        tgt_mask = causal_mask(ys.size(1), device=src.device)
        out = model.decode(ys, memory, src_mask, tgt_mask)
        _, next_word = torch.max(out[:, -1], dim=1)
        ys = torch.cat([ys, next_word.unsqueeze(1)], dim=1)
        if (next_word == eos_id).any():
            break
    return ys[:, 1:]
''', breach="stops the whole batch as soon as one sentence produces eos",
         names=("first eos", "whole batch", "every sentence", "all sentences", "other sentences", "every row")),
    Port("d2l predict_seq2seq (eos not added to the output), batched",
         "d2l-ai/d2l-en chapter_recurrent-modern/seq2seq.md, predict_seq2seq: if pred == tgt_vocab['<eos>']: break; "
         "output_seq.append(pred)", "greedy_decode", '''
@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    enc_valid_lens = padding_mask(src, model.pad_id)
    enc_outputs = model.encode(src, enc_valid_lens)
    dec_X = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        Y = model.decode(dec_X, enc_outputs, enc_valid_lens, causal_mask(dec_X.shape[1], device=src.device))
        pred = Y[:, -1].argmax(dim=-1)
        ended = pred == eos_id
        pred = pred.masked_fill(done | ended, model.pad_id)     # eos is not added to the output
        done = done | ended
        if done.all():
            break
        dec_X = torch.cat([dec_X, pred[:, None]], dim=1)
    return dec_X[:, 1:]
''', breach="eos itself is left out of the output (pad_id written in its place)",
         names=INCLUDE_EOS),
    Port("HF generate output with the decoder start token",
         "huggingface/transformers generation/utils.py: generate() returns sequences that begin with "
         "decoder_start_token_id for encoder-decoder models", "greedy_decode", '''
@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    pad_token_id = model.pad_id
    src_mask = padding_mask(src, pad_token_id)
    encoder_outputs = model.encode(src, src_mask)
    decoder_input_ids = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    unfinished_sequences = torch.ones(src.shape[0], dtype=torch.long, device=src.device)
    for _ in range(max_len):
        logits = model.decode(decoder_input_ids, encoder_outputs, src_mask,
                              causal_mask(decoder_input_ids.shape[1], device=src.device))
        next_tokens = logits[:, -1, :].argmax(dim=-1)
        next_tokens = next_tokens * unfinished_sequences + pad_token_id * (1 - unfinished_sequences)
        decoder_input_ids = torch.cat([decoder_input_ids, next_tokens[:, None]], dim=-1)
        unfinished_sequences = unfinished_sequences.mul((next_tokens != eos_id).long())
        if unfinished_sequences.max() == 0:
            break
    return decoder_input_ids
''', breach="the returned ids keep the leading bos (decoder start token)",
         names=("bos", "leading", "start token", "begin")),
    Port("PyTorch translation tutorial translate() (model.eval() inside)",
         "pytorch/tutorials beginner_source/translation_transformer.py, translate(model, src_sentence): "
         "model.eval() before greedy_decode", "greedy_decode", '''
@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    model.eval()
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        out = model.decode(ys, memory, src_mask, causal_mask(ys.size(1), device=src.device))
        next_word = out[:, -1].argmax(dim=1).masked_fill(done, model.pad_id)
        ys = torch.cat([ys, next_word[:, None]], dim=1)
        done = done | (next_word == eos_id)
        if done.all():
            break
    return ys[:, 1:]
''', breach="switches the model to eval mode instead of leaving its mode alone",
         names=("eval", "mode", "train")),
]
