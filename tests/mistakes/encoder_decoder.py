"""Mistake catalogue of notebook 08 (the encoder-decoder Transformer)."""
from . import Alternative, Mistake

ASSIGNMENT = "08_encoder_decoder"

DECODER_INIT = '''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
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
        sa = lambda q, m=tgt_mask: self.dropout1(self.self_attn(q, q, q, m)[0])
        ca = lambda q, kv=memory, m=memory_mask: self.dropout2(self.cross_attn(q, kv, kv, m)[0])
        ff = lambda q: self.dropout3(self.ff(q))
'''
PRE = '''        if self.norm_first:
            x = x + sa(self.norm1(x))
            x = x + ca(self.norm2(x))
            return x + ff(self.norm3(x))
'''
POST = '''        x = self.norm1(x + sa(x))
        x = self.norm2(x + ca(x))
        return self.norm3(x + ff(x))
'''


def decoder(pre=PRE, post=POST):
    return DECODER_INIT + pre + post


MODEL_INIT = '''
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
'''
ENCODE = '''
    def encode(self, src, src_mask):
        x = self.dropout(self.positions(self.src_embed(src) * math.sqrt(self.d_model)))
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x
'''
DECODE = '''
    def decode(self, tgt, memory, src_mask, tgt_mask):
        x = self.dropout(self.positions(self.tgt_embed(tgt) * math.sqrt(self.d_model)))
        for layer in self.decoder_layers:
            x = layer(x, memory, tgt_mask, src_mask)
        return self.output(x)
'''
FORWARD = '''
    def forward(self, src, tgt_in):
        src_mask = padding_mask(src, self.pad_id)
        tgt_mask = causal_mask(tgt_in.shape[1], device=tgt_in.device) & padding_mask(tgt_in, self.pad_id)
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask, tgt_mask)
'''


def model(init=MODEL_INIT, encode=ENCODE, decode=DECODE, forward=FORWARD, replace=()):
    code = init + encode + decode + forward
    for old, new in replace:
        assert old in code, old
        code = code.replace(old, new)
    return code


GREEDY = '''
@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        logits = model.decode(ys, memory, src_mask, causal_mask(ys.shape[1], device=src.device))
        next_token = logits[:, -1].argmax(dim=-1).masked_fill(done, model.pad_id)
        ys = torch.cat([ys, next_token[:, None]], dim=1)
        done = done | (next_token == eos_id)
        if done.all():
            break
    return ys[:, 1:]
'''


def greedy(*replace):
    code = GREEDY
    for old, new in replace:
        assert old in code, old
        code = code.replace(old, new)
    return code


