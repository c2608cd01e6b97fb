"""Eighth held-out set, graded before any change to the judges.

Held-out set 8, notebook 08: ports of the TensorFlow Model Garden (tensorflow/models, official/nlp/modeling:
layers/transformer.py TransformerDecoderBlock, models/seq2seq_transformer.py Seq2SeqTransformer), Informer
(zhouhaoyi/Informer2020) and gordicaleksa/pytorch-original-transformer, each read at its source. The course's
MultiHeadAttention, FeedForward, LayerNorm, layers and masks stand in for each project's own.
"""
from tests.corpus import Port

ASSIGNMENT = "08_encoder_decoder"

PORTS = [
    Port(
        "model_garden_decoder_block",
        "tensorflow/models official/nlp/modeling/layers/transformer.py TransformerDecoderBlock.call (norm_first "
        "and post-norm paths; self_attention, encdec_attention, intermediate/output dense, three dropouts)",
        "DecoderLayer",
        r'''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self._norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)      # self_attention
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)     # encdec_attention
        self.ff = FeedForward(d_model, d_ff, dropout)                       # intermediate_dense ... output_dense
        self.norm1 = LayerNorm(d_model)                                     # self_attention_layer_norm
        self.norm2 = LayerNorm(d_model)                                     # encdec_attention_layer_norm
        self.norm3 = LayerNorm(d_model)                                     # output_layer_norm
        self.dropout1 = nn.Dropout(dropout)                                 # self_attention_dropout
        self.dropout2 = nn.Dropout(dropout)                                 # encdec_attention_dropout
        self.dropout3 = nn.Dropout(dropout)                                 # output_dropout

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        input_tensor, attention_mask, self_attention_mask = x, memory_mask, tgt_mask
        source_tensor = input_tensor
        if self._norm_first:
            input_tensor = self.norm1(input_tensor)
        self_attention_output = self.self_attn(input_tensor, input_tensor, input_tensor, self_attention_mask)[0]
        self_attention_output = self.dropout1(self_attention_output)
        if self._norm_first:
            self_attention_output = source_tensor + self_attention_output
        else:
            self_attention_output = self.norm1(input_tensor + self_attention_output)
        if self._norm_first:
            source_self_attention_output = self_attention_output
            self_attention_output = self.norm2(self_attention_output)
        attention_output = self.cross_attn(self_attention_output, memory, memory, attention_mask)[0]
        attention_output = self.dropout2(attention_output)
        if self._norm_first:
            attention_output = source_self_attention_output + attention_output
        else:
            attention_output = self.norm2(self_attention_output + attention_output)
        if self._norm_first:
            source_attention_output = attention_output
            attention_output = self.norm3(attention_output)

        layer_output = self.ff(attention_output)
        layer_output = self.dropout3(layer_output)
        if self._norm_first:
            layer_output = source_attention_output + layer_output
        else:
            layer_output = self.norm3(layer_output + attention_output)
        return layer_output
''',
    ),
    Port(
        "informer_decoder_layer",
        "zhouhaoyi/Informer2020 models/decoder.py DecoderLayer (x = norm1(x + dropout(self_attention)), "
        "norm2 after the cross-attention, norm3(x + y) after the 1x1-conv feed-forward; one shared dropout), "
        "with the course's modules",
        "DecoderLayer",
        r'''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)      # self_attention
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)     # cross_attention
        self.ff = FeedForward(d_model, d_ff, dropout)                       # conv1, activation, conv2
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        cross, x_mask, cross_mask = memory, tgt_mask, memory_mask
        x = x + self.dropout(self.self_attn(
            x, x, x,
            x_mask
        )[0])
        x = self.norm1(x)

        x = x + self.dropout(self.cross_attn(
            x, cross, cross,
            cross_mask
        )[0])

        y = x = self.norm2(x)
        y = self.dropout(self.ff(y))

        return self.norm3(x + y)
''',
        breach="Informer's decoder layer is post-norm only; norm_first is accepted but ignored, so "
               "norm_first=True still normalises after each residual addition instead of before each sublayer",
        names=("norm_first", "pre-norm", "post-norm", "ignor"),
    ),
    Port(
        "model_garden_seq2seq_pad_zero",
        "tensorflow/models official/nlp/modeling/models/seq2seq_transformer.py Seq2SeqTransformer.call "
        "(boolean_mask = tf.not_equal(sources, 0), attention_mask reshaped to [B, 1, S], decoder self-attention "
        "mask tf.linalg.band_part(ones, -1, 0), embeddings with stddev embedding_width**-0.5 and scale_factor "
        "embedding_width**0.5); the course's embeddings, positions, layers and output layer",
        "Transformer",
        r'''
class Transformer(nn.Module):
    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=128, n_heads=4, n_layers=2, d_ff=512,
                 dropout=0.1, max_len=256, pad_id=0):
        super().__init__()
        self.pad_id = pad_id
        self.d_model = d_model
        self._embedding_width = d_model
        # layers.OnDeviceEmbedding(initializer=random_normal(stddev=width**-0.5), scale_factor=width**0.5)
        self.src_embed = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model)
        nn.init.normal_(self.src_embed.weight, mean=0.0, std=self._embedding_width ** -0.5)
        nn.init.normal_(self.tgt_embed.weight, mean=0.0, std=self._embedding_width ** -0.5)
        self.positions = SinusoidalPositions(max_len, d_model)          # position_embedding
        self.dropout = nn.Dropout(dropout)                              # encoder_dropout, decoder_dropout
        self.encoder_layers = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers))
        self.output = nn.Linear(d_model, tgt_vocab_size)

    def encode(self, src, src_mask):
        embedded_inputs = self.src_embed(src) * self._embedding_width ** 0.5
        encoder_inputs = self.positions(embedded_inputs)
        encoder_inputs = self.dropout(encoder_inputs)
        x = encoder_inputs
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt, memory, src_mask, tgt_mask):
        decoder_inputs = self.tgt_embed(tgt) * self._embedding_width ** 0.5
        decoder_inputs = self.positions(decoder_inputs)
        decoder_inputs = self.dropout(decoder_inputs)
        x = decoder_inputs
        for layer in self.decoder_layers:
            x = layer(x, memory, tgt_mask, src_mask)
        return self.output(x)

    def forward(self, src, tgt_in):
        boolean_mask = torch.ne(src, 0)                          # tf.not_equal(sources, 0)
        attention_mask = boolean_mask.unsqueeze(1)               # tf.reshape(boolean_mask, [B, 1, S])
        length = tgt_in.shape[1]
        self_attention_mask = torch.ones(length, length, device=tgt_in.device).tril().bool()   # band_part(-1, 0)
        encoder_outputs = self.encode(src, attention_mask)
        return self.decode(tgt_in, encoder_outputs, attention_mask, self_attention_mask)
''',
        breach="the Model Garden builds the source padding mask as tf.not_equal(sources, 0): padding is always id "
               "0, whatever pad_id the model was given, so with pad_id=3 the source padding is attended to",
        names=("pad_id", "hard-coded", "self.pad_id", "padding id", "id 0"),
    ),
    Port(
        "gordic_greedy_decoding_keeps_bos",
        "gordicaleksa/pytorch-original-transformer utils/decoding_utils.py greedy_decoding (token lists starting "
        "with BOS, trg mask = padding & no-look-forward, argmax of the last position, stop when all decoded or "
        "num_of_trg_tokens == max_target_tokens, cut after EOS); ids instead of words, rows padded with pad_id",
        "greedy_decode",
        r'''
@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    device = src.device
    pad_token_id = model.pad_id
    src_mask = padding_mask(src, pad_token_id)
    src_representations_batch = model.encode(src, src_mask)
    batch_size = src_representations_batch.shape[0]

    # Initial prompt is the beginning/start of the sentence token. Make it compatible shape with source batch => (B,1)
    target_sentences_tokens = [[bos_id] for _ in range(batch_size)]
    trg_token_ids_batch = torch.tensor([[tokens[0]] for tokens in target_sentences_tokens], device=device)

    # Set to true for a particular target sentence once it reaches the EOS (end-of-sentence) token
    is_decoded = [False] * batch_size

    while True:
        # get_masks_and_count_tokens_trg
        sequence_length = trg_token_ids_batch.shape[1]
        trg_padding_mask = (trg_token_ids_batch != pad_token_id).view(batch_size, 1, 1, -1)
        trg_no_look_forward_mask = torch.triu(torch.ones((1, 1, sequence_length, sequence_length),
                                                         device=device) == 1).transpose(2, 3)
        trg_mask = trg_padding_mask & trg_no_look_forward_mask
        predicted_log_distributions = model.decode(trg_token_ids_batch, src_representations_batch, src_mask, trg_mask)

        # Extract only the indices of last token for every target sentence
        num_of_trg_tokens = len(target_sentences_tokens[0])
        predicted_log_distributions = predicted_log_distributions[:, num_of_trg_tokens - 1]

        # This is the "greedy" part of the greedy decoding
        most_probable_last_token_indices = torch.argmax(predicted_log_distributions, dim=-1).cpu().numpy()

        for idx, predicted_word in enumerate(most_probable_last_token_indices.tolist()):
            target_sentences_tokens[idx].append(predicted_word)

            if predicted_word == eos_id:  # once we find EOS token for a particular sentence we flag it
                is_decoded[idx] = True

        if all(is_decoded) or num_of_trg_tokens == max_len:
            break

        # Prepare the input for the next iteration (merge old token ids with the new column of most probable ones)
        trg_token_ids_batch = torch.cat((trg_token_ids_batch, torch.unsqueeze(
            torch.tensor(most_probable_last_token_indices, device=device), 1)), 1)

    # Post process the sentences - remove everything after the EOS token
    target_sentences_tokens_post = []
    for target_sentence_tokens in target_sentences_tokens:
        try:
            target_index = target_sentence_tokens.index(eos_id) + 1
        except ValueError:
            target_index = None
        target_sentences_tokens_post.append(target_sentence_tokens[:target_index])

    longest = max(len(tokens) for tokens in target_sentences_tokens_post)
    return torch.tensor([tokens + [pad_token_id] * (longest - len(tokens)) for tokens in target_sentences_tokens_post],
                        dtype=torch.long, device=device)
''',
        breach="greedy_decoding starts every sentence with the BOS token and keeps it in what it returns, so each "
               "row begins with bos_id and is one token longer than the ids the course asks for",
        names=("bos", "leading", "start token", "first token", "begin"),
    ),
]
