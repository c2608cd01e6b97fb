"""Fifth held-out set, notebook 07: OpenNMT Tokenizer (BPELearner), YouTokenToMe, Stanford CS336 assignment 1,
OpenAI finetune-transformer-lm (text_utils.TextEncoder.bpe)."""
from tests.corpus import Port

ASSIGNMENT = "07_bpe"

PORTS = [
    Port(
        "OpenNMT Tokenizer get_pair_statistics",
        "OpenNMT/Tokenizer, src/BPELearner.cc: get_pair_statistics (for each word, for j in 1..len-1: "
        "stats[(word[j-1], word[j])] += freq)",
        "pair_counts",
        r'''
def pair_counts(word_freqs):
    stats = Counter()
    for word, freq in word_freqs.items():
        for j in range(1, len(word)):
            pair = (word[j - 1], word[j])
            stats[pair] += freq
    return stats
''',
    ),
    Port(
        "YouTokenToMe learn_bpe_slow pair counting: runs of one symbol counted without overlap",
        "VKCOM/YouTokenToMe, tests/unit_tests/stress_test.cpp: learn_bpe_slow (local_cnt[{v[i], v[i+1]}]++; "
        "if v[i] == v[i+1] == v[i+2] skip one position)",
        "pair_counts",
        r'''
def pair_counts(word_freqs):
    local_cnt = Counter()
    for v, freq in word_freqs.items():
        i = 0
        while i < len(v) - 1:
            local_cnt[(v[i], v[i + 1])] += freq
            if v[i] == v[i + 1] and i + 2 < len(v) and v[i] == v[i + 2]:
                i += 1
            i += 1
    return local_cnt
''',
        breach="inside a run of one repeated symbol the pairs are counted without overlap (how many times it "
               "could be merged): ('a', 'a', 'a') holds ('a', 'a') once, the notebook counts every position (twice)",
        names=("overlap", "twice", "run", "repeated symbol", "every position", "aaa", "'a', 'a', 'a'",
               "non-overlapping"),
    ),
    Port(
        "YouTokenToMe merge: replace x y by z scanning left to right",
        "VKCOM/YouTokenToMe, tests/unit_tests/stress_test.cpp: learn_bpe_slow merge loop "
        "(if v[i] == x && v[i+1] == y: v[i] = z; erase(v[i+1])), on a copy of each word",
        "merge_pair",
        r'''
def merge_pair(pair, word_freqs):
    x, y = pair
    z = x + y
    merged = {}
    for word, freq in word_freqs.items():
        v = list(word)
        i = 0
        while i < len(v) - 1:
            if v[i] == x and v[i + 1] == y:
                v[i] = z
                del v[i + 1]
            i += 1
        key = tuple(v)
        merged[key] = merged.get(key, 0) + freq
    return merged
''',
    ),
    Port(
        "OpenNMT Tokenizer replace_pair: the vocabulary is rewritten in place",
        "OpenNMT/Tokenizer, src/BPELearner.cc: replace_pair (word = sorted_vocab[j].second rewritten in place: "
        "word[h] += B; erase(h + 1)), only the words indexed for the pair",
        "merge_pair",
        r'''
def merge_pair(pair, word_freqs):
    A, B = pair
    changes = []
    for word, freq in list(word_freqs.items()):
        if not any(word[h] == A and word[h + 1] == B for h in range(len(word) - 1)):   # indices[pair]
            continue
        w = list(word)
        h = 0
        while h < len(w) - 1:
            if w[h] == A and w[h + 1] == B:
                w[h] += B
                del w[h + 1]
            h += 1
        changes.append((word, tuple(w), freq))
    for old, new, freq in changes:       # sorted_vocab is updated in place
        del word_freqs[old]
        word_freqs[new] = word_freqs.get(new, 0) + freq
    return word_freqs
''',
        breach="the argument is changed: merged words are deleted from and re-inserted into word_freqs itself, "
               "which is returned instead of a new dict",
        names=("in place", "in-place", "mutat", "modif", "new dict", "copy", "side effect", "not changed",
               "unchanged", "changes the input", "changed the input", "the argument"),
    ),
    Port(
        "CS336 BPE training: ties go to the lexicographically greater pair",
        "Stanford CS336 assignment 1 spec ('deterministically break ties in pair frequency by preferring the "
        "lexicographically greater pair'), as in max(pair_freqs.items(), key=lambda x: (x[1], x[0]))",
        "train_bpe",
        r'''
def train_bpe(corpus, num_merges):
    word_freqs = dict(Counter(tuple(word) + ("</w>",) for word in corpus.split()))
    merges = []
    for _ in range(num_merges):
        pair_freqs = pair_counts(word_freqs)
        if not pair_freqs:
            break
        # For ties in frequency, prefer the lexicographically greater pair
        best_pair = max(pair_freqs.items(), key=lambda x: (x[1], x[0]))[0]
        merges.append(best_pair)
        word_freqs = merge_pair(best_pair, word_freqs)
    return merges
''',
        breach="ties are broken towards the lexicographically greatest pair instead of the smallest",
        names=("tie", "lexicographic", "greatest", "greater", "largest", "smallest"),
    ),
    Port(
        "YouTokenToMe decode_slow: every rule applied in learned order",
        "VKCOM/YouTokenToMe, tests/unit_tests/stress_test.cpp: decode_slow (for rule in rules: for each word, "
        "merge x y -> z left to right); '</w>' as the end marker for the course API",
        "bpe_tokenize",
        r'''
def bpe_tokenize(word, merges):
    v = list(word) + ["</w>"]
    for x, y in merges:
        i = 0
        while i + 1 < len(v):
            if v[i] == x and v[i + 1] == y:
                v[i] = x + y
                del v[i + 1]
            i += 1
    return v
''',
    ),
    Port(
        "OpenAI GPT TextEncoder.bpe: '</w>' glued to the last character",
        "openai/finetune-transformer-lm, text_utils.py: TextEncoder.bpe (word = tuple(token[:-1]) + "
        "(token[-1] + '</w>',); lowest-rank bigram merged until none is known)",
        "bpe_tokenize",
        r'''
def get_pairs(word):
    pairs = set()
    prev_char = word[0]
    for char in word[1:]:
        pairs.add((prev_char, char))
        prev_char = char
    return pairs


def bpe_tokenize(token, merges):
    bpe_ranks = dict(zip([tuple(m) for m in merges], range(len(merges))))
    word = tuple(token[:-1]) + (token[-1] + "</w>",)
    pairs = get_pairs(word)
    if not pairs:
        return [token + "</w>"]
    while True:
        bigram = min(pairs, key=lambda pair: bpe_ranks.get(pair, float("inf")))
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
            except ValueError:
                new_word.extend(word[i:])
                break
            if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                new_word.append(first + second)
                i += 2
            else:
                new_word.append(word[i])
                i += 1
        word = tuple(new_word)
        if len(word) == 1:
            break
        pairs = get_pairs(word)
    return list(word)
''',
        breach="the word starts as its characters with '</w>' attached to the last one ('l', 'o', 'w</w>'), not "
               "as a separate symbol, so merges such as ('w', '</w>') learned by train_bpe never apply",
        names=("</w>", "end-of-word", "end of word", "marker", "last character", "separate symbol", "attached",
               "glued"),
    ),
]