MISTAKES = [
    # --- DecoderLayer ------------------------------------------------------------
    Mistake("cross-attention keys and values from the decoder", "DecoderLayer", decoder(
        PRE.replace("ca(self.norm2(x))", "ca(self.norm2(x), self.norm2(x), None)"),
        POST.replace("ca(x)", "ca(x, x, None)")),
        ("DecoderLayer_post_norm", "DecoderLayer_pre_norm", "DecoderLayer_masks"),
        "keys and values of the cross-attention come from the decoder", elsewhere='do not use x in the cross-attention'),
    Mistake("tgt_mask ignored (no causal mask)", "DecoderLayer", decoder(
        PRE.replace("sa(self.norm1(x))", "sa(self.norm1(x), None)"), POST.replace("sa(x)", "sa(x, None)")),
        ("DecoderLayer_post_norm", "DecoderLayer_pre_norm", "DecoderLayer_masks"), "tgt_mask is ignored", elsewhere='pass tgt_mask to the self-attention'),
    Mistake("causal tgt_mask on the cross-attention too", "DecoderLayer", decoder(
        PRE.replace("ca(self.norm2(x))", "ca(self.norm2(x), memory, tgt_mask)"),
        POST.replace("ca(x)", "ca(x, memory, tgt_mask)")),
        ("DecoderLayer_post_norm", "DecoderLayer_pre_norm", "DecoderLayer_masks"),
        "the causal tgt_mask does not belong to the cross-attention"),
    Mistake("memory_mask ignored", "DecoderLayer", decoder(
        PRE.replace("ca(self.norm2(x))", "ca(self.norm2(x), memory, None)"),
        POST.replace("ca(x)", "ca(x, memory, None)")),
        ("DecoderLayer_post_norm", "DecoderLayer_pre_norm", "DecoderLayer_masks"), "memory_mask is ignored", elsewhere='Pass memory_mask to the cross-attention'),
    Mistake("no residual around the cross-attention", "DecoderLayer", decoder(
        PRE.replace("x = x + ca(self.norm2(x))", "x = ca(self.norm2(x))"),
        POST.replace("self.norm2(x + ca(x))", "self.norm2(ca(x))")),
        ("DecoderLayer_post_norm", "DecoderLayer_pre_norm"), "no residual connection around the cross-attention"),
    Mistake("LayerNorms in the wrong order (norm2 and norm3 swapped)", "DecoderLayer", decoder(
        PRE.replace("ca(self.norm2(x))", "ca(self.norm3(x))").replace("ff(self.norm3(x))", "ff(self.norm2(x))"),
        POST.replace("self.norm2(x + ca(x))", "self.norm3(x + ca(x))").replace("self.norm3(x + ff(x))",
                                                                               "self.norm2(x + ff(x))")),
        ("DecoderLayer_post_norm", "DecoderLayer_pre_norm"), "LayerNorms are paired with the wrong sublayers"),
    Mistake("pre-norm with the LayerNorms rotated (norm3, norm1, norm2)", "DecoderLayer", decoder(
        PRE.replace("sa(self.norm1(x))", "sa(self.norm3(x))").replace("ca(self.norm2(x))", "ca(self.norm1(x))")
        .replace("ff(self.norm3(x))", "ff(self.norm2(x))")),
        ("DecoderLayer_pre_norm",), "norm3 with the self-attention, norm1 with the cross-attention"),
    Mistake("self-attention always causal (its own mask, tgt_mask unused)", "DecoderLayer", decoder().replace(
        "        sa = lambda q, m=tgt_mask:",
        "        tgt_mask = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool, device=x.device).tril()\n"
        "        sa = lambda q, m=tgt_mask:"),
        ("DecoderLayer_post_norm", "DecoderLayer_pre_norm"),
        "a causal mask is applied although none was given (tgt_mask=None)"),
    Mistake("norm_first ignored (always post-norm)", "DecoderLayer", decoder(pre=""),
            ("DecoderLayer_pre_norm",), "pre-norm is computed as post-norm"),
    Mistake("pre-norm normalizes the memory too", "DecoderLayer", decoder(
        PRE.replace("ca(self.norm2(x))", "ca(self.norm2(x), self.norm2(memory))")),
        ("DecoderLayer_pre_norm",), "norm2 is applied to the memory too"),
    Mistake("cross-attention before self-attention", "DecoderLayer", decoder(
        PRE.replace("            x = x + sa(self.norm1(x))\n            x = x + ca(self.norm2(x))\n",
                    "            x = x + ca(self.norm2(x))\n            x = x + sa(self.norm1(x))\n"),
        POST.replace("        x = self.norm1(x + sa(x))\n        x = self.norm2(x + ca(x))\n",
                     "        x = self.norm2(x + ca(x))\n        x = self.norm1(x + sa(x))\n")),
        ("DecoderLayer_post_norm", "DecoderLayer_pre_norm"), "cross-attention comes before the self-attention"),
    Mistake("one attention module for self- and cross-attention", "DecoderLayer", decoder().replace(
        "self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)", "self.cross_attn = self.self_attn"),
        ("DecoderLayer_structure", "DecoderLayer_post_norm", "DecoderLayer_pre_norm", "DecoderLayer_masks"),
        "are the same module"),
    Mistake("DecoderLayer built on nn.TransformerDecoderLayer", "DecoderLayer", '''
class DecoderLayer(nn.TransformerDecoderLayer):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, batch_first=True, norm_first=norm_first)
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        return super().forward(x, memory, tgt_mask=None if tgt_mask is None else ~tgt_mask)
''', ("DecoderLayer_structure", "DecoderLayer_post_norm", "DecoderLayer_pre_norm", "DecoderLayer_masks"),
        "not allowed"),
    # --- Transformer -------------------------------------------------------------
    Mistake("embeddings not scaled by sqrt(d_model)", "Transformer", model(replace=[
        (" * math.sqrt(self.d_model)))\n        for layer in self.encoder_layers", "))\n        for layer in self.encoder_layers"),
        (" * math.sqrt(self.d_model)))\n        for layer in self.decoder_layers", "))\n        for layer in self.decoder_layers")]),
        ("Transformer_reference",), "not multiplied by sqrt(d_model)"),
    Mistake("embeddings left at PyTorch's N(0, 1) initialization", "Transformer", model(replace=[
        ("        nn.init.normal_(self.src_embed.weight, std=d_model ** -0.5)\n"
         "        nn.init.normal_(self.tgt_embed.weight, std=d_model ** -0.5)\n", "")]),
        ("Transformer_structure",), "initialize both embeddings"),
    Mistake("learned positions instead of sinusoidal ones", "Transformer", model(replace=[
        ("self.positions = SinusoidalPositions(max_len, d_model)",
         "self.positions = nn.Parameter(torch.zeros(max_len, d_model))"),
        ("self.dropout(self.positions(self.src_embed(src) * math.sqrt(self.d_model)))",
         "self.dropout(self.src_embed(src) * math.sqrt(self.d_model) + self.positions[:src.shape[1]])"),
        ("self.dropout(self.positions(self.tgt_embed(tgt) * math.sqrt(self.d_model)))",
         "self.dropout(self.tgt_embed(tgt) * math.sqrt(self.d_model) + self.positions[:tgt.shape[1]])")]),
        ("Transformer_reference", "Transformer_masks"), "parameters the reference does not: positions"),
    Mistake("no causal mask in forward", "Transformer", model(replace=[
        ("causal_mask(tgt_in.shape[1], device=tgt_in.device) & padding_mask(tgt_in, self.pad_id)",
         "padding_mask(tgt_in, self.pad_id)")]),
        ("Transformer_reference", "Transformer_masks"), "does not use a causal mask", elsewhere='Use a causal tgt_mask in forward'),
    Mistake("source mask not passed to the decoder (memory_mask)", "Transformer", model(replace=[
        ("x = layer(x, memory, tgt_mask, src_mask)", "x = layer(x, memory, tgt_mask)")]),
        ("Transformer_reference", "Transformer_masks"), "cross-attention ignores source padding", elsewhere='Mask the source padding'),
    Mistake("pad id 0 hard-coded", "Transformer", model(replace=[
        ("src_mask = padding_mask(src, self.pad_id)", "src_mask = padding_mask(src, 0)"),
        ("& padding_mask(tgt_in, self.pad_id)", "& padding_mask(tgt_in, 0)")]),
        ("Transformer_reference", "Transformer_masks"), "built with pad id 0", elsewhere='is pad_id use'),
    Mistake("the same layer repeated n_layers times", "Transformer", model(replace=[
        ("nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))",
         "nn.ModuleList([DecoderLayer(d_model, n_heads, d_ff, dropout)] * n_layers)")]),
        ("Transformer_structure", "Transformer_reference", "Transformer_masks"), "holds the same layer"),
    Mistake("decode returns the decoder vectors, not logits", "Transformer", model(replace=[
        ("        return self.output(x)\n", "        return x\n"),
        ("return self.decode(tgt_in, self.encode(src, src_mask), src_mask, tgt_mask)",
         "return self.output(self.decode(tgt_in, self.encode(src, src_mask), src_mask, tgt_mask))")]),
        ("Transformer_reference",), "returns the decoder's vectors"),
    Mistake("no positions on the target side", "Transformer", model(replace=[
        ("x = self.dropout(self.positions(self.tgt_embed(tgt) * math.sqrt(self.d_model)))",
         "x = self.dropout(self.tgt_embed(tgt) * math.sqrt(self.d_model))")]),
        ("Transformer_reference",), "target tokens get no position vectors"),
    # --- greedy_decode -------------------------------------------------------------
    Mistake("greedy_decode does not stop when all sentences are done", "greedy_decode", greedy(
        ("        if done.all():\n            break\n", "")),
        ("greedy_decode_matches", "greedy_decode_stops"), "does not stop when every sentence has produced eos", elsewhere='stop as soon as every sentence has produced eos'),
    Mistake("greedy_decode keeps predicting after eos", "greedy_decode", greedy(
        (".argmax(dim=-1).masked_fill(done, model.pad_id)", ".argmax(dim=-1)")),
        ("greedy_decode_matches",), "must continue with model.pad_id"),
    Mistake("greedy_decode uses the logits of the first position", "greedy_decode", greedy(
        ("logits[:, -1]", "logits[:, 0]")),
        ("greedy_decode_matches",), "logits of the first position"),
    Mistake("greedy_decode returns bos too (off by one)", "greedy_decode", greedy(
        ("return ys[:, 1:]", "return ys")),
        ("greedy_decode_matches",), "the output starts with bos"),
    Mistake("greedy_decode stops the batch at the first eos", "greedy_decode", greedy(
        ("if done.all():", "if done.any():")),
        ("greedy_decode_matches", "greedy_decode_stops"), "until every sentence has"),
    Mistake("greedy_decode pads with 0, not model.pad_id", "greedy_decode", greedy(
        ("masked_fill(done, model.pad_id)", "masked_fill(done, 0)"),
        ("padding_mask(src, model.pad_id)", "padding_mask(src, 0)")),
        ("greedy_decode_matches",), "pad id 0 is hard-coded"),
    Mistake("greedy_decode fills finished sentences with eos", "greedy_decode", greedy(
        ("masked_fill(done, model.pad_id)", "masked_fill(done, eos_id)")),
        ("greedy_decode_matches",), "continues with eos itself, not model.pad_id"),
    # decoding without the causal mask changes nothing for the scripted model; with two decoder layers the last
    # position reads layer-1 vectors of earlier positions that saw the future, so the tokens change
    Mistake("greedy_decode calls model.decode without a causal mask", "greedy_decode", greedy(
        ("causal_mask(ys.shape[1], device=src.device)", "None")),
        ("greedy_decode_matches",), "without a causal mask"),
]

