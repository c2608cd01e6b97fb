"""Held-out ports of notebook 07 (pair counts, merging, training, tokenizing) in the styles of public tokenizers
the course's own corpus does not use (tiktoken's educational BPE, Hugging Face tokenizers' Word::merge and
BPE::merge_word, SentencePiece's BPE trainer, YouTokenToMe)."""
from . import Port

ASSIGNMENT = "07_bpe"

TIES = ("lexicograph", "tie", "smallest pair", "alphabetical")

PORTS = [
    # --- pair_counts ----------------------------------------------------------------------------------
    Port("tiktoken _educational.bpe_train statistics (one list entry per word occurrence)",
         "openai/tiktoken tiktoken/_educational.py, bpe_train: 'Find the most common pair': stats = "
         "collections.Counter(); for piece in words: for pair in zip(piece[:-1], piece[1:]): stats[pair] += 1 "
         "(words is the list of every word of the text; here expanded from the frequency dict)",
         "pair_counts", '''
import collections


def pair_counts(word_freqs):
    # tiktoken keeps one entry per occurrence of a word
    words = [list(word) for word, freq in word_freqs.items() for _ in range(freq)]
    # Find the most common pair. This will become our next token
    stats = collections.Counter()
    for piece in words:
        for pair in zip(piece[:-1], piece[1:]):
            stats[pair] += 1
    return stats
'''),

    # --- merge_pair -----------------------------------------------------------------------------------
    Port("Hugging Face tokenizers BpeTrainer: Word::merge on the training words, in place",
         "huggingface/tokenizers tokenizers/src/models/bpe/word.rs, Word::merge(c1, c2, replacement): loop over "
         "symbols; on a match self.symbols.insert(i, new_s); remove(i + 1); remove(i + 1); trainer.rs do_train "
         "merges every word containing the pair in place ((*word).merge(...) on &mut words[i])", "merge_pair", '''
def _word_merge(symbols, c1, c2, replacement):
    i = 0
    while True:
        if i >= len(symbols):
            break
        # Found a pair
        if symbols[i] == c1 and i + 1 < len(symbols) and symbols[i + 1] == c2:
            symbols.insert(i, replacement)  # Insert replacement before first char of pair
            symbols.pop(i + 1)  # Remove first char of pair
            symbols.pop(i + 1)  # And then the second
        i += 1


def merge_pair(pair, word_freqs):
    c1, c2 = pair
    # Merge the new pair in every words
    for word in list(word_freqs):
        symbols = list(word)
        _word_merge(symbols, c1, c2, c1 + c2)
        merged = tuple(symbols)
        if merged != word:
            count = word_freqs.pop(word)
            word_freqs[merged] = word_freqs.get(merged, 0) + count
    return word_freqs
''', breach="merges the words of word_freqs in place, as the tokenizers trainer does with its words, so the "
            "argument is changed (and returned) instead of a new dict being built",
         names=("new dict", "in place", "mutat", "changes its argument", "modif", "its argument")),

    # --- train_bpe ------------------------------------------------------------------------------------
    Port("SentencePiece BPE trainer: on equal frequency the shorter symbol, then the smaller string",
         "google/sentencepiece src/bpe_model_trainer.cc, Trainer::Train main loop: 'If the frequency is the same, "
         "take shorter symbol. if the length is the same, use lexicographical comparison' (symbol->chars.size(), "
         "symbol->ToString() of the merged piece); a piece already produced by another path is skipped (dup); "
         "'No valid symbol found' ends the loop (words keep the course's separate '</w>')", "train_bpe", '''
def train_bpe(corpus, num_merges):
    word_freqs = dict(Counter(tuple(word) + ("</w>",) for word in corpus.split()))
    merges = []
    # We may see duplicated pieces that are extracted with different path.
    dup, removed = set(), set()
    while len(merges) < num_merges:
        counts = pair_counts(word_freqs)
        candidates = [p for p, freq in counts.items() if freq > 0 and p not in removed]
        if not candidates:
            break  # No valid symbol found
        # Scanning active symbols, finds the best_symbol with highest freq.
        # If the frequency is the same, take shorter symbol.
        # if the length is the same, use lexicographical comparison
        best_symbol = min(candidates, key=lambda p: (-counts[p], len(p[0] + p[1]), p[0] + p[1]))
        piece = best_symbol[0] + best_symbol[1]
        if piece in dup:
            # Removes best_symbol so it is not selected again.
            removed.add(best_symbol)
            continue
        dup.add(piece)
        merges.append(best_symbol)
        word_freqs = merge_pair(best_symbol, word_freqs)
    return merges
''', breach="breaks ties between equally frequent pairs by the length of the merged symbol, then by the merged "
            "string (SentencePiece's rule), not by the lexicographically smallest pair",
         names=TIES + ("shorter", "length of the merged")),

    # --- bpe_tokenize ---------------------------------------------------------------------------------
    Port("YouTokenToMe encode_sentence (priority queue of (rule id, position) merge events)",
         "VKCOM/YouTokenToMe youtokentome/cpp/bpe.cpp, BaseEncoder::encode_sentence: linked list of NodeDecoder; "
         "push_in_queue_if_rule_exist(pos) for every adjacent pair with a rule; pop the event with the smallest "
         "rule id (then position); skip it if the tokens no longer match the rule; merge; push the pairs formed "
         "with the neighbours (every character of the word counted as known, since only the merges are given)",
         "bpe_tokenize", '''
import heapq


def bpe_tokenize(word, merges):
    # fill_from_state: rule2id[(x, y)] = i for the rules in order
    rule2id = {}
    for i, (x, y) in enumerate(merges):
        rule2id[(x, y)] = i
    symbols = list(word) + ["</w>"]
    # NodeDecoder(token, prev, next)
    nodes = [[s, i - 1, i + 1] for i, s in enumerate(symbols)]
    nodes[-1][2] = -1
    queue = []

    def push_in_queue_if_rule_exist(pos):
        nxt = nodes[pos][2]
        rule = rule2id.get((nodes[pos][0], nodes[nxt][0]))
        if rule is not None:
            heapq.heappush(queue, (rule, pos))

    for j in range(len(nodes) - 1):
        push_in_queue_if_rule_exist(j)

    while queue:
        rule_id, pos_1 = heapq.heappop(queue)
        pos_2 = nodes[pos_1][2]
        x, y = merges[rule_id]
        if nodes[pos_1][0] != x or pos_2 == -1 or nodes[pos_2][0] != y:
            continue
        pos_0 = nodes[pos_1][1]
        pos_3 = nodes[pos_2][2]
        nodes[pos_2] = [None, -1, -1]
        nodes[pos_1] = [x + y, pos_0, pos_3]
        if pos_3 != -1:
            nodes[pos_3][1] = pos_1
        if pos_0 != -1:
            push_in_queue_if_rule_exist(pos_0)
        if pos_3 != -1:
            push_in_queue_if_rule_exist(pos_1)

    alive_token = next(i for i, node in enumerate(nodes) if node[0] is not None)
    output_pieces = []
    while alive_token != -1:
        output_pieces.append(nodes[alive_token][0])
        alive_token = nodes[alive_token][2]
    return output_pieces
'''),
    Port("Hugging Face tokenizers BPE::merge_word with unk_token (characters outside the vocabulary)",
         "huggingface/tokenizers tokenizers/src/models/bpe/model.rs, BPE::merge_word: each character is looked up "
         "in self.vocab; a character that is not there becomes unk_token (fuse_unk=False: one each), then "
         "Word::merge_all applies the merges by rank with a BinaryHeap (lowest rank, then leftmost); the vocab "
         "is the alphabet and merged tokens of the model, here rebuilt from the merges; BPE(unk_token='[UNK]') as "
         "in the tokenizers quicktour", "bpe_tokenize", '''
import heapq


def _vocab_from_merges(merges):
    vocab = {"</w>": 0}
    for a, b in merges:
        for token in (a, b, a + b):
            vocab.setdefault(token, len(vocab))
    return vocab


def _merge_all(symbols, merges_map):
    # symbols: list of [token, prev, next, alive]; merges_map: {(a, b): (rank, new_token)}
    queue = [(merges_map[(symbols[i][0], symbols[i + 1][0])][0], i)
             for i in range(len(symbols) - 1) if (symbols[i][0], symbols[i + 1][0]) in merges_map]
    heapq.heapify(queue)
    while queue:
        rank, pos = heapq.heappop(queue)
        if not symbols[pos][3]:
            continue
        # Do nothing if we are the last symbol
        if symbols[pos][2] == -1:
            continue
        next_pos = symbols[pos][2]
        right = symbols[next_pos]
        # Make sure we are not processing an expired queue entry
        target_new_pair = (symbols[pos][0], right[0])
        if target_new_pair not in merges_map or merges_map[target_new_pair][0] != rank:
            continue
        # Otherwise, let's merge
        symbols[pos][0] = merges_map[target_new_pair][1]
        symbols[pos][2] = right[2]
        # Tag the right part as removed
        right[3] = False
        if right[2] != -1:
            symbols[right[2]][1] = pos
        # Insert the new pair formed with the previous symbol
        prev = symbols[pos][1]
        if prev >= 0 and (symbols[prev][0], symbols[pos][0]) in merges_map:
            heapq.heappush(queue, (merges_map[(symbols[prev][0], symbols[pos][0])][0], prev))
        # Insert the new pair formed with the next symbol
        nxt = symbols[pos][2]
        if nxt != -1 and (symbols[pos][0], symbols[nxt][0]) in merges_map:
            heapq.heappush(queue, (merges_map[(symbols[pos][0], symbols[nxt][0])][0], pos))
    # Filter out the removed symbols
    return [s[0] for s in symbols if s[3]]


def bpe_tokenize(word, merges, unk_token="[UNK]"):
    vocab = _vocab_from_merges(merges)
    merges_map = {}
    for rank, (a, b) in enumerate(merges):
        merges_map.setdefault((a, b), (rank, a + b))
    tokens = []
    for s in list(word) + ["</w>"]:
        if s in vocab:
            tokens.append(s)
        elif unk_token is not None:
            tokens.append(unk_token)
    symbols = [[s, i - 1, i + 1 if i + 1 < len(tokens) else -1, True] for i, s in enumerate(tokens)]
    return _merge_all(symbols, merges_map)
''', breach="a character outside the model's vocabulary (one that never occurred in a merge) becomes '[UNK]' "
            "(tokenizers' unk_token) instead of staying a symbol of its own",
         names=("unk", "unknown", "unseen character", "never occurred", "own symbol", "stays a symbol")),
]
