"""Seventh held-out set, graded before any change to the judges.

Ports for notebook 08 (the encoder-decoder Transformer), from projects no earlier set used: ParlAI
(parlai/agents/transformer/modules: TransformerDecoderLayer, TransformerGeneratorModel with its encoder and decoder),
Burn (Rust, burn-nn transformer/decoder.rs TransformerDecoderLayer), PaddleNLP (paddlenlp/transformers/
generation_utils.py GenerationMixin.greedy_search) and Hugging Face transformers (generation/utils.py
GenerationMixin._sample, greedy branch, with MaxLengthCriteria and EosTokenCriteria).
"""
from tests.corpus import Port

ASSIGNMENT = "08_encoder_decoder"

PORTS = [
    Port(
        name="parlai_decoder_layer",
        style="facebookresearch/ParlAI parlai/agents/transformer/modules/decoder.py, TransformerDecoderLayer.forward "
              "and BaseTransformerDecoderLayer._create_selfattn_mask (the layer builds its own causal mask "
              "torch.tril(x.new(time, time).fill_(1)) and has no target-mask argument; variant 'aiayn' / "
              "'prelayernorm'; one self.dropout; self_attention/encoder_attention/ffn renamed "
              "self_attn/cross_attn/ff); the float mask turned into booleans for the course's attention",
        cell="DecoderLayer",
        code=r'''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.dim = d_model
        self.ffn_dim = d_ff
        self.variant = 'prelayernorm' if norm_first else 'aiayn'
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)     # self_attention
        self.norm1 = LayerNorm(d_model)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)    # encoder_attention
        self.norm2 = LayerNorm(d_model)
        self.ff = FeedForward(d_model, d_ff, dropout)                      # ffn
        self.norm3 = LayerNorm(d_model)
        self.dropout = nn.Dropout(p=dropout)

    def _create_selfattn_mask(self, x):
        # figure out how many timestamps we need
        bsz = x.size(0)
        time = x.size(1)
        # make sure that we don't look into the future
        mask = torch.tril(x.new(time, time).fill_(1))
        # broadcast across batch
        mask = mask.unsqueeze(0).expand(bsz, -1, -1)
        return mask

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        decoder_mask = self._create_selfattn_mask(x) != 0     # ParlAI: True means we are allowing attention

        # first self attn
        residual = x
        if self.variant == 'prelayernorm':
            x = self.norm1(x)
        # don't peak into the future!
        x = self.self_attn(x, x, x, decoder_mask)[0]
        x = self.dropout(x)  # --dropout
        x = x + residual
        if self.variant == 'aiayn' or self.variant == 'xlm' or self.variant == 'bart':
            x = self.norm1(x)

        residual = x
        # encoder_attn_layer_norm norm 2
        if self.variant == 'prelayernorm':
            x = self.norm2(x)
        x = self.cross_attn(x, memory, memory, memory_mask)[0]
        x = self.dropout(x)  # --dropout
        x = residual + x
        if self.variant == 'aiayn' or self.variant == 'xlm' or self.variant == 'bart':
            x = self.norm2(x)

        # finally the ffn
        residual = x
        if self.variant == 'prelayernorm':
            x = self.norm3(x)
        x = self.ff(x)
        x = self.dropout(x)  # --dropout
        x = residual + x
        if self.variant == 'aiayn' or self.variant == 'xlm' or self.variant == 'bart':
            x = self.norm3(x)
        return x
''',
        breach="ParlAI's decoder layer always applies its own causal mask and ignores tgt_mask: called without "
               "masks it is still causal (unlike nn.TransformerDecoderLayer), and the target padding part of a "
               "given tgt_mask is dropped",
        names=("tgt_mask", "mask", "causal", "ignored", "without masks", "padding"),
    ),
    Port(
        name="burn_transformer_decoder_layer",
        style="tracel-ai/burn crates/burn-nn/src/modules/transformer/decoder.rs, TransformerDecoderLayer.forward "
              "(residual_path / x bookkeeping; with norm_first the self-attention reads norm_3, the "
              "cross-attention norm_1 and the feed-forward norm_2; without it norm_1, norm_2, norm_3 follow the "
              "three sublayers; one dropout module); norm_1..3 named norm1..3, pwff as the course's FeedForward",
        cell="DecoderLayer",
        code=r'''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)                      # pwff
        self.norm1 = LayerNorm(d_model)                                    # norm_1
        self.norm2 = LayerNorm(d_model)                                    # norm_2
        self.norm3 = LayerNorm(d_model)                                    # norm_3
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        # Self attention residual path.
        residual_path = x
        # Normalize.
        if self.norm_first:
            residual_path = self.norm3(residual_path)
        # Self attention.
        residual_path = self.self_attn(residual_path, residual_path, residual_path, tgt_mask)[0]
        residual_path = self.dropout(residual_path)
        x = x + residual_path

        # Cross attention residual path.
        # Normalize.
        if self.norm_first:
            residual_path = self.norm1(x)
        else:
            x = self.norm1(x)
            residual_path = x
        # Cross attention.
        residual_path = self.cross_attn(residual_path, memory, memory, memory_mask)[0]
        residual_path = self.dropout(residual_path)
        x = x + residual_path

        # Feed forward residual path.
        # Normalize.
        if self.norm_first:
            residual_path = self.norm2(x)
        else:
            x = self.norm2(x)
            residual_path = x
        residual_path = self.ff(residual_path)
        residual_path = self.dropout(residual_path)
        x = x + residual_path

        # Main path.
        # Normalize.
        if not self.norm_first:
            x = self.norm3(x)
        return x
''',
        breach="with norm_first=True Burn normalizes the self-attention's input with norm_3, the cross-attention's "
               "with norm_1 and the feed-forward's with norm_2: the LayerNorms are rotated against the sublayers "
               "(norm1 belongs to the self-attention), so the pre-norm layer differs from "
               "nn.TransformerDecoderLayer with the same weights (post-norm is right)",
        names=("norm1", "norm3", "order", "pre-norm", "layernorm", "norm_first", "which"),
    ),
    Port(
        name="fsmt_decoder_layer",
        style="huggingface/transformers src/transformers/models/fsmt/modeling_fsmt.py, DecoderLayer.forward "
              "(fairseq's post-norm layer: self_attn, dropout, residual, self_attn_layer_norm; encoder_attn, "
              "dropout, residual, encoder_attn_layer_norm; fc1/activation/activation_dropout/fc2, dropout, "
              "residual, final_layer_norm), functional dropout as in FSMT; the course's MultiHeadAttention, "
              "FeedForward and LayerNorm for its Attention, fc1/fc2 and LayerNorms (named norm1..norm3), the "
              "course's masks passed on for FSMT's key_padding_mask/causal_mask",
        cell="DecoderLayer",
        code=r'''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.embed_dim = d_model
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.dropout = dropout
        self.norm1 = LayerNorm(self.embed_dim)                        # self_attn_layer_norm
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)   # encoder_attn
        self.norm2 = LayerNorm(self.embed_dim)                        # encoder_attn_layer_norm
        self.ff = FeedForward(d_model, d_ff, dropout)                 # fc1, activation_fn, activation_dropout, fc2
        self.norm3 = LayerNorm(self.embed_dim)                        # final_layer_norm

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        residual = x
        # Self Attention
        x = self.self_attn(x, x, x, tgt_mask)[0]
        x = nn.functional.dropout(x, p=self.dropout, training=self.training)
        x = residual + x
        x = self.norm1(x)

        # Cross attention
        residual = x
        x = self.cross_attn(x, memory, memory, memory_mask)[0]
        x = nn.functional.dropout(x, p=self.dropout, training=self.training)
        x = residual + x
        x = self.norm2(x)

        # Fully Connected
        residual = x
        x = self.ff(x)
        x = nn.functional.dropout(x, p=self.dropout, training=self.training)
        x = residual + x
        x = self.norm3(x)
        return x
''',
        breach="FSMT's decoder layer (fairseq's normalize_before=False) is post-norm only: norm_first=True is "
               "ignored, so the pre-norm layer x + Drop(Sub(LN(x))) is never built",
        names=("norm_first", "pre-norm", "post-norm", "ignored", "prenorm"),
    ),
    Port(
        name="parlai_generator_model",
        style="facebookresearch/ParlAI parlai/agents/transformer/modules/generator.py TransformerGeneratorModel "
              "(create_embeddings: std embedding_size ** -0.5, pad row zero; output = F.linear(tensor, "
              "self.embeddings.weight): tied, no bias), encoder.py forward_embedding/forward (embeddings * "
              "sqrt(dim), + positions, dropout, tensor *= mask) and decoder.py TransformerDecoder.forward; one "
              "table per language because the exercise has two vocabulary sizes, the course's "
              "SinusoidalPositions and layers, the output tied to tgt_embed; the forced -inf on the start token "
              "left out (the constructor gets no bos id)",
        cell="Transformer",
        code=r'''
class Transformer(nn.Module):
    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=128, n_heads=4, n_layers=2, d_ff=512,
                 dropout=0.1, max_len=256, pad_id=0):
        super().__init__()
        self.pad_id = pad_id
        self.d_model = d_model
        self.dim = d_model
        self.embeddings_scale = True

        def create_embeddings(vocab_size, embedding_size, padding_idx):
            """Create and initialize word embeddings."""
            e = nn.Embedding(vocab_size, embedding_size, padding_idx)
            nn.init.normal_(e.weight, mean=0, std=embedding_size ** -0.5)
            nn.init.constant_(e.weight[padding_idx], 0)
            return e

        self.src_embed = create_embeddings(src_vocab_size, d_model, pad_id)
        self.tgt_embed = create_embeddings(tgt_vocab_size, d_model, pad_id)
        self.positions = SinusoidalPositions(max_len, d_model)
        self.dropout = nn.Dropout(p=dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        # project back to vocabulary: output = F.linear(tensor, self.embeddings.weight)
        self.output = nn.Linear(d_model, tgt_vocab_size, bias=False)
        self.output.weight = self.tgt_embed.weight

    def encode(self, src, src_mask):
        mask = src != self.pad_id
        tensor = self.src_embed(src)
        if self.embeddings_scale:
            tensor = tensor * math.sqrt(self.dim)
        tensor = self.positions(tensor)
        # --dropout on the embeddings
        tensor = self.dropout(tensor)
        tensor = tensor * mask.unsqueeze(-1).type_as(tensor)
        for layer in self.encoder_layers:
            tensor = layer(tensor, src_mask)
        return tensor

    def decode(self, tgt, memory, src_mask, tgt_mask):
        tensor = self.tgt_embed(tgt)
        if self.embeddings_scale:
            tensor = tensor * math.sqrt(self.dim)
        tensor = self.positions(tensor)
        tensor = self.dropout(tensor)  # --dropout
        for layer in self.decoder_layers:
            tensor = layer(tensor, memory, tgt_mask, src_mask)
        return self.output(tensor)

    def forward(self, src, tgt_in):
        src_mask = padding_mask(src, self.pad_id)
        tgt_mask = causal_mask(tgt_in.shape[1], device=tgt_in.device) & padding_mask(tgt_in, self.pad_id)
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask, tgt_mask)
''',
        breach="ParlAI ties the output projection to the target embedding and gives it no bias "
               "(F.linear(tensor, embeddings.weight)): there is no separate nn.Linear(d_model, tgt_vocab_size) "
               "with a bias, so the reference model's output weights cannot be loaded and the logits differ",
        names=("output", "bias", "tied", "tie", "share", "embedding"),
    ),
    Port(
        name="paddlenlp_greedy_search",
        style="PaddlePaddle/PaddleNLP paddlenlp/transformers/generation_utils.py, GenerationMixin.greedy_search "
              "(while cur_len < max_length; log(softmax(logits[:, -1])), argmax; paddle.where(unfinished_flag, "
              "next_tokens, pad); unfinished_flag &= next_tokens != eos; break when none is unfinished; return "
              "input_ids[:, origin_len:]) with generate()'s max_length += input_ids.shape[-1]; paddle ops as torch "
              "ops, the encoder output computed once as prepare_inputs_for_generation does",
        cell="greedy_decode",
        code=r'''
@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    src_mask = padding_mask(src, model.pad_id)
    encoder_output = model.encode(src, src_mask)
    pad_token_id, eos_token_id = model.pad_id, eos_id
    input_ids = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)  # decoder_start_token_id
    max_length = max_len + input_ids.shape[-1]          # generate(): max_length += input_ids.shape[-1]

    batch_size, cur_len = input_ids.shape
    origin_len = cur_len
    unfinished_flag = torch.full([batch_size, 1], True, dtype=torch.bool, device=src.device)
    while cur_len < max_length:
        # prepare model inputs & get model output
        logits = model.decode(input_ids, encoder_output, src_mask, causal_mask(input_ids.shape[1], device=src.device))
        # [batch_size, vocab_size]
        logits = logits[:, -1, :]
        # greedy
        probs = torch.softmax(logits, dim=-1)
        probs = torch.log(probs)
        next_tokens = torch.argmax(probs, dim=-1).unsqueeze(-1)

        if eos_token_id is not None:
            next_tokens = torch.where(unfinished_flag, next_tokens, torch.full_like(next_tokens, pad_token_id))

        cur_len += 1
        input_ids = torch.cat([input_ids, next_tokens], dim=1)

        if eos_token_id is not None:
            unfinished_flag = torch.logical_and(unfinished_flag, next_tokens != eos_token_id)

        # Stop when there is a </s> in all sentences
        if not torch.any(unfinished_flag):
            break
    return input_ids[:, origin_len:]
''',
    ),
    Port(
        name="hf_generate_greedy",
        style="huggingface/transformers src/transformers/generation/utils.py, GenerationMixin._sample with "
              "do_sample=False (argmax of next_token_logits, next_tokens * unfinished_sequences + pad_token_id * "
              "(1 - unfinished_sequences), unfinished_sequences & ~stopping_criteria) and the stopping criteria of "
              "generation/stopping_criteria.py (MaxLengthCriteria: input_ids.shape[-1] >= max_length, which counts "
              "the decoder start token; EosTokenCriteria); returns input_ids as generate() does",
        cell="greedy_decode",
        code=r'''
@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    src_mask = padding_mask(src, model.pad_id)
    encoder_outputs = model.encode(src, src_mask)
    pad_token_id = model.pad_id
    max_length = max_len                                 # generation_config.max_length
    # _prepare_decoder_input_ids_for_generation: the decoder starts from decoder_start_token_id
    input_ids = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    batch_size = input_ids.shape[0]
    unfinished_sequences = torch.ones(batch_size, dtype=torch.long, device=input_ids.device)
    this_peer_finished = False
    while not this_peer_finished:
        logits = model.decode(input_ids, encoder_outputs, src_mask,
                              causal_mask(input_ids.shape[1], device=input_ids.device))
        next_token_logits = logits[:, -1, :].clone().float()
        next_tokens = torch.argmax(next_token_logits, dim=-1)
        # finished sentences should have their next token be a padding token
        next_tokens = next_tokens * unfinished_sequences + pad_token_id * (1 - unfinished_sequences)
        # update generated ids, model inputs, and length for next step
        input_ids = torch.cat([input_ids, next_tokens[:, None]], dim=-1)
        # MaxLengthCriteria | EosTokenCriteria
        is_done = torch.full((batch_size,), input_ids.shape[-1] >= max_length, dtype=torch.bool,
                             device=input_ids.device)
        is_done = is_done | (input_ids[:, -1] == eos_id)
        unfinished_sequences = unfinished_sequences & ~is_done
        this_peer_finished = unfinished_sequences.max() == 0
    return input_ids
''',
        breach="Hugging Face's generate returns the whole decoder sequence, starting with the decoder start token "
               "(bos), and its max_length counts that token: the output begins with bos and holds at most "
               "max_len - 1 generated tokens",
        names=("bos", "start token", "leading", "first token", "max_len", "length"),
    ),
]
