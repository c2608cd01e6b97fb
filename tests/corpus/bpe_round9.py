"""Ninth held-out set, notebook 07: ports of a small BPE trainer (teleprint-me/byte-pair), a course recitation's merge,
BPE-Dropout's tokenizer and RWKV's trie tokenizer, each read at its source."""
from tests.corpus import Port

ASSIGNMENT = "07_bpe"

PORTS = [
    Port("byte_pair_pairs", "teleprint-me/byte-pair byte/model.py Model.pairs(vocab) (new_pairs = {}; for each word, "
         "new_pairs[(syms[i], syms[i + 1])] = new_pairs.get(new_pair, 0) + freq: a plain dict; its words are "
         "space-joined strings split with word.split(), here the course's tuples of symbols)", "pair_counts", r'''
def pair_counts(word_freqs):
    new_pairs = {}
    for word, freq in word_freqs.items():
        syms = list(word)  # word.split(): relies on space-separated symbols
        for i in range(len(syms) - 1):
            new_pair = (syms[i], syms[i + 1])
            new_pairs[new_pair] = new_pairs.get(new_pair, 0) + freq
    return new_pairs
''', breach="returns a plain dict, not a collections.Counter (the counts themselves are right)",
         names=("counter", "dict", "type")),
    Port("byte_pair_merges", "teleprint-me/byte-pair byte/model.py Model.merges(vocab, pair) (out.append(a + b); i += 2 "
         "'skip the next symbol (non-overlapping)'; new_vocab[new_word] = new_vocab.get(new_word, 0) + freq 'sum "
         "collisions'; tuples of symbols instead of its space-joined strings)", "merge_pair", r'''
def merge_pair(pair, word_freqs):
    a, b = pair
    new_vocab = {}

    for word, freq in word_freqs.items():
        syms = list(word)  # word.split(): spaces need to be escaped
        out = []
        i = 0
        while i < len(syms):
            if i + 1 < len(syms) and syms[i] == a and syms[i + 1] == b:
                out.append(a + b)  # merge the pair
                i += 2  # skip the next symbol (non-overlapping)
            else:
                out.append(syms[i])
                i += 1
        new_word = tuple(out)  # " ".join(out)
        new_vocab[new_word] = new_vocab.get(new_word, 0) + freq  # sum collisions

    return new_vocab
'''),
    Port("turtlegpt_merge", "ravinpandey/LLM recitation1/TurtleGPT/TurtleGPT/bpe.py apply_merge(pair, workspace) "
         "(bigram = ' '.join(pair); replacement = ''.join(pair); new_word = word.replace(bigram, replacement); "
         "new_workspace[new_word] = workspace[word]; the course's tuples are joined with spaces before and split "
         "after)", "merge_pair", r'''
def merge_pair(pair, word_freqs):
    new_workspace = {}
    bigram = ' '.join(pair)
    replacement = ''.join(pair)
    for word in word_freqs:
        new_word = ' '.join(word).replace(bigram, replacement)
        new_workspace[tuple(new_word.split())] = word_freqs[word]
    return new_workspace
''', breach="merges by string replacement on the space-joined word: 'b c' is found inside 'ab c' (symbols ab, c) so "
            "symbol boundaries are not respected, and two words that become equal overwrite each other's count "
            "instead of adding up",
         names=("symbol", "boundar", "replace", "string", "add")),
    Port("bpe_dropout_tokenize", "VProv/BPE-Dropout bpe.py tokenize_word(merge_rules, word, dropout=0.0, sentinels, "
         "always_merge_sentinels=False) (merge table from load_subword_nmt_table: pair -> priority 1, 2, ...; a "
         "heap of [priority, position], stale entries skipped when merge_rules.get((cur, nxt)) != priority, "
         "positions after a merge shifted down and the new neighbour pairs pushed; sentinels ['', '</w>']; the "
         "'`' / '@@' marking of its regime option and the stripping of the sentinel are output formatting, left "
         "out)", "bpe_tokenize", r'''
import heapq

import numpy as np


def bpe_tokenize(word, merges):
    # load_subword_nmt_table: ranks from 1 in file order
    merge_rules = dict()
    cur_priority = 1
    for token_1, token_2 in merges:
        merge_rules[(token_1, token_2)] = int(cur_priority)
        cur_priority += 1

    dropout = 0.0
    random_generator = np.random.RandomState()
    sentinels = ['', '</w>']

    # Subword tokens
    sw_tokens = list(word)

    # Add sentinels (always_merge_sentinels=False)
    beg_sentinel = [sentinels[0]] if len(sentinels[0]) > 0 else []
    end_sentinel = [sentinels[1]] if len(sentinels[1]) > 0 else []
    sw_tokens = beg_sentinel + sw_tokens + end_sentinel

    # Add start merges
    # Heap with pairs (priority, position)
    merge_heap = []

    for pos in range(len(sw_tokens) - 1):
        cur_nxt_pair = (sw_tokens[pos], sw_tokens[pos + 1])
        if cur_nxt_pair in merge_rules:
            cur_priority = merge_rules[cur_nxt_pair]
            merge_heap.append([cur_priority, pos])

    heapq.heapify(merge_heap)

    sw_length = len(sw_tokens)
    dropped_merges = []

    while len(merge_heap):
        cur_priority, cur_pos = heapq.heappop(merge_heap)

        # Delete not valid merges
        if cur_pos > sw_length - 2:
            continue
        cur = sw_tokens[cur_pos]
        nxt = sw_tokens[cur_pos + 1]

        if merge_rules.get((cur, nxt), None) != cur_priority:
            continue

        # Apply dropout
        if random_generator.rand() < dropout:
            dropped_merges.append([cur_priority, cur_pos])
            continue

        sw_tokens[cur_pos:cur_pos + 2] = [cur + nxt]
        sw_length -= 1

        for pair in merge_heap:
            if pair[1] > cur_pos:
                pair[1] -= 1

        # Add dropped merges back
        for priority, position in dropped_merges:
            if position > cur_pos:
                position -= 1
            heapq.heappush(merge_heap, [priority, position])

        dropped_merges = []

        # Add new possible merge
        new_cur = sw_tokens[cur_pos]
        if cur_pos > 0:
            prev = sw_tokens[cur_pos - 1]
            if (prev, new_cur) in merge_rules:
                heapq.heappush(merge_heap, [merge_rules[(prev, new_cur)], cur_pos - 1])

        if cur_pos < (sw_length - 1):
            new_next = sw_tokens[cur_pos + 1]
            if (new_cur, new_next) in merge_rules:
                heapq.heappush(merge_heap, [merge_rules[(new_cur, new_next)], cur_pos])

    return sw_tokens
'''),
    Port("rwkv_trie_tokenize", "BlinkDL/ChatRWKV rwkv_pip_package/src/rwkv/rwkv_tokenizer.py TRIE and "
         "TRIE_TOKENIZER.encodeBytes (a trie of the vocabulary; find_longest walks it and keeps the last node with "
         "values; encoding takes the longest vocabulary entry at each position, left to right; the vocabulary here is "
         "the word's characters, '</w>' and every merged piece a + b, on str characters with a dict of children "
         "instead of 256 byte slots)", "bpe_tokenize", r'''
class TRIE:
    __slots__ = tuple("ch,to,values,front".split(","))

    def __init__(self, front=None, ch=None):
        self.ch = ch
        self.to = {}
        self.values = set()
        self.front = front

    def add(self, key, idx=0, val=None):
        if idx == len(key):
            if val is None:
                val = key
            self.values.add(val)
            return self
        ch = key[idx]
        if self.to.get(ch) is None:
            self.to[ch] = TRIE(front=self, ch=ch)
        return self.to[ch].add(key, idx=idx + 1, val=val)

    def find_longest(self, key, idx=0):
        u = self
        ch = key[idx]

        while u.to.get(ch) is not None:
            u = u.to[ch]
            idx += 1
            if u.values:
                ret = idx, u, u.values
            if idx == len(key):
                break
            ch = key[idx]
        return ret


def bpe_tokenize(word, merges):
    root = TRIE()
    for t in list(word) + ["</w>"] + [a + b for a, b in merges]:
        _ = root.add(t, val=t)
    src = word + "</w>"
    idx = 0
    tokens = []
    while idx < len(src):
        _idx = idx
        idx, _, values = root.find_longest(src, idx)
        assert idx != _idx
        token = next(iter(values))
        tokens.append(token)
    return tokens
''', breach="longest match from the left over the merged pieces instead of replaying the merges by rank: a long piece "
            "the merges would never build for this word is taken whenever it matches",
         names=("longest", "rank", "greedy", "left to right", "order")),
]
