"""Held-out set 3 (round 3), notebook 08: DecoderLayer, Transformer, greedy_decode."""
from . import Port

ASSIGNMENT = "08_encoder_decoder"

PORTS = [
    # --- DecoderLayer --------------------------------------------------------------------------------------
    Port("Sockeye TransformerDecoderBlock with TransformerProcessBlock sequences",
         "awslabs/sockeye sockeye/transformer.py, TransformerDecoderBlock.forward: target_autoregr = "
         "autoregr_layer(pre_autoregr_layer(target), mask=target_mask); target = post_autoregr_layer("
         "target_autoregr, target); target_enc_att = enc_attention(queries=pre_enc_attention(target), "
         "key_values=source, mask=source_mask); target = post_enc_attention(target_enc_att, target); target_ff = "
         "ff(pre_ff(target)); target = post_ff(target_ff, target); process sequences 'n'/'dr' (pre-norm) or "
         "''/'drn' (post-norm), 'r' residual, 'n' layer norm, 'd' dropout (the course's modules and masks)",
         "DecoderLayer", '''
import torch
from torch import nn


class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.preprocess_sequence = "n" if norm_first else ""
        self.postprocess_sequence = "dr" if norm_first else "drn"
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    @staticmethod
    def _process(sequence, layer_norm, drop, data, prev=None):
        if not sequence:
            return data
        for step in sequence:
            if step == "r":
                data = data + prev
            elif step == "n":
                data = layer_norm(data)
            elif step == "d":
                data = drop(data)
            else:
                raise ValueError("Unknown step in sequence: %s" % step)
        return data

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        pre, post = self.preprocess_sequence, self.postprocess_sequence
        target = x
        inputs = self._process(pre, self.norm1, self.dropout1, target)
        target_autoregr = self.self_attn(inputs, inputs, inputs, tgt_mask)[0]
        target = self._process(post, self.norm1, self.dropout1, target_autoregr, target)
        # encoder attention
        queries = self._process(pre, self.norm2, self.dropout2, target)
        target_enc_att = self.cross_attn(queries, memory, memory, memory_mask)[0]
        target = self._process(post, self.norm2, self.dropout2, target_enc_att, target)
        # feed-forward
        target_ff = self.ff(self._process(pre, self.norm3, self.dropout3, target))
        target = self._process(post, self.norm3, self.dropout3, target_ff, target)
        return target
'''),

    Port("hyunwoongko/transformer DecoderLayer (post-norm only: add and norm after every sublayer)",
         "hyunwoongko/transformer models/blocks/decoder_layer.py, DecoderLayer.forward(dec, enc, trg_mask, "
         "src_mask): x = self_attention(q=dec, k=dec, v=dec, mask=trg_mask); x = norm1(dropout1(x) + _x); x = "
         "enc_dec_attention(q=x, k=enc, v=enc, mask=src_mask); x = norm2(dropout2(x) + _x); x = ffn(x); x = "
         "norm3(dropout3(x) + _x) (the layer has no pre-norm variant; its modules named as the course asks)",
         "DecoderLayer", '''
import torch
from torch import nn


class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.norm1 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.norm2 = LayerNorm(d_model)
        self.dropout2 = nn.Dropout(dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm3 = LayerNorm(d_model)
        self.dropout3 = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        dec, enc, trg_mask, src_mask = x, memory, tgt_mask, memory_mask
        # 1. compute self attention
        _x = dec
        x = self.self_attn(dec, dec, dec, trg_mask)[0]
        # 2. add and norm
        x = self.dropout1(x)
        x = self.norm1(x + _x)
        if enc is not None:
            # 3. compute encoder - decoder attention
            _x = x
            x = self.cross_attn(x, enc, enc, src_mask)[0]
            # 4. add and norm
            x = self.dropout2(x)
            x = self.norm2(x + _x)
        # 5. positionwise feed forward network
        _x = x
        x = self.ff(x)
        # 6. add and norm
        x = self.dropout3(x)
        x = self.norm3(x + _x)
        return x
''', breach="always post-norm: the repository's DecoderLayer has no pre-norm arrangement, so norm_first=True is "
            "ignored",
         names=("pre-norm", "norm_first", "prenorm")),

    # --- Transformer ---------------------------------------------------------------------------------------
    Port("Hugging Face Marian (embed_scale = sqrt(d_model); _init_weights: normal_(std=config.init_std = 0.02))",
         "huggingface/transformers src/transformers/models/marian/modeling_marian.py: MarianEncoder/Decoder: "
         "embed_scale = math.sqrt(config.d_model) if config.scale_embedding; nn.Embedding(vocab_size, d_model, "
         "padding_idx); inputs_embeds = embed_tokens(input_ids) * embed_scale, plus the sinusoidal positions, "
         "dropout; MarianPreTrainedModel._init_weights: module.weight.data.normal_(mean=0.0, std=std) for Linear "
         "and Embedding (std = config.init_std = 0.02), biases zeroed, padding_idx row zeroed (separate source and "
         "target tables and an output layer with bias, the attributes the course asks for; the course's layers "
         "and masks)",
         "Transformer", '''
import math
import torch
from torch import nn


class Transformer(nn.Module):
    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=128, n_heads=4, n_layers=2, d_ff=512,
                 dropout=0.1, max_len=256, pad_id=0, init_std=0.02):
        super().__init__()
        self.d_model = d_model
        self.pad_id = pad_id
        self.init_std = init_std
        self.embed_scale = math.sqrt(d_model)
        self.src_embed = nn.Embedding(src_vocab_size, d_model, padding_idx=pad_id)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model, padding_idx=pad_id)
        self.positions = SinusoidalPositions(max_len, d_model)
        self.dropout = nn.Dropout(dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.output = nn.Linear(d_model, tgt_vocab_size)
        self.apply(self._init_weights)

    def _init_weights(self, module):
        std = self.init_std
        if isinstance(module, nn.Linear):
            module.weight.data.normal_(mean=0.0, std=std)
            if module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.Embedding):
            module.weight.data.normal_(mean=0.0, std=std)
            if module.padding_idx is not None:
                module.weight.data[module.padding_idx].zero_()

    def encode(self, src, src_mask):
        inputs_embeds = self.src_embed(src) * self.embed_scale
        hidden_states = self.dropout(self.positions(inputs_embeds))
        for layer in self.encoder_layers:
            hidden_states = layer(hidden_states, src_mask)
        return hidden_states

    def decode(self, tgt, memory, src_mask, tgt_mask):
        inputs_embeds = self.tgt_embed(tgt) * self.embed_scale
        hidden_states = self.dropout(self.positions(inputs_embeds))
        for layer in self.decoder_layers:
            hidden_states = layer(hidden_states, memory, tgt_mask, src_mask)
        return self.output(hidden_states)

    def forward(self, src, tgt_in):
        src_mask = padding_mask(src, self.pad_id)
        tgt_mask = causal_mask(tgt_in.shape[1], device=tgt_in.device) & padding_mask(tgt_in, self.pad_id)
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask, tgt_mask)
''', breach="both embedding tables are initialised with Marian's init_std = 0.02, not the standard deviation "
            "1/sqrt(d_model) the course asks for (and the padding row is zeroed)",
         names=("std", "standard deviation", "init", "0.02", "1/sqrt", "d_model ** -0.5")),

    # --- greedy_decode -------------------------------------------------------------------------------------
    Port("NeMo GreedySequenceGenerator (pad_profile: after <eos> every token becomes <pad>)",
         "NVIDIA/NeMo nemo/collections/asr/modules/transformer/transformer_generators.py, "
         "GreedySequenceGenerator._forward: for i in range(max_generation_length): log_probs = one step; "
         "next_tokens = torch.argmax(log_probs[:, -1], dim=-1, keepdim=True); next_tokens = self.pad * pad_profile "
         "+ next_tokens * (1 - pad_profile); pad_profile = torch.max(pad_profile, (next_tokens == "
         "self.eos).long()); tgt = torch.cat((tgt, next_tokens), dim=-1); if pad_profile.sum() == batch_size: "
         "break; return tgt (each step decodes the whole prefix with the course's decode instead of NeMo's "
         "decoder_mems_list; the leading bos dropped as the course asks)",
         "greedy_decode", '''
import torch


@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    src_mask = padding_mask(src, model.pad_id)
    encoder_hidden_states = model.encode(src, src_mask)
    batch_size = src.shape[0]
    pad, eos = model.pad_id, eos_id
    tgt = torch.full((batch_size, 1), bos_id, dtype=torch.long, device=src.device)
    # pad_profile tracks sequences ending with <eos> token to replace
    # everything after <eos> with <pad> token
    pad_profile = torch.zeros(batch_size, 1).long().to(src.device)
    for i in range(max_len):
        logits = model.decode(tgt, encoder_hidden_states, src_mask, causal_mask(tgt.shape[1], device=src.device))
        log_probs = torch.log_softmax(logits, dim=-1)
        next_tokens = torch.argmax(log_probs[:, -1], dim=-1, keepdim=True)
        next_tokens = pad * pad_profile + next_tokens * (1 - pad_profile)
        pad_profile = torch.max(pad_profile, (next_tokens == eos).long())
        tgt = torch.cat((tgt, next_tokens), dim=-1)
        # abort generation if all sequences end with <eos>
        if pad_profile.sum() == batch_size:
            break
    return tgt[:, 1:]
'''),

    Port("TransformerLens HookedTransformer.generate (finished rows get eos_token_for_padding = the eos id)",
         "TransformerLensOrg/TransformerLens transformer_lens/HookedTransformer.py, generate(stop_at_eos=True): "
         "eos_token_for_padding = eos_token_id; each step sampled_tokens = final_logits.argmax(-1); "
         "sampled_tokens_list.append(sampled_tokens.unsqueeze(1)); sampled_tokens[finished_sequences] = "
         "eos_token_for_padding; finished_sequences.logical_or_(torch.isin(sampled_tokens, stop_tokens)); if "
         "finished_sequences.all(): break; the output is the sampled tokens (the course's encode/decode for the "
         "forward pass)",
         "greedy_decode", '''
import torch


@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    batch_size = src.shape[0]
    stop_tokens = [eos_id]
    eos_token_for_padding = eos_id
    # An array to track which sequences in the batch have finished.
    finished_sequences = torch.zeros(batch_size, dtype=torch.bool, device=src.device)
    tokens = torch.full((batch_size, 1), bos_id, dtype=torch.long, device=src.device)
    sampled_tokens_list = []
    for index in range(max_len):
        logits = model.decode(tokens, memory, src_mask, causal_mask(tokens.shape[1], device=src.device))
        final_logits = logits[:, -1, :]
        sampled_tokens = final_logits.argmax(-1)
        sampled_tokens_list.append(sampled_tokens.unsqueeze(1))
        # For all unfinished sequences, add on the next token. If a sequence was
        # finished, throw away the generated token and add eos_token_for_padding instead.
        sampled_tokens[finished_sequences] = eos_token_for_padding
        finished_sequences.logical_or_(torch.isin(sampled_tokens, torch.tensor(stop_tokens, device=src.device)))
        tokens = torch.cat([tokens, sampled_tokens.unsqueeze(-1)], dim=-1)
        if finished_sequences.all():
            break
    return torch.cat(sampled_tokens_list, dim=1)
''', breach="after a row's eos it keeps writing the eos id (TransformerLens pads finished rows with "
            "eos_token_for_padding), not model.pad_id",
         names=("pad_id", "pad id", "padding", "after eos", "pad")),
]