ALTERNATIVES = [
    Alternative("DecoderLayer with a sublayer helper and F.dropout", "DecoderLayer", '''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.p, self.norm_first = dropout, norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ff = FeedForward(d_model, d_ff, dropout=dropout)
        self.norm1, self.norm2, self.norm3 = LayerNorm(d_model), LayerNorm(d_model), LayerNorm(d_model)

    def _sublayer(self, x, norm, fn):
        if self.norm_first:
            return x + F.dropout(fn(norm(x)), self.p, self.training)
        return norm(x + F.dropout(fn(x), self.p, self.training))

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        x = self._sublayer(x, self.norm1, lambda y: self.self_attn(y, y, y, mask=tgt_mask)[0])
        x = self._sublayer(x, self.norm2, lambda y: self.cross_attn(query=y, key=memory, value=memory,
                                                                     mask=memory_mask)[0])
        return self._sublayer(x, self.norm3, self.ff)
'''),
    Alternative("Transformer with an embed helper, a mask buffer and masks built by hand", "Transformer", '''
class Transformer(nn.Module):
    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=128, n_heads=4, n_layers=2, d_ff=512,
                 dropout=0.1, max_len=256, pad_id=0):
        super().__init__()
        self.d_model, self.pad_id = d_model, pad_id
        self.src_embed = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model)
        for emb in (self.src_embed, self.tgt_embed):
            nn.init.normal_(emb.weight, mean=0.0, std=1 / math.sqrt(d_model))
        self.positions = SinusoidalPositions(max_len, d_model)
        self.dropout = nn.Dropout(p=dropout)
        self.encoder_layers = nn.ModuleList([EncoderLayer(d_model, n_heads, d_ff, dropout, norm_first=False)
                                             for _ in range(n_layers)])
        self.decoder_layers = nn.ModuleList()
        for _ in range(n_layers):
            self.decoder_layers.append(DecoderLayer(d_model, n_heads, d_ff, dropout))
        self.output = nn.Linear(d_model, tgt_vocab_size)
        self.register_buffer("future", torch.ones(max_len, max_len, dtype=torch.bool).triu(1))   # True = later

    def _embed(self, table, ids):
        return self.dropout(self.positions(table(ids) * self.d_model ** 0.5))

    def encode(self, src, src_mask):
        h = self._embed(self.src_embed, src)
        for enc in self.encoder_layers:
            h = enc(h, src_mask=src_mask)
        return h

    def decode(self, tgt, memory, src_mask, tgt_mask):
        h = self._embed(self.tgt_embed, tgt)
        for dec in self.decoder_layers:
            h = dec(h, memory, tgt_mask=tgt_mask, memory_mask=src_mask)
        return self.output(h)

    def forward(self, src, tgt_in):
        t = tgt_in.shape[1]
        src_mask = (src != self.pad_id)[:, None, :]
        tgt_mask = ~self.future[:t, :t][None] & (tgt_in != self.pad_id)[:, None, :]
        memory = self.encode(src, src_mask)
        return self.decode(tgt_in, memory, src_mask, tgt_mask)
'''),
    # with right padding every padded target position lies in the future of every real one: the causal mask
    # alone gives the same logits at the real positions, the only ones graded
    Alternative("Transformer without the target padding mask (causal mask only)", "Transformer", model(replace=[
        ("causal_mask(tgt_in.shape[1], device=tgt_in.device) & padding_mask(tgt_in, self.pad_id)",
         "causal_mask(tgt_in.shape[1], device=tgt_in.device)")])),
    Alternative("DecoderLayer whose norms are also held in a ModuleList (aliases)", "DecoderLayer", decoder().replace(
        """        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
""", """        self.norms = nn.ModuleList(LayerNorm(d_model) for _ in range(3))
        self.norm1, self.norm2, self.norm3 = self.norms
        self.attentions = [self.self_attn, self.cross_attn]
        self.sa = self.self_attn
""")),
    Alternative("greedy_decode through model(src, ys) with causal & padding masks", "greedy_decode", '''
@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        logits = model(src, ys)
        next_token = logits[:, -1].argmax(dim=-1).masked_fill(done, model.pad_id)
        ys = torch.cat([ys, next_token[:, None]], dim=1)
        done = done | (next_token == eos_id)
        if done.all():
            break
    return ys[:, 1:]
'''),
    Alternative("greedy_decode with a preallocated output and a while loop", "greedy_decode", '''
def greedy_decode(model, src, max_len, bos_id, eos_id):
    with torch.no_grad():
        b = src.size(0)
        src_mask = (src != model.pad_id).unsqueeze(1)
        memory = model.encode(src, src_mask)
        out = torch.full((b, max_len + 1), model.pad_id, dtype=torch.long, device=src.device)
        out[:, 0] = bos_id
        finished = torch.zeros(b, dtype=torch.bool, device=src.device)
        step = 0
        while step < max_len and not bool(finished.all()):
            step += 1
            mask = torch.tril(torch.ones(step, step, dtype=torch.bool, device=src.device))
            logits = model.decode(out[:, :step], memory, src_mask, mask)
            token = torch.where(finished, torch.full_like(finished, model.pad_id, dtype=torch.long),
                                logits[:, -1, :].argmax(-1))
            out[:, step] = token
            finished = finished | token.eq(eos_id)
        return out[:, 1:step + 1]
'''),
]
