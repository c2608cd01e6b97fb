"""Fifth held-out set, notebook 08: OpenNMT-tf, jadore801120/attention-is-all-you-need-pytorch, ReZero
(majumderb/rezero), Kyubyong/transformer, bentrevett/pytorch-seq2seq."""
from tests.corpus import Port

ASSIGNMENT = "08_encoder_decoder"

PORTS = [
    Port(
        "OpenNMT-tf SelfAttentionDecoderLayer (pre_norm follows norm_first)",
        "OpenNMT/OpenNMT-tf, opennmt/layers/transformer.py: SelfAttentionDecoderLayer.call with "
        "TransformerLayerWrapper / common.LayerWrapper (input norm only on the query side, memory as given)",
        "DecoderLayer",
        r'''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first                  # pre_norm
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def _wrapper(self, layer, norm, drop, inputs):
        x = norm(inputs) if self.norm_first else inputs            # normalize_input
        outputs = drop(layer(x))                                   # output_dropout
        outputs = outputs + inputs                                 # residual_connection
        return outputs if self.norm_first else norm(outputs)       # normalize_output

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        outputs = self._wrapper(lambda t: self.self_attn(t, t, t, tgt_mask)[0], self.norm1, self.dropout1, x)
        outputs = self._wrapper(lambda t: self.cross_attn(t, memory, memory, memory_mask)[0],
                                self.norm2, self.dropout2, outputs)
        return self._wrapper(self.ff, self.norm3, self.dropout3, outputs)
''',
    ),
    Port(
        "attention-is-all-you-need-pytorch DecoderLayer: post-norm sublayers only",
        "jadore801120/attention-is-all-you-need-pytorch, transformer/Layers.py: DecoderLayer (slf_attn, enc_attn, "
        "pos_ffn, each adding its residual and applying its own LayerNorm; no pre-norm option)",
        "DecoderLayer",
        r'''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first                  # accepted, the layer is post-norm only
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        dec_output = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)[0]))
        dec_output = self.norm2(dec_output + self.dropout2(
            self.cross_attn(dec_output, memory, memory, memory_mask)[0]))
        return self.norm3(dec_output + self.dropout3(self.ff(dec_output)))
''',
        breach="norm_first is accepted but ignored: the layer is always post-norm, so norm_first=True gives the "
               "post-norm result",
        names=("norm_first", "pre-norm", "prenorm", "pre_norm", "ignored", "ignores", "post-norm only",
               "always post-norm"),
    ),
    Port(
        "ReZero RZTXDecoderLayer: no LayerNorm, residual weight initialised to 0",
        "majumderb/rezero, rezero/transformer/rztx.py: RZTXDecoderLayer (tgt = tgt + dropout(sublayer) * "
        "resweight, resweight = nn.Parameter(torch.zeros(1)), no norms)",
        "DecoderLayer",
        r'''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)   # multihead_attn
        self.ff = FeedForward(d_model, d_ff, dropout)                     # linear2(dropout(relu(linear1)))
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)
        self.resweight = nn.Parameter(torch.zeros((1,)))

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        tgt = x
        tgt2 = self.self_attn(tgt, tgt, tgt, tgt_mask)[0]
        tgt = tgt + self.dropout1(tgt2) * self.resweight
        tgt2 = self.cross_attn(tgt, memory, memory, memory_mask)[0]
        tgt = tgt + self.dropout2(tgt2) * self.resweight
        tgt2 = self.ff(tgt)
        tgt = tgt + self.dropout3(tgt2) * self.resweight
        return tgt
''',
        breach="no LayerNorms at all (ReZero): each sublayer is added with a learned scalar resweight that starts "
               "at 0, so the untrained layer returns x unchanged and norm1..norm3 do not exist",
        names=("layernorm", "layer norm", "norm1", "normaliz", "rezero", "resweight", "residual weight",
               "unchanged", "identity"),
    ),
    Port(
        "OpenNMT-tf Transformer (post-norm, no final LayerNorm)",
        "OpenNMT/OpenNMT-tf, opennmt/encoders/self_attention_encoder.py and decoders/self_attention_decoder.py: "
        "inputs *= num_units**0.5, position_encoder, dropout, layers, layer_norm only when pre_norm; "
        "output_layer Dense(vocab_size); embeddings initialised as the notebook asks",
        "Transformer",
        r'''
class Transformer(nn.Module):
    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=128, n_heads=4, n_layers=2, d_ff=512,
                 dropout=0.1, max_len=256, pad_id=0):
        super().__init__()
        self.d_model = d_model
        self.num_units = d_model
        self.pad_id = pad_id
        self.src_embed = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model)
        nn.init.normal_(self.src_embed.weight, std=d_model ** -0.5)
        nn.init.normal_(self.tgt_embed.weight, std=d_model ** -0.5)
        self.positions = SinusoidalPositions(max_len, d_model)        # position_encoder
        self.dropout = nn.Dropout(dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.output = nn.Linear(d_model, tgt_vocab_size)             # output_layer

    def encode(self, src, src_mask):
        inputs = self.src_embed(src)
        inputs = inputs * self.num_units ** 0.5
        inputs = self.positions(inputs)
        inputs = self.dropout(inputs)
        for layer in self.encoder_layers:
            inputs = layer(inputs, src_mask)
        return inputs                                  # pre_norm=False: no final layer_norm

    def decode(self, tgt, memory, src_mask, tgt_mask):
        inputs = self.tgt_embed(tgt)
        inputs = inputs * self.num_units ** 0.5
        inputs = self.positions(inputs)
        inputs = self.dropout(inputs)
        for layer in self.decoder_layers:
            inputs = layer(inputs, memory, tgt_mask, src_mask)
        return self.output(inputs)

    def forward(self, src, tgt_in):
        src_mask = padding_mask(src, self.pad_id)
        tgt_mask = causal_mask(tgt_in.shape[1], device=tgt_in.device) & padding_mask(tgt_in, self.pad_id)
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask, tgt_mask)
''',
    ),
    Port(
        "Kyubyong transformer: one embedding matrix shared with the output projection",
        "Kyubyong/transformer, model.py and modules.py: get_token_embeddings (one 'shared_weight_matrix'; "
        "logits = einsum('ntd,dk->ntk', dec, transpose(embeddings)), no output bias); source shares it when the "
        "vocabularies have the same size",
        "Transformer",
        r'''
class Transformer(nn.Module):
    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=128, n_heads=4, n_layers=2, d_ff=512,
                 dropout=0.1, max_len=256, pad_id=0):
        super().__init__()
        self.d_model = d_model
        self.pad_id = pad_id
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model)
        nn.init.normal_(self.tgt_embed.weight, std=d_model ** -0.5)
        if src_vocab_size == tgt_vocab_size:
            self.src_embed = self.tgt_embed                          # one shared weight matrix
        else:
            self.src_embed = nn.Embedding(src_vocab_size, d_model)
            nn.init.normal_(self.src_embed.weight, std=d_model ** -0.5)
        self.positions = SinusoidalPositions(max_len, d_model)
        self.dropout = nn.Dropout(dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.output = nn.Linear(d_model, tgt_vocab_size, bias=False)
        self.output.weight = self.tgt_embed.weight                   # Final linear projection (weights shared)

    def encode(self, src, src_mask):
        x = self.dropout(self.positions(self.src_embed(src) * self.d_model ** 0.5))
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt, memory, src_mask, tgt_mask):
        x = self.dropout(self.positions(self.tgt_embed(tgt) * self.d_model ** 0.5))
        for layer in self.decoder_layers:
            x = layer(x, memory, tgt_mask, src_mask)
        return self.output(x)

    def forward(self, src, tgt_in):
        src_mask = padding_mask(src, self.pad_id)
        tgt_mask = causal_mask(tgt_in.shape[1], device=tgt_in.device) & padding_mask(tgt_in, self.pad_id)
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask, tgt_mask)
''',
        breach="the output layer reuses the target embedding matrix (weight tying, no bias) and the source "
               "embedding is the same tensor when the vocabularies have equal size; the notebook asks for separate "
               "src_embed, tgt_embed and an nn.Linear output with its own weight and bias",
        names=("tied", "tie", "tying", "shared", "share", "same weight", "same tensor", "same parameter",
               "output bias", "bias"),
    ),
    Port(
        "OpenNMT-tf dynamic_decode with GreedySearch: finished rows keep emitting eos",
        "OpenNMT/OpenNMT-tf, opennmt/utils/decoding.py: dynamic_decode (finished rows get eos_max_prob, "
        "log_softmax, BestSampler argmax, loop while any row is unfinished, maximum_iterations)",
        "greedy_decode",
        r'''
@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for step in range(max_len):                                     # maximum_iterations
        logits = model.decode(ys, memory, src_mask, causal_mask(ys.shape[1], device=src.device))[:, -1].float()
        # Penalize or force EOS: finished sequences can only produce end_id
        eos_max_prob = torch.full_like(logits, torch.finfo(logits.dtype).min)
        eos_max_prob[:, eos_id] = torch.finfo(logits.dtype).max
        logits = torch.where(finished[:, None], eos_max_prob, logits)
        log_probs = torch.log_softmax(logits, dim=-1)
        output = log_probs.argmax(dim=-1)                            # BestSampler
        ys = torch.cat([ys, output[:, None]], dim=1)
        finished = finished | (output == eos_id)
        if finished.all():                                           # _cond: reduce_any(not finished)
            break
    return ys[:, 1:]
''',
        breach="after a row has produced eos it keeps producing eos (OpenNMT forces end_id on finished rows) "
               "instead of model.pad_id",
        names=("pad", "pad_id", "padding", "after eos", "eos repeated", "repeats eos", "repeated eos",
               "finished"),
    ),
    Port(
        "pytorch-seq2seq translate_sentence: model.eval() inside, batched",
        "bentrevett/pytorch-seq2seq, '6 - Attention is All You Need.ipynb': translate_sentence (model.eval(), "
        "torch.no_grad() blocks, argmax(2)[:, -1], stop at eos); batched with pad after eos for the course API",
        "greedy_decode",
        r'''
def greedy_decode(model, src, max_len, bos_id, eos_id):
    model.eval()
    src_mask = padding_mask(src, model.pad_id)
    with torch.no_grad():
        enc_src = model.encode(src, src_mask)
    trg_indexes = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for i in range(max_len):
        trg_mask = causal_mask(trg_indexes.shape[1], device=src.device)
        with torch.no_grad():
            output = model.decode(trg_indexes, enc_src, src_mask, trg_mask)
        pred_token = output.argmax(2)[:, -1].masked_fill(done, model.pad_id)
        trg_indexes = torch.cat([trg_indexes, pred_token[:, None]], dim=1)
        done = done | (pred_token == eos_id)
        if done.all():
            break
    return trg_indexes[:, 1:]
''',
        breach="calls model.eval() itself, so the caller's model is left in eval mode (the notebook says to leave "
               "the model's mode alone)",
        names=("eval", "mode", "train mode", "training mode", ".training"),
    ),
]
