"""Ported code of notebook 07 (byte-pair encoding) in the styles of public projects."""
from . import Port

ASSIGNMENT = "07_bpe"

TIES = ("lexicograph", "tie", "smallest pair", "alphabetical")
MARKER = ("</w>", "end-of-word", "end of word", "marker")

# openai/gpt-2 src/encoder.py, Encoder.bpe(): the inner loop that merges one bigram in a word, left to right
GPT2_MERGE_WORD = '''
def _merge_word(word, first, second):
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
    return tuple(new_word)
'''

PORTS = [
    # --- pair_counts ----------------------------------------------------------------------------------
    Port("subword-nmt get_pair_statistics (prev_char loop)",
         "rsennrich/subword-nmt subword_nmt/learn_bpe.py, get_pair_statistics: prev_char = word[0]; "
         "for char in word[1:]: stats[prev_char, char] += freq", "pair_counts", '''
def pair_counts(word_freqs):
    stats = Counter()
    for word, freq in word_freqs.items():
        if not word:
            continue
        prev_char = word[0]
        for char in word[1:]:
            stats[prev_char, char] += freq
            prev_char = char
    return stats
'''),
    Port("HF tokenizers count_pairs (windows of 2, per-word maps reduced)",
         "huggingface/tokenizers tokenizers/src/models/bpe/trainer.rs, BpeTrainer::count_pairs: "
         "word.get_chars().windows(2), per-word pair_counts, reduced by adding", "pair_counts", '''
def pair_counts(word_freqs):
    def count_word(word, count):
        local = Counter()
        for i in range(len(word) - 1):
            local[word[i], word[i + 1]] += count
        return local

    total = Counter()
    for word, count in word_freqs.items():
        for pair, c in count_word(word, count).items():
            total[pair] += c
    return total
'''),
    Port("minbpe get_stats (a plain dict)",
         "karpathy/minbpe minbpe/base.py, get_stats(ids, counts=None): counts = {} if counts is None; "
         "counts[pair] = counts.get(pair, 0) + 1", "pair_counts", '''
def get_stats(ids, counts=None, weight=1):
    counts = {} if counts is None else counts
    for pair in zip(ids, ids[1:]):
        counts[pair] = counts.get(pair, 0) + weight
    return counts


def pair_counts(word_freqs):
    counts = {}
    for word, freq in word_freqs.items():
        get_stats(word, counts, freq)
    return counts
''', breach="returns a plain dict, not a collections.Counter",
         names=("counter",)),
    Port("minbpe BasicTokenizer statistics over the whole text",
         "karpathy/minbpe minbpe/basic.py, BasicTokenizer.train: get_stats(ids) on the ids of the whole text, "
         "with no split into words", "pair_counts", '''
def pair_counts(word_freqs):
    ids = [symbol for word, freq in word_freqs.items() for _ in range(freq) for symbol in word]
    stats = Counter()
    for pair in zip(ids, ids[1:]):
        stats[pair] += 1
    return stats
''', breach="counts pairs across word boundaries (the last symbol of one word with the first of the next)",
         names=("across", "between words", "two words", "word boundar", "different words")),

    # --- merge_pair -----------------------------------------------------------------------------------
    Port("subword-nmt replace_pair (regex with lookarounds)",
         "rsennrich/subword-nmt subword_nmt/learn_bpe.py, replace_pair: re.compile(r'(?<!\\S)' + "
         "re.escape(first + ' ' + second) + r'(?!\\S)') applied to ' '.join(word)", "merge_pair", '''
import re


def merge_pair(pair, word_freqs):
    first, second = pair
    pair_str = first + second
    pattern = re.compile(r"(?<!\\S)" + re.escape(first + " " + second) + r"(?!\\S)")
    merged = {}
    for word, freq in word_freqs.items():
        new_word = tuple(pattern.sub(lambda m: pair_str, " ".join(word)).split(" "))
        merged[new_word] = merged.get(new_word, 0) + freq
    return merged
'''),
    Port("minbpe merge(ids, pair, idx)",
         "karpathy/minbpe minbpe/base.py, merge: while i < len(ids): if ids[i] == pair[0] and i < len(ids) - 1 "
         "and ids[i+1] == pair[1]: newids.append(idx); i += 2", "merge_pair", '''
def merge(ids, pair, idx):
    newids = []
    i = 0
    while i < len(ids):
        if ids[i] == pair[0] and i < len(ids) - 1 and ids[i + 1] == pair[1]:
            newids.append(idx)
            i += 2
        else:
            newids.append(ids[i])
            i += 1
    return newids


def merge_pair(pair, word_freqs):
    idx = pair[0] + pair[1]
    out = {}
    for word, freq in word_freqs.items():
        key = tuple(merge(list(word), pair, idx))
        out[key] = out.get(key, 0) + freq
    return out
'''),
    Port("GPT-2 Encoder.bpe inner merge loop (word.index)",
         "openai/gpt-2 src/encoder.py, Encoder.bpe: j = word.index(first, i); new_word.extend(word[i:j]); "
         "merge when word[i+1] == second", "merge_pair", GPT2_MERGE_WORD + '''

def merge_pair(pair, word_freqs):
    first, second = pair
    out = {}
    for word, freq in word_freqs.items():
        new_word = _merge_word(word, first, second)
        out[new_word] = out.get(new_word, 0) + freq
    return out
'''),
    Port("d2l merge_symbols (str.replace on the space-joined word)",
         "d2l-ai/d2l-en chapter_natural-language-processing-pretraining/subword-embedding.md, merge_symbols: "
         "token.replace(' '.join(max_freq_pair), ''.join(max_freq_pair)); new_token_freqs[new_token] = "
         "token_freqs[token]", "merge_pair", '''
def merge_pair(pair, word_freqs):
    token_freqs = {" ".join(word): freq for word, freq in word_freqs.items()}
    new_token_freqs = dict()
    for token, freq in token_freqs.items():
        new_token = token.replace(" ".join(pair), "".join(pair))
        new_token_freqs[new_token] = token_freqs[token]
    return {tuple(token.split(" ")): freq for token, freq in new_token_freqs.items()}
''', breach="str.replace ignores symbol boundaries (merges inside longer symbols such as 'xa b'), and words "
            "that become equal overwrite each other's counts instead of adding them",
         names=("boundar", "inside", "part of a symbol", "substring", "longer symbol", "overwrit", "add up")),
    Port("Sennrich et al. (2016) Algorithm 1, merge_vocab",
         "Sennrich, Haddow, Birch, 'Neural Machine Translation of Rare Words with Subword Units' (ACL 2016), "
         "Algorithm 1: p = re.compile(r'(?<!\\S)' + bigram + r'(?!\\S)'); v_out[w_out] = v_in[word]",
         "merge_pair", '''
import re


def merge_pair(pair, word_freqs):
    v_in = {" ".join(word): freq for word, freq in word_freqs.items()}
    v_out = {}
    bigram = re.escape(" ".join(pair))
    p = re.compile(r"(?<!\\S)" + bigram + r"(?!\\S)")
    for word in v_in:
        w_out = p.sub("".join(pair), word)
        v_out[w_out] = v_in[word]
    return {tuple(w.split(" ")): f for w, f in v_out.items()}
''', breach="two words that become the same symbols after the merge overwrite each other's count instead of "
            "adding them up",
         names=("overwrit", "add up", "sum", "same symbols", "collid")),

    # --- train_bpe ------------------------------------------------------------------------------------
    Port("HF tokenizers trainer: a max-heap of merges with lazy count refresh",
         "huggingface/tokenizers tokenizers/src/models/bpe/trainer.rs, do_train: BinaryHeap<Merge> ordered by "
         "count then ascending pair; a popped entry whose count is stale is pushed back with the new count",
         "train_bpe", '''
import heapq


def train_bpe(corpus, num_merges):
    word_freqs = dict(Counter(tuple(w) + ("</w>",) for w in corpus.split()))
    pair_count = pair_counts(word_freqs)
    queue = [(-c, p) for p, c in pair_count.items() if c > 0]
    heapq.heapify(queue)
    merges = []
    while len(merges) < num_merges and queue:
        neg, top = heapq.heappop(queue)
        current = pair_count.get(top, 0)
        if -neg != current:            # stale entry: re-queue it with its real count
            if current > 0:
                heapq.heappush(queue, (-current, top))
            continue
        merges.append(top)
        word_freqs = merge_pair(top, word_freqs)
        new_count = pair_counts(word_freqs)
        for p, c in new_count.items():
            if c > 0 and c != pair_count.get(p, 0):
                heapq.heappush(queue, (-c, p))
        pair_count = new_count
    return merges
'''),
    Port("minbpe training loop on word frequencies, ties to the smallest pair",
         "karpathy/minbpe minbpe/basic.py, BasicTokenizer.train: for i in range(num_merges): stats = get_stats(ids); "
         "pair = max(stats, ...); ids = merge(ids, pair, idx)", "train_bpe", '''
def train_bpe(corpus, num_merges):
    vocab = Counter(tuple(word) + ("</w>",) for word in corpus.split())
    merges = []
    for i in range(num_merges):
        stats = pair_counts(vocab)
        if not stats:
            break
        pair = min(stats, key=lambda p: (-stats[p], p))   # the highest count; ties: the smallest pair
        vocab = merge_pair(pair, vocab)
        merges.append(pair)
    return merges
'''),
    Port("subword-nmt learn_bpe v0.2 (end-of-word glued to the last character)",
         "rsennrich/subword-nmt subword_nmt/learn_bpe.py, learn_bpe: vocab = dict((tuple(x[:-1]) + "
         "(x[-1] + '</w>',), y) ...) (version 0.2)", "train_bpe", '''
def train_bpe(corpus, num_merges):
    vocab = Counter(corpus.split())
    vocab = dict([(tuple(x[:-1]) + (x[-1] + "</w>",), y) for (x, y) in vocab.items()])
    merges = []
    for i in range(num_merges):
        stats = pair_counts(vocab)
        if not stats:
            break
        most_frequent = min(stats, key=lambda x: (-stats[x], x))
        merges.append(most_frequent)
        vocab = merge_pair(most_frequent, vocab)
    return merges
''', breach="'</w>' is glued to the last character ('w</w>') instead of being a symbol of its own",
         names=MARKER + ("glued", "separate symbol", "own symbol")),
    Port("Sennrich et al. (2016) Algorithm 1, best = max(pairs, key=pairs.get)",
         "Sennrich, Haddow, Birch (ACL 2016), Algorithm 1: for i in range(num_merges): pairs = get_stats(vocab); "
         "best = max(pairs, key=pairs.get); vocab = merge_vocab(best, vocab)", "train_bpe", '''
def train_bpe(corpus, num_merges):
    vocab = dict(Counter(tuple(word) + ("</w>",) for word in corpus.split()))
    merges = []
    for i in range(num_merges):
        pairs = pair_counts(vocab)
        if not pairs:
            break
        best = max(pairs, key=pairs.get)
        vocab = merge_pair(best, vocab)
        merges.append(best)
    return merges
''', breach="ties broken by the first pair seen (dict order of max), not by the lexicographically smallest pair",
         names=TIES + ("first seen", "first occurr")),
    Port("subword-nmt learn_bpe: max(stats, key=lambda x: (stats[x], x))",
         "rsennrich/subword-nmt subword_nmt/learn_bpe.py, learn_bpe: most_frequent = max(stats, key=lambda x: "
         "(stats[x], x))", "train_bpe", '''
def train_bpe(corpus, num_merges):
    vocab = dict(Counter(tuple(word) + ("</w>",) for word in corpus.split()))
    merges = []
    for i in range(num_merges):
        stats = pair_counts(vocab)
        if not stats:
            break
        most_frequent = max(stats, key=lambda x: (stats[x], x))
        merges.append(most_frequent)
        vocab = merge_pair(most_frequent, vocab)
    return merges
''', breach="ties broken by the lexicographically largest pair",
         names=TIES + ("largest",)),
    Port("HF tokenizers trainer: ties by symbol id (alphabet sorted, merged symbols by creation)",
         "huggingface/tokenizers tokenizers/src/models/bpe/trainer.rs: compute_alphabet sorts the characters, "
         "new symbols get the next id; impl Ord for Merge: count, then other.pair.cmp(&self.pair) (ascending ids)",
         "train_bpe", '''
def train_bpe(corpus, num_merges):
    word_counts = Counter(corpus.split())
    id_to_word = sorted({c for w in word_counts for c in w} | {"</w>"})
    word_to_id = {w: i for i, w in enumerate(id_to_word)}
    words = {tuple(word_to_id[c] for c in w) + (word_to_id["</w>"],): n for w, n in word_counts.items()}
    merges = []
    for _ in range(num_merges):
        counts = pair_counts(words)
        if not counts:
            break
        top = min(counts, key=lambda p: (-counts[p], p))          # count first, then the smallest ids
        a, b = id_to_word[top[0]], id_to_word[top[1]]
        merges.append((a, b))
        if a + b not in word_to_id:
            id_to_word.append(a + b)
            word_to_id[a + b] = len(id_to_word) - 1
        new_id = word_to_id[a + b]
        new_words = {}
        for word, n in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == top:
                    out.append(new_id)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            new_words[tuple(out)] = new_words.get(tuple(out), 0) + n
        words = new_words
    return merges
''', breach="ties broken by symbol ids (merged symbols ordered by when they were created), not lexicographically",
         names=TIES + ("symbol id", "creation")),
    Port("minbpe / GPT-2 byte-level symbols, no end-of-word marker",
         "karpathy/minbpe minbpe/basic.py (text.encode('utf-8') ids) with openai/gpt-2 src/encoder.py "
         "bytes_to_unicode() to print bytes as characters; no '</w>'", "train_bpe", '''
def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\\u00a1"), ord("\\u00ac") + 1)) \\
        + list(range(ord("\\u00ae"), ord("\\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(2 ** 8):
        if b not in bs:
            bs.append(b)
            cs.append(2 ** 8 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def train_bpe(corpus, num_merges):
    byte_encoder = bytes_to_unicode()
    vocab = dict(Counter(tuple(byte_encoder[b] for b in w.encode("utf-8")) for w in corpus.split()))
    merges = []
    for i in range(num_merges):
        stats = pair_counts(vocab)
        if not stats:
            break
        pair = min(stats, key=lambda p: (-stats[p], p))
        vocab = merge_pair(pair, vocab)
        merges.append(pair)
    return merges
''', breach="byte-level symbols with no '</w>' end-of-word marker",
         names=MARKER),

    # --- bpe_tokenize ---------------------------------------------------------------------------------
    Port("GPT-2 Encoder.bpe (lowest rank first), with '</w>'",
         "openai/gpt-2 src/encoder.py, Encoder.bpe: bigram = min(pairs, key=lambda pair: "
         "self.bpe_ranks.get(pair, float('inf'))); stop when bigram not in bpe_ranks", "bpe_tokenize",
         GPT2_MERGE_WORD + '''

def get_pairs(word):
    pairs = set()
    prev_char = word[0]
    for char in word[1:]:
        pairs.add((prev_char, char))
        prev_char = char
    return pairs


def bpe_tokenize(word, merges):
    bpe_ranks = {}
    for rank, pair in enumerate(merges):
        bpe_ranks.setdefault(tuple(pair), rank)
    word = tuple(word) + ("</w>",)
    pairs = get_pairs(word)
    while True:
        if not pairs:
            break
        bigram = min(pairs, key=lambda pair: bpe_ranks.get(pair, float("inf")))
        if bigram not in bpe_ranks:
            break
        first, second = bigram
        word = _merge_word(word, first, second)
        if len(word) == 1:
            break
        pairs = get_pairs(word)
    return list(word)
'''),
    Port("minbpe encode (min by merge index, membership check)",
         "karpathy/minbpe minbpe/basic.py, BasicTokenizer.encode: while len(ids) >= 2: pair = min(stats, "
         "key=lambda p: self.merges.get(p, float('inf'))); if pair not in self.merges: break", "bpe_tokenize", '''
def bpe_tokenize(word, merges):
    ranks = {}
    for i, pair in enumerate(merges):
        ranks.setdefault(tuple(pair), i)
    ids = list(word) + ["</w>"]
    while len(ids) >= 2:
        stats = {}
        for pair in zip(ids, ids[1:]):
            stats[pair] = stats.get(pair, 0) + 1
        pair = min(stats, key=lambda p: ranks.get(p, float("inf")))
        if pair not in ranks:
            break
        newids, i = [], 0
        while i < len(ids):
            if ids[i] == pair[0] and i < len(ids) - 1 and ids[i + 1] == pair[1]:
                newids.append(pair[0] + pair[1])
                i += 2
            else:
                newids.append(ids[i])
                i += 1
        ids = newids
    return ids
'''),
    Port("subword-nmt apply_bpe encode (v0.2: '</w>' glued, then stripped)",
         "rsennrich/subword-nmt subword_nmt/apply_bpe.py, encode(): word = tuple(orig[:-1]) + (orig[-1] + "
         "'</w>',); ... if word[-1] == '</w>': word = word[:-1]; elif word[-1].endswith('</w>'): strip it",
         "bpe_tokenize", '''
def bpe_tokenize(word, merges):
    bpe_codes = {}
    for i, pair in enumerate(merges):
        bpe_codes.setdefault(tuple(pair), i)
    orig = word
    if len(orig) == 1:
        return [orig]
    word = list(orig[:-1]) + [orig[-1] + "</w>"]
    while len(word) > 1:
        pairs = [(bpe_codes[pair], i, pair) for (i, pair) in enumerate(zip(word, word[1:])) if pair in bpe_codes]
        if not pairs:
            break
        bigram = min(pairs)[2]
        positions = [i for (rank, i, pair) in pairs if pair == bigram]
        i = 0
        new_word = []
        bigram_str = "".join(bigram)
        for j in positions:
            if j < i:
                continue
            new_word.extend(word[i:j])
            new_word.append(bigram_str)
            i = j + 2
        new_word.extend(word[i:])
        word = new_word
    if word[-1] == "</w>":
        word = word[:-1]
    elif word[-1].endswith("</w>"):
        word[-1] = word[-1][:-4]
    return list(word)
''', breach="starts from the last character glued to '</w>' and strips the marker from the result",
         names=MARKER + ("glued", "stripped")),
    Port("d2l segment_BPE (greedy longest match against the symbols)",
         "d2l-ai/d2l-en chapter_natural-language-processing-pretraining/subword-embedding.md, segment_BPE: "
         "segment each token with the longest possible subwords from symbols, else '[UNK]'", "bpe_tokenize", '''
def bpe_tokenize(word, merges):
    symbols = {"</w>"}
    for a, b in merges:
        symbols.update((a, b, a + b))
    symbols.update(word)
    token = word + "</w>"
    start, end = 0, len(token)
    cur_output = []
    while start < len(token) and start < end:
        piece = token[start:end]
        if piece in symbols and not (piece.endswith("<") or piece.endswith("</") or piece.endswith("</w")):
            cur_output.append(piece)
            start = end
            end = len(token)
        else:
            end -= 1
    if start < len(token):
        cur_output.append("[UNK]")
    return cur_output
''', breach="greedy longest match against the learned symbols instead of applying the merges by rank",
         names=("longest", "greedy", "rank", "order of the merges", "lowest")),
    # Written as a breach (each merge replayed once, in list order, instead of the lowest-ranked pair again and
    # again); reclassified as faithful: on merges as returned by train_bpe (the contract's input) the two agree,
    # and no difference turned up on about 140,000 random training corpora. It differs only on hand-made merge
    # lists such as [('x', 'yz'), ('y', 'z')], outside the contract.
    Port("Hugging Face LLM course BPE tokenize (merges replayed in learned order)",
         "huggingface/course chapters/en/chapter6/5.mdx, tokenize(): for pair, merge in merges.items(): "
         "for each split, merge pair[0], pair[1] wherever they are adjacent", "bpe_tokenize", '''
def bpe_tokenize(word, merges):
    split = list(word) + ["</w>"]
    for pair in merges:
        i = 0
        while i < len(split) - 1:
            if split[i] == pair[0] and split[i + 1] == pair[1]:
                split = split[:i] + [pair[0] + pair[1]] + split[i + 2:]
            else:
                i += 1
    return split
'''),
]
