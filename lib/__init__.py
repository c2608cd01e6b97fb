"""Shared code for the course "Transformers from scratch, autograded".

One module per idea. Reference solutions, one notebook each (a notebook
imports only those of earlier notebooks, so a student who got stuck in one
notebook can still finish the next):

- ``self_attention``  01: softmax, attention, a self-attention layer
- ``positions``       02: sinusoidal and learned position vectors
- ``feed_forward``    03: the position-wise feed-forward network
- ``masking``         04: causal and padding masks
- ``multi_head``      05: splitting into heads, multi-head attention
- ``layer_norm``      06: layer normalization
- ``encoder``         06: the encoder layer (attention, feed-forward, residuals, norms)
- ``bpe``             07: byte-pair encoding: pair counts, merges, training, tokenizing
- ``decoder``         08: the decoder layer (masked self-attention, cross-attention, feed-forward)
- ``transformer``     08: the encoder-decoder Transformer, greedy decoding (and beam search)
- ``local_attention`` 09: sliding-window and global-token masks (BigBird's pattern)
- ``linformer``       09: self-attention with keys and values projected to k rows
- ``rotary``          09: rotary position embedding
- ``kv_cache``        09: greedy decoding with cached keys and values

Support:

- ``device``          picking CUDA / Apple MPS / CPU, and seeding
- ``char_lm``         a tiny character-level language model and its training loop (04)
- ``translation_data`` a synthetic English -> German corpus from a small grammar, no download (08)
- ``subword``         a joint English/German BPE tokenizer with Hugging Face ``tokenizers`` (08)
- ``multi30k``        the real Multi30k corpus: download, checksum, local cache (08)
- ``translate``       training a translation model (warmup, label smoothing), beam search, BLEU (08)
- ``banded_attention`` sliding-window attention in O(T·w) time and memory (09)
- ``length_generalisation`` learned, sinusoidal and rotary positions beyond the training length (09)
- ``plots``           attention heatmaps and other pictures
- ``testing``         readable assertions used by the notebooks' checks
- ``checking``        ``check("<exercise>")``: the hidden tests' verdict, asked from the notebook
- ``guard``           marks the reference code, so graders can switch it off
"""
