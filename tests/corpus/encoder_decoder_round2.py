"""Held-out ports of notebook 08 (decoder layer, encoder-decoder Transformer, greedy decoding) in the styles of
public projects the course's own corpus does not use (fairseq2, KerasNLP, bentrevett/pytorch-seq2seq, Whisper)."""
from . import Port

ASSIGNMENT = "08_encoder_decoder"

PORTS = [
    # --- DecoderLayer ---------------------------------------------------------------------------------
    Port("fairseq2 StandardTransformerDecoderLayer (self-attn, encoder-decoder attn, ffn; norm_order)",
         "facebookresearch/fairseq2 src/fairseq2/nn/transformer/decoder_layer.py, StandardTransformerDecoderLayer: "
         "_forward_self_attn, _forward_encoder_decoder_attn (keys=values=encoder_output, key_padding_mask="
         "encoder_padding_mask; only the decoder stream goes through encoder_decoder_attn_layer_norm), "
         "_forward_ffn; each: residual = seqs; LN first unless POST; dropout; seqs + residual; LN after if POST "
         "(fairseq2 returns (seqs, padding_mask); only seqs here)", "DecoderLayer", '''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.model_dim = d_model
        self.norm_order = "PRE" if norm_first else "POST"
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.norm1 = LayerNorm(d_model)                                   # self_attn_layer_norm
        if dropout > 0.0:
            self.self_attn_dropout = nn.Dropout(dropout)
        else:
            self.register_module("self_attn_dropout", None)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)  # encoder_decoder_attn
        self.norm2 = LayerNorm(d_model)                                   # encoder_decoder_attn_layer_norm
        if dropout > 0.0:
            self.encoder_decoder_attn_dropout = nn.Dropout(dropout)
        else:
            self.register_module("encoder_decoder_attn_dropout", None)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm3 = LayerNorm(d_model)                                   # ffn_layer_norm
        if dropout > 0.0:
            self.ffn_dropout = nn.Dropout(dropout)
        else:
            self.register_module("ffn_dropout", None)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        seqs = self._forward_self_attn(x, tgt_mask)
        seqs = self._forward_encoder_decoder_attn(seqs, memory, memory_mask)
        seqs = self._forward_ffn(seqs)
        return seqs

    def _forward_self_attn(self, seqs, self_attn_mask):
        residual = seqs
        if self.norm_order != "POST":
            seqs = self.norm1(seqs)
        seqs = self.self_attn(seqs, seqs, seqs, self_attn_mask)[0]
        if self.self_attn_dropout is not None:
            seqs = self.self_attn_dropout(seqs)
        seqs = seqs + residual
        if self.norm_order == "POST":
            seqs = self.norm1(seqs)
        return seqs

    def _forward_encoder_decoder_attn(self, seqs, encoder_output, encoder_padding_mask):
        if encoder_output is None:
            raise ValueError("`encoder_output` must not be `None` for encoder-decoder attention.")
        residual = seqs
        if self.norm_order != "POST":
            seqs = self.norm2(seqs)
        seqs = self.cross_attn(seqs, encoder_output, encoder_output, encoder_padding_mask)[0]
        if self.encoder_decoder_attn_dropout is not None:
            seqs = self.encoder_decoder_attn_dropout(seqs)
        seqs = seqs + residual
        if self.norm_order == "POST":
            seqs = self.norm2(seqs)
        return seqs

    def _forward_ffn(self, seqs):
        residual = seqs
        if self.norm_order != "POST":
            seqs = self.norm3(seqs)
        seqs = self.ff(seqs)
        if self.ffn_dropout is not None:
            seqs = self.ffn_dropout(seqs)
        seqs = seqs + residual
        if self.norm_order == "POST":
            seqs = self.norm3(seqs)
        return seqs
'''),
    Port("KerasNLP TransformerDecoder (use_causal_mask=True: its own causal mask merged with ops.minimum)",
         "keras-team/keras-nlp keras_nlp/layers/modeling/transformer_decoder.py, TransformerDecoder.call(..., "
         "use_causal_mask=True): _compute_self_attention_mask merges decoder_attention_mask with "
         "compute_causal_mask(batch_size, input_length, output_length) by ops.minimum (int32 masks, cast to bool "
         "by MultiHeadAttention); self-attention, cross-attention and feed-forward blocks with residual, "
         "dropout and LayerNorm after the addition unless normalize_first", "DecoderLayer", '''
def compute_causal_mask(batch_size, input_length, output_length, cache_index=0, device=None):
    i = torch.arange(output_length, device=device)[:, None] + cache_index
    j = torch.arange(input_length, device=device)
    mask = (i >= j).to(torch.int32)[None]
    return mask.broadcast_to((batch_size, output_length, input_length))


class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.normalize_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)    # _self_attention_layer
        self.norm1 = LayerNorm(d_model)                                    # _self_attention_layernorm
        self.dropout1 = nn.Dropout(dropout)                                # _self_attention_dropout
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)   # _cross_attention_layer
        self.norm2 = LayerNorm(d_model)                                    # _cross_attention_layernorm
        self.dropout2 = nn.Dropout(dropout)                                # _cross_attention_dropout
        self.ff = FeedForward(d_model, d_ff, dropout)                      # _feedforward_{intermediate,output}_dense
        self.norm3 = LayerNorm(d_model)                                    # _feedforward_layernorm
        self.dropout3 = nn.Dropout(dropout)                                # _feedforward_dropout

    def _compute_self_attention_mask(self, decoder_sequence, decoder_attention_mask, use_causal_mask):
        decoder_mask = decoder_attention_mask
        if decoder_mask is not None:
            decoder_mask = decoder_mask.to(torch.int32)
        if use_causal_mask:
            batch_size = decoder_sequence.shape[0]
            input_length = output_length = decoder_sequence.shape[1]
            causal_mask = compute_causal_mask(batch_size, input_length, output_length, 0,
                                              device=decoder_sequence.device)
            return torch.minimum(decoder_mask, causal_mask) if decoder_mask is not None else causal_mask
        return decoder_mask

    def forward(self, x, memory, tgt_mask=None, memory_mask=None, use_causal_mask=True):
        self_attention_mask = self._compute_self_attention_mask(x, tgt_mask, use_causal_mask)
        if self_attention_mask is not None:
            self_attention_mask = self_attention_mask.bool()

        # Self attention block.
        residual = x
        if self.normalize_first:
            x = self.norm1(x)
        x = self.self_attn(x, x, x, self_attention_mask)[0]
        x = self.dropout1(x)
        x = x + residual
        if not self.normalize_first:
            x = self.norm1(x)

        # Cross attention block.
        residual = x
        if self.normalize_first:
            x = self.norm2(x)
        x = self.cross_attn(x, memory, memory, memory_mask)[0]
        x = self.dropout2(x)
        x = x + residual
        if not self.normalize_first:
            x = self.norm2(x)

        # Feedforward block.
        residual = x
        if self.normalize_first:
            x = self.norm3(x)
        x = self.ff(x)
        x = self.dropout3(x)
        x = x + residual
        if not self.normalize_first:
            x = self.norm3(x)
        return x
''', breach="KerasNLP's decoder applies its own causal mask by default (use_causal_mask=True): without a tgt_mask "
            "the self-attention still cannot see later positions",
         names=("causal", "future", "always", "without a mask", "no mask", "ignores the mask")),

    # --- Transformer ----------------------------------------------------------------------------------
    Port("KerasNLP token embedding + SinePositionEncoding (embeddings not scaled by sqrt(d_model))",
         "keras-team/keras-nlp, SinePositionEncoding docstring: embedding = keras.layers.Embedding(...)(inputs); "
         "positional_encoding = SinePositionEncoding()(embedding); outputs = embedding + positional_encoding "
         "(TokenAndPositionEmbedding likewise adds embedded_tokens + embedded_positions with no scaling); the "
         "course's initialisation std d_model ** -0.5 kept", "Transformer", '''
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

    def encode(self, src, src_mask):
        embedding = self.src_embed(src)
        outputs = self.positions(embedding)          # embedding + positional_encoding
        x = self.dropout(outputs)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt, memory, src_mask, tgt_mask):
        embedding = self.tgt_embed(tgt)
        x = self.dropout(self.positions(embedding))
        for layer in self.decoder_layers:
            x = layer(x, memory, tgt_mask, src_mask)
        return self.output(x)

    def forward(self, src, tgt_in):
        src_mask = padding_mask(src, self.pad_id)
        tgt_mask = causal_mask(tgt_in.shape[1], device=tgt_in.device) & padding_mask(tgt_in, self.pad_id)
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask, tgt_mask)
''', breach="adds the positions to the raw token embeddings (KerasNLP's embedding + positional encoding) without "
            "multiplying the embeddings by sqrt(d_model)",
         names=("sqrt(d_model)", "scale", "scaled", "multipl", "math.sqrt")),

    # --- greedy_decode --------------------------------------------------------------------------------
    Port("bentrevett/pytorch-seq2seq translate_sentence, one sentence at a time",
         "bentrevett/pytorch-seq2seq '6 - Attention is All You Need', translate_sentence: trg_indexes = "
         "[init_token]; for i in range(max_len): output = model.decoder(trg_tensor, enc_src, trg_mask, src_mask); "
         "pred_token = output.argmax(2)[:, -1].item(); trg_indexes.append(pred_token); break at eos; return "
         "trg_tokens[1:] (run per sentence, the rows padded with pad_id; model.eval() left to the caller as the "
         "course asks)", "greedy_decode", '''
@torch.no_grad()
def translate_sentence(src_tensor, model, max_len, bos_id, eos_id):
    device = src_tensor.device
    src_mask = padding_mask(src_tensor, model.pad_id)
    enc_src = model.encode(src_tensor, src_mask)
    trg_indexes = [bos_id]
    for i in range(max_len):
        trg_tensor = torch.LongTensor(trg_indexes).unsqueeze(0).to(device)
        trg_mask = causal_mask(trg_tensor.shape[1], device=device)
        output = model.decode(trg_tensor, enc_src, src_mask, trg_mask)
        pred_token = output.argmax(2)[:, -1].item()
        trg_indexes.append(pred_token)
        if pred_token == eos_id:
            break
    return trg_indexes[1:]


@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    rows = [translate_sentence(src[b:b + 1], model, max_len, bos_id, eos_id) for b in range(src.shape[0])]
    length = max((len(r) for r in rows), default=0)
    out = torch.full((src.shape[0], length), model.pad_id, dtype=torch.long, device=src.device)
    for b, r in enumerate(rows):
        out[b, :len(r)] = torch.tensor(r, dtype=torch.long, device=src.device)
    return out
'''),
    Port("Whisper GreedyDecoder.update (finished rows keep emitting eot)",
         "openai/whisper whisper/decoding.py, GreedyDecoder.update: next_tokens = logits.argmax(dim=-1); "
         "next_tokens[tokens[:, -1] == self.eot] = self.eot; tokens = torch.cat([tokens, next_tokens[:, None]], "
         "dim=-1); completed = (tokens[:, -1] == self.eot).all(); DecodingTask._main_loop: for i in "
         "range(self.sample_len): logits = ...[:, -1]; tokens, completed = self.decoder.update(...); if completed: "
         "break", "greedy_decode", '''
class GreedyDecoder:
    def __init__(self, temperature, eot):
        self.temperature = temperature
        self.eot = eot

    def update(self, tokens, logits, sum_logprobs):
        if self.temperature == 0:
            next_tokens = logits.argmax(dim=-1)
        else:
            next_tokens = torch.distributions.Categorical(logits=logits / self.temperature).sample()
        logprobs = F.log_softmax(logits.float(), dim=-1)
        current_logprobs = logprobs[torch.arange(logprobs.shape[0]), next_tokens]
        sum_logprobs += current_logprobs * (tokens[:, -1] != self.eot)
        next_tokens[tokens[:, -1] == self.eot] = self.eot
        tokens = torch.cat([tokens, next_tokens[:, None]], dim=-1)
        completed = (tokens[:, -1] == self.eot).all()
        return tokens, completed


@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    src_mask = padding_mask(src, model.pad_id)
    audio_features = model.encode(src, src_mask)
    decoder = GreedyDecoder(temperature=0.0, eot=eos_id)
    tokens = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    sum_logprobs = torch.zeros(src.shape[0], device=src.device)
    for i in range(max_len):
        logits = model.decode(tokens, audio_features, src_mask, causal_mask(tokens.shape[1], device=src.device))
        # now we need to consider the logits at the last token only
        logits = logits[:, -1]
        tokens, completed = decoder.update(tokens, logits, sum_logprobs)
        if completed:
            break
    return tokens[:, 1:]
''', breach="after a row's eos it keeps writing eos (Whisper fills finished rows with eot) instead of model.pad_id",
         names=("pad_id", "after eos", "after its eos", "eos again", "repeat", "keeps writing")),
]
