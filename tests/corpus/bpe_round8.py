"""Eighth held-out set, graded before any change to the judges.

Held-out set 8, notebook 07: ports of the "Neural Machine Translation of Rare Words" reference algorithm as
found in CecilJxSu/nlp-collection and pillaiharish/LLM-AI-Agents-Learning-Journey, Hugging Face PhoBERT's BPE
(tokenization_phobert.py), open_clip's SimpleTokenizer (mlfoundations/open_clip) and llama.cpp's BPE tokenizer
(ggml-org/llama.cpp src/llama-vocab.cpp, C++), each read at its source. Words are tuples of symbols here, where
the reference algorithm keeps them as space-joined strings.
"""
from tests.corpus import Port

ASSIGNMENT = "07_bpe"

PORTS = [
    Port(
        "nmt_rare_words_get_stats",
        "CecilJxSu/nlp-collection byte_pair_encoding/bpe.py get_stats (the algorithm of Sennrich et al. 2016, "
        "collections.defaultdict(int)), words as tuples, the result handed back as a Counter",
        "pair_counts",
        r'''
import collections


def pair_counts(word_freqs):
    pairs = collections.defaultdict(int)
    for word, freq in word_freqs.items():
        symbols = word
        for i in range(len(symbols)-1):
            pairs[symbols[i], symbols[i+1]] += freq
    return Counter(pairs)
''',
    ),
    Port(
        "phobert_get_pairs_set",
        "huggingface/transformers src/transformers/models/phobert/tokenization_phobert.py get_pairs (a set of "
        "symbol pairs), each word's pairs weighted by its count",
        "pair_counts",
        r'''
def get_pairs(word):
    """
    Return set of symbol pairs in a word.

    Word is represented as tuple of symbols (symbols being variable-length strings).
    """
    pairs = set()
    prev_char = word[0]
    for char in word[1:]:
        pairs.add((prev_char, char))
        prev_char = char

    pairs = set(pairs)
    return pairs


def pair_counts(word_freqs):
    counts = Counter()
    for word, freq in word_freqs.items():
        for pair in get_pairs(word):
            counts[pair] += freq
    return counts
''',
        breach="PhoBERT's get_pairs returns a *set* of the pairs in a word, so a pair that occurs several times in "
               "one word (('a', 'a', 'a') holds ('a', 'a') twice) is counted once per word",
        names=("twice", "overlap", "set", "once per word", "repeated", "every position"),
    ),
    Port(
        "nmt_rare_words_merge_vocab",
        "CecilJxSu/nlp-collection byte_pair_encoding/bpe.py merge_vocab (regex (?<!\\S)bigram(?!\\S) on the "
        "space-joined word, v_out[w_out] = v_in[word]), words joined and split around the regex",
        "merge_pair",
        r'''
import re


def merge_pair(pair, word_freqs):
    v_in = word_freqs
    v_out = {}
    bigram_pattern = re.escape(' '.join(pair))
    p = re.compile(r'(?<!\S)' + bigram_pattern + r'(?!\S)')
    for word in v_in:
        w_out = p.sub(''.join(pair), ' '.join(word))
        v_out[tuple(w_out.split())] = v_in[word]
    return v_out
''',
        breach="merge_vocab stores v_out[w_out] = v_in[word]: when two different words become the same after the "
               "merge, the later one overwrites the earlier count instead of adding to it",
        names=("add", "sum", "overwrit", "become equal", "collid", "same key"),
    ),
    Port(
        "phobert_bpe_merge_loop",
        "huggingface/transformers src/transformers/models/phobert/tokenization_phobert.py PhobertTokenizer.bpe "
        "inner loop (word.index(first, i), merge when word[i + 1] == second, i += 2), run over every word",
        "merge_pair",
        r'''
def merge_pair(pair, word_freqs):
    first, second = pair
    new_word_freqs = {}
    for word, freq in word_freqs.items():
        new_word = []
        i = 0
        while i < len(word):
            try:
                j = word.index(first, i)
            except ValueError:
                new_word.extend(word[i:])
                break
            else:
                new_word.extend(word[i:j])
                i = j

            if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                new_word.append(first + second)
                i += 2
            else:
                new_word.append(word[i])
                i += 1
        new_word = tuple(new_word)
        new_word_freqs[new_word] = new_word_freqs.get(new_word, 0) + freq
    return new_word_freqs
''',
    ),
    Port(
        "nmt_rare_words_max_stats",
        "pillaiharish/LLM-AI-Agents-Learning-Journey bpe_tokenization/bpe_tokenization.py training loop (pairs = "
        "get_stats(vocab); if not pairs: break; best_pair = max(pairs, key=pairs.get); merge_vocab)",
        "train_bpe",
        r'''
def train_bpe(corpus, num_merges):
    vocab = initial_word_freqs(corpus)
    merges = []
    for _ in range(num_merges):
        pairs = pair_counts(vocab)
        if not pairs:
            break
        best_pair = max(pairs, key=pairs.get)
        merges.append(best_pair)
        vocab = merge_pair(best_pair, vocab)
    return merges
''',
        breach="max(pairs, key=pairs.get) breaks ties by whichever pair was counted first (the order of the words), "
               "not by the lexicographically smallest pair",
        names=("tie", "smallest", "lexicographic", "first counted", "most_common"),
    ),
    Port(
        "open_clip_bpe_suffix_on_last_char",
        "mlfoundations/open_clip src/open_clip/tokenizer.py SimpleTokenizer.bpe and get_pairs (word = "
        "tuple(token[:-1]) + (token[-1] + '</w>',), merges by bpe_ranks); the symbols returned as a list instead "
        "of ' '.join(word)",
        "bpe_tokenize",
        r'''
def get_pairs(word):
    """Return set of symbol pairs in a word.
    Word is represented as tuple of symbols (symbols being variable-length strings).
    """
    pairs = set()
    prev_char = word[0]
    for char in word[1:]:
        pairs.add((prev_char, char))
        prev_char = char
    return pairs


def bpe_tokenize(word, merges):
    bpe_ranks = dict(zip([tuple(m) for m in merges], range(len(merges))))
    token = word
    word = tuple(token[:-1]) + (token[-1] + '</w>',)
    pairs = get_pairs(word)

    if not pairs:
        return [token + '</w>']

    while True:
        bigram = min(pairs, key=lambda pair: bpe_ranks.get(pair, float('inf')))
        if bigram not in bpe_ranks:
            break
        first, second = bigram
        new_word = []
        i = 0
        while i < len(word):
            try:
                j = word.index(first, i)
                new_word.extend(word[i:j])
                i = j
            except Exception:
                new_word.extend(word[i:])
                break

            if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                new_word.append(first + second)
                i += 2
            else:
                new_word.append(word[i])
                i += 1
        new_word = tuple(new_word)
        word = new_word
        if len(word) == 1:
            break
        else:
            pairs = get_pairs(word)
    return list(word)
''',
        breach="open_clip (like CLIP and GPT-1) glues the end-of-word marker to the last character, ('w</w>',), "
               "instead of starting from the separate symbol '</w>', so merges learned with a separate marker "
               "such as ('t', '</w>') never apply",
        names=("</w>", "separate", "last character", "marker", "end-of-word", "glued"),
    ),
    Port(
        "llama_cpp_bpe_work_queue",
        "ggml-org/llama.cpp src/llama-vocab.cpp llm_tokenizer_bpe_session::tokenize (symbol list, "
        "llm_bigram_bpe work_queue ordered by rank then left index, stale-bigram check, add_new_bigram on both "
        "sides), ported from C++ with heapq",
        "bpe_tokenize",
        r'''
import heapq


def bpe_tokenize(word, merges):
    bpe_ranks = {}
    for rank, pair in enumerate(merges):
        bpe_ranks.setdefault(tuple(pair), rank)            # vocab.find_bpe_rank

    # symbols: text, prev, next (llm_symbol); the word is split into characters, then '</w>'
    text = list(word) + ['</w>']
    prev = [i - 1 for i in range(len(text))]
    nxt = [i + 1 if i + 1 < len(text) else -1 for i in range(len(text))]
    work_queue = []                                        # llm_bigram_bpe::queue: lowest rank, then leftmost

    def add_new_bigram(left, right):
        if left == -1 or right == -1:
            return
        rank_found = bpe_ranks.get((text[left], text[right]), -1)
        if rank_found < 0:
            return
        heapq.heappush(work_queue, (rank_found, left, right, text[left] + text[right]))

    for i in range(1, len(text)):
        add_new_bigram(i - 1, i)

    # build token(s)
    while work_queue:
        rank, left, right, bigram_text = heapq.heappop(work_queue)
        if not text[left] or not text[right]:
            continue
        if text[left] + text[right] != bigram_text:
            continue  # Skip this bigram if it's outdated
        # merge the right sym into the left one
        text[left] = text[left] + text[right]
        text[right] = ''
        # remove the right sym from the chain
        nxt[left] = nxt[right]
        if nxt[right] >= 0:
            prev[nxt[right]] = left
        add_new_bigram(prev[left], left)    # left side of current symbol
        add_new_bigram(left, nxt[left])     # right side of current symbol

    return [sym for sym in text if sym]
''',
    ),
]
