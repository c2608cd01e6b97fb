"""Ninth held-out set, notebook 08: ports of DETR's decoder layer, a from-scratch Transformer's decoder block, and
the greedy searches of XLM and SpeechBrain, each read at its source."""
from tests.corpus import Port

ASSIGNMENT = "08_encoder_decoder"

PORTS = [
    Port("detr_decoder_layer", "facebookresearch/detr models/transformer.py TransformerDecoderLayer (forward_post: "
         "tgt = norm1(tgt + dropout1(self_attn(q, k, tgt)[0])); tgt = norm2(tgt + dropout2(multihead_attn("
         "with_pos_embed(tgt, query_pos), with_pos_embed(memory, pos), memory)[0])); tgt = norm3(tgt + dropout3("
         "linear2(dropout(activation(linear1(tgt)))))); forward_pre normalizes tgt only, the memory as it comes; "
         "multihead_attn renamed cross_attn, the feed-forward pair is the course's FeedForward, tgt_mask and "
         "memory_mask with True = may attend stand for PyTorch's masks; pos and query_pos stay None)",
         "DecoderLayer", r'''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        # Implementation of Feedforward model
        self.ff = FeedForward(d_model, d_ff, dropout)

        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

        self.normalize_before = norm_first

    def with_pos_embed(self, tensor, pos=None):
        return tensor if pos is None else tensor + pos

    def forward_post(self, tgt, memory, tgt_mask=None, memory_mask=None, pos=None, query_pos=None):
        q = k = self.with_pos_embed(tgt, query_pos)
        tgt2 = self.self_attn(q, k, tgt, tgt_mask)[0]
        tgt = tgt + self.dropout1(tgt2)
        tgt = self.norm1(tgt)
        tgt2 = self.cross_attn(self.with_pos_embed(tgt, query_pos),
                               self.with_pos_embed(memory, pos),
                               memory, memory_mask)[0]
        tgt = tgt + self.dropout2(tgt2)
        tgt = self.norm2(tgt)
        tgt2 = self.ff(tgt)
        tgt = tgt + self.dropout3(tgt2)
        tgt = self.norm3(tgt)
        return tgt

    def forward_pre(self, tgt, memory, tgt_mask=None, memory_mask=None, pos=None, query_pos=None):
        tgt2 = self.norm1(tgt)
        q = k = self.with_pos_embed(tgt2, query_pos)
        tgt2 = self.self_attn(q, k, tgt2, tgt_mask)[0]
        tgt = tgt + self.dropout1(tgt2)
        tgt2 = self.norm2(tgt)
        tgt2 = self.cross_attn(self.with_pos_embed(tgt2, query_pos),
                               self.with_pos_embed(memory, pos),
                               memory, memory_mask)[0]
        tgt = tgt + self.dropout2(tgt2)
        tgt2 = self.norm3(tgt)
        tgt2 = self.ff(tgt2)
        tgt = tgt + self.dropout3(tgt2)
        return tgt

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.normalize_before:
            return self.forward_pre(x, memory, tgt_mask, memory_mask)
        return self.forward_post(x, memory, tgt_mask, memory_mask)
'''),
    Port("aladdin_decoder_block", "aladdinpersson/Machine-Learning-Collection ML/Pytorch/more_advanced/"
         "transformer_from_scratch/transformer_from_scratch.py DecoderBlock and TransformerBlock (query = dropout("
         "norm(attention(x, x, x, trg_mask) + x)); then TransformerBlock(value=enc_out, key=enc_out, query): x = "
         "dropout(norm1(attention + query)); out = dropout(norm2(feed_forward(x) + x)); its SelfAttention and "
         "feed_forward = Sequential(Linear, ReLU, Linear) have no dropout of their own: the course's "
         "MultiHeadAttention and FeedForward without dropout; DecoderBlock.norm, TransformerBlock.norm1 and .norm2 are "
         "norm1, norm2, norm3; there is no pre-norm variant)", "DecoderLayer", r'''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        # DecoderBlock
        self.norm1 = LayerNorm(d_model)
        self.self_attn = MultiHeadAttention(d_model, n_heads)
        # TransformerBlock
        self.cross_attn = MultiHeadAttention(d_model, n_heads)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.ff = FeedForward(d_model, d_ff)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        # DecoderBlock.forward(x, value, key, src_mask, trg_mask)
        attention = self.self_attn(x, x, x, tgt_mask)[0]
        query = self.dropout(self.norm1(attention + x))
        # TransformerBlock.forward(value, key, query, mask)
        attention = self.cross_attn(query, memory, memory, memory_mask)[0]
        # Add skip connection, run through normalization and finally dropout
        x = self.dropout(self.norm2(attention + query))
        forward = self.ff(x)
        out = self.dropout(self.norm3(forward + x))
        return out
''', breach="post-norm only, norm_first is ignored; and the dropout comes after each LayerNorm, "
            "Drop(LN(x + Sub(x))), instead of on the sublayer output before the residual addition",
         names=("norm_first", "pre-norm", "dropout", "after the layernorm")),
    Port("xlm_generate", "facebookresearch/XLM xlm/model/transformer.py TransformerModel.generate(src_enc, src_len, "
         "tgt_lang_id, max_len) with sample_temperature=None (generated = (max_len, bs) filled with pad, "
         "generated[0] the start token; while cur_len < max_len: topk(scores, 1); generated[cur_len] = next_words * "
         "unfinished_sents + pad * (1 - unfinished_sents); unfinished_sents.mul_(next_words.ne(eos)); break when none "
         "is left; if cur_len == max_len: generated[-1].masked_fill_(unfinished_sents, eos); its cached 'fwd' call is "
         "model.decode on the prefix with a causal mask, its start token (XLM uses <EOS> for <BOS>) is bos_id, "
         "and the leading start token is cut from the result)", "greedy_decode", r'''
@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    src_mask = padding_mask(src, model.pad_id)
    src_enc = model.encode(src, src_mask)
    bs = src.size(0)

    # generated sentences
    generated = src.new(max_len, bs)  # upcoming output
    generated.fill_(model.pad_id)     # fill upcoming ouput with <PAD>
    generated[0].fill_(bos_id)        # XLM: "we use <EOS> for <BOS> everywhere"

    # current position / max lengths / length of generated sentences / unfinished sentences
    cur_len = 1
    gen_len = src.new(bs).fill_(1)
    unfinished_sents = src.new(bs).fill_(1)

    while cur_len < max_len:
        # compute word scores
        tgt = generated[:cur_len].transpose(0, 1)                          # XLM is length-first
        tensor = model.decode(tgt, src_enc, src_mask, causal_mask(cur_len, device=src.device))
        scores = tensor[:, -1, :]                                          # (bs, n_words)

        # select next words: greedy
        next_words = torch.topk(scores, 1)[1].squeeze(1)

        # update generations / lengths / finished sentences / current length
        generated[cur_len] = next_words * unfinished_sents + model.pad_id * (1 - unfinished_sents)
        gen_len.add_(unfinished_sents)
        unfinished_sents.mul_(next_words.ne(eos_id).long())
        cur_len = cur_len + 1

        # stop when there is a </s> in each sentence, or if we exceed the maximul length
        if unfinished_sents.max() == 0:
            break

    # add <EOS> to unfinished sentences
    if cur_len == max_len:
        generated[-1].masked_fill_(unfinished_sents.bool(), eos_id)

    return generated[1:cur_len].transpose(0, 1)
''', breach="max_len counts the start token, so at most max_len - 1 tokens are generated, and a sentence still "
            "unfinished at the end gets its last token overwritten with eos",
         names=("max_len", "eos", "one token", "overwrit", "last token")),
    Port("speechbrain_greedy", "speechbrain/speechbrain speechbrain/decoders/seq2seq.py S2SGreedySearcher.forward with "
         "S2STransformerGreedySearcher.forward_step and decoders/utils.py _update_mem (the bos token first; each step "
         "appends the last tokens to the memory and decodes all of it, logits[:, -1]; argmax at temperature 0; "
         "has_ended |= inp_tokens == eos; log_probs[has_ended] = -inf; inp_tokens[has_ended] = eos; stop when all "
         "have ended; predictions = argmax of the stacked log-probs, eos where the score is -inf; max_len for its "
         "max_decode_ratio * encoder length; the memory, float in _update_mem, is cast to long for nn.Embedding; the "
         "predictions tensor is returned, before its undo_padding into lists)", "greedy_decode", r'''
def _update_mem(inp_tokens, memory):
    if memory is None:
        memory = torch.empty(inp_tokens.size(0), 0, device=inp_tokens.device)
    return torch.cat([memory, inp_tokens.unsqueeze(1)], dim=-1)


@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    src_mask = padding_mask(src, model.pad_id)
    enc_states = model.encode(src, src_mask)
    device = enc_states.device
    batch_size = enc_states.shape[0]

    memory = None  # reset_mem

    # Using bos as the first input
    inp_tokens = enc_states.new_zeros(batch_size).fill_(bos_id).long()

    log_probs_lst = []
    max_decode_steps = max_len

    has_ended = enc_states.new_zeros(batch_size).bool()
    for step in range(0, max_decode_steps):
        # S2STransformerGreedySearcher.forward_step
        memory = _update_mem(inp_tokens, memory)
        pred = model.decode(memory.long(), enc_states, src_mask, causal_mask(memory.shape[1], device=device))
        logits = pred[:, -1, :]

        inp_tokens = logits.argmax(dim=-1)
        log_probs = torch.nn.functional.log_softmax(logits.float(), dim=-1)
        log_probs_lst.append(log_probs)

        has_ended = has_ended | (inp_tokens == eos_id)
        log_probs[has_ended] = -torch.inf
        inp_tokens[has_ended] = eos_id

        if has_ended.all():
            break

    log_probs = torch.stack(log_probs_lst, dim=1)

    scores, predictions = log_probs.max(dim=-1)
    mask = scores == -torch.inf
    scores[mask] = 0
    predictions[mask] = eos_id
    return predictions
''', breach="after a sentence's eos the row goes on with eos (SpeechBrain feeds and predicts eos for finished "
            "hypotheses and cuts them at the first eos later), not with model.pad_id",
         names=("pad", "pad_id", "after eos", "after its eos")),
]
