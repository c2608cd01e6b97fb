"""Fourth held-out set, notebook 08: ESPnet, Hugging Face BART / Marian, JoeyNMT."""
from . import Port

ASSIGNMENT = "08_encoder_decoder"

_TRANSFORMER_REST = '''
    def encode(self, src, src_mask):
        x = self.dropout(self.positions(self.src_embed(src) * self.embed_scale))
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt, memory, src_mask, tgt_mask):
        x = self.dropout(self.positions(self.tgt_embed(tgt) * self.embed_scale))
        for layer in self.decoder_layers:
            x = layer(x, memory, tgt_mask, src_mask)
        return self.lm_logits(x)

    def forward(self, src, tgt_in):
        src_mask = padding_mask(src, self.pad_id)
        tgt_mask = causal_mask(tgt_in.shape[1], device=tgt_in.device) & padding_mask(tgt_in, self.pad_id)
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask, tgt_mask)
'''

PORTS = [
    Port("ESPnet DecoderLayer (normalize_before; residual = x, one shared dropout, norm1 / norm2 / norm3)",
         "espnet/espnet espnet/nets/pytorch_backend/transformer/decoder_layer.py, DecoderLayer.forward: residual = "
         "tgt; if self.normalize_before: tgt = self.norm1(tgt); x = residual + self.dropout(self.self_attn(tgt_q, tgt, "
         "tgt, tgt_q_mask)); if not self.normalize_before: x = self.norm1(x); ... src_attn(x, memory, memory, "
         "memory_mask) with norm2; feed_forward with norm3 (concat_after=False; src_attn renamed cross_attn, "
         "feed_forward renamed ff)", "DecoderLayer", '''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.size = d_model
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.normalize_before = norm_first

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None):
        residual = tgt
        if self.normalize_before:
            tgt = self.norm1(tgt)
        tgt_q = tgt
        tgt_q_mask = tgt_mask
        x = residual + self.dropout(self.self_attn(tgt_q, tgt, tgt, tgt_q_mask)[0])
        if not self.normalize_before:
            x = self.norm1(x)

        residual = x
        if self.normalize_before:
            x = self.norm2(x)
        x = residual + self.dropout(self.cross_attn(x, memory, memory, memory_mask)[0])
        if not self.normalize_before:
            x = self.norm2(x)

        residual = x
        if self.normalize_before:
            x = self.norm3(x)
        x = residual + self.dropout(self.ff(x))
        if not self.normalize_before:
            x = self.norm3(x)
        return x
'''),
    Port("Hugging Face BART (config.scale_embedding=False: embed_scale = 1.0)",
         "huggingface/transformers models/bart/modeling_bart.py, BartEncoder / BartDecoder: embed_scale = "
         "math.sqrt(embed_dim) if config.scale_embedding else 1.0 (BartConfig scale_embedding=False); "
         "inputs_embeds = self.embed_tokens(input_ids) * self.embed_scale (the course's modules, init and names)",
         "Transformer", '''
class Transformer(nn.Module):
    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=128, n_heads=4, n_layers=2, d_ff=512,
                 dropout=0.1, max_len=256, pad_id=0, scale_embedding=False):
        super().__init__()
        self.d_model = d_model
        self.pad_id = pad_id
        self.embed_scale = math.sqrt(d_model) if scale_embedding else 1.0
        self.src_embed = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model)
        nn.init.normal_(self.src_embed.weight, std=d_model ** -0.5)
        nn.init.normal_(self.tgt_embed.weight, std=d_model ** -0.5)
        self.positions = SinusoidalPositions(max_len, d_model)
        self.dropout = nn.Dropout(dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.output = nn.Linear(d_model, tgt_vocab_size)

    def lm_logits(self, x):
        return self.output(x)
''' + _TRANSFORMER_REST, breach="the embeddings are not multiplied by sqrt(d_model) (BART's embed_scale = 1.0)",
         names=("sqrt", "scale", "√")),
    Port("Hugging Face MarianMTModel lm_head (nn.Linear(d_model, vocab, bias=False)) + final_logits_bias buffer",
         "huggingface/transformers models/marian/modeling_marian.py, MarianMTModel.__init__: self.register_buffer("
         "'final_logits_bias', torch.zeros((1, target_vocab_size))); self.lm_head = nn.Linear(config.d_model, "
         "target_vocab_size, bias=False); forward: lm_logits = self.lm_head(outputs[0]) + self.final_logits_bias "
         "(lm_head named output for the course)", "Transformer", '''
class Transformer(nn.Module):
    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=128, n_heads=4, n_layers=2, d_ff=512,
                 dropout=0.1, max_len=256, pad_id=0):
        super().__init__()
        self.d_model = d_model
        self.pad_id = pad_id
        self.embed_scale = math.sqrt(d_model)
        self.src_embed = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model)
        nn.init.normal_(self.src_embed.weight, std=d_model ** -0.5)
        nn.init.normal_(self.tgt_embed.weight, std=d_model ** -0.5)
        self.positions = SinusoidalPositions(max_len, d_model)
        self.dropout = nn.Dropout(dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.register_buffer("final_logits_bias", torch.zeros((1, tgt_vocab_size)))
        self.output = nn.Linear(d_model, tgt_vocab_size, bias=False)   # lm_head

    def lm_logits(self, x):
        return self.output(x) + self.final_logits_bias
''' + _TRANSFORMER_REST, breach="the output layer has no trainable bias (Marian's lm_head bias=False, a zero "
                                "final_logits_bias buffer instead)", names=("bias",)),
    Port("JoeyNMT transformer_greedy (finished += is_eos; stop when every row has finished; tokens after eos kept)",
         "joeynmt/joeynmt joeynmt/search.py, transformer_greedy: ys = encoder_output.new_full([batch_size, 1], "
         "bos_index, dtype=torch.long); for _ in range(max_output_length): logits = decoder(...)[:, -1]; _, "
         "next_word = torch.max(logits, dim=1); ys = torch.cat([ys, next_word.unsqueeze(-1)], dim=1); is_eos = "
         "torch.eq(next_word, eos_index); finished += is_eos; if (finished >= 1).sum() == batch_size: break; "
         "ys = ys[:, 1:] (returned as a tensor, not numpy; the course's model.decode and causal mask)",
         "greedy_decode", '''
@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    src_mask = padding_mask(src, model.pad_id)
    encoder_output = model.encode(src, src_mask)
    batch_size = src_mask.size(0)
    ys = encoder_output.new_full([batch_size, 1], bos_id, dtype=torch.long)
    finished = src_mask.new_zeros((batch_size,), dtype=torch.long)
    for _ in range(max_len):
        logits = model.decode(ys, encoder_output, src_mask, causal_mask(ys.shape[1], device=src.device))
        logits = logits[:, -1]
        _, next_word = torch.max(logits, dim=1)
        next_word = next_word.data
        ys = torch.cat([ys, next_word.unsqueeze(-1)], dim=1)
        is_eos = torch.eq(next_word, eos_id)
        finished += is_eos
        # stop predicting if <eos> reached for all elements in batch
        if (finished >= 1).sum() == batch_size:
            break
    ys = ys[:, 1:]
    return ys
''', breach="rows that have finished keep their argmax tokens after eos instead of model.pad_id",
         names=("pad", "after eos", "after the eos", "after its eos")),
]
