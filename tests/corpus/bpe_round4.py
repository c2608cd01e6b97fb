"""Fourth held-out set, notebook 07: GPT-2 encoder.py, d2l, tiktoken educational, HF LLM course, subword-nmt,
Google BERT WordPiece."""
from . import Port

ASSIGNMENT = "07_bpe"

TIES = ("lexicograph", "tie", "smallest pair", "alphabetical")

PORTS = [
    Port("OpenAI gpt-2 encoder.py get_pairs (a set of pairs per word), weighted by the word's frequency",
         "openai/gpt-2 src/encoder.py, get_pairs(word): pairs = set(); prev_char = word[0]; for char in word[1:]: "
         "pairs.add((prev_char, char)); prev_char = char; return pairs (each pair of the set counted freq times)",
         "pair_counts", '''
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


def pair_counts(word_freqs):
    counts = Counter()
    for word, freq in word_freqs.items():
        for pair in get_pairs(word):
            counts[pair] += freq
    return counts
''', breach="get_pairs returns a set, so a pair that occurs several times inside one word (overlapping or not) is "
            "counted once per word instead of once per position",
         names=("overlap", "twice", "once", "every position", "repeat")),
    Port("d2l get_max_freq_pair counting loop (pairs[symbols[i], symbols[i + 1]] += freq)",
         "d2l-ai/d2l-en chapter_natural-language-processing-pretraining/subword-embedding.md, get_max_freq_pair: "
         "pairs = collections.defaultdict(int); for token, freq in token_freqs.items(): symbols = token.split(); "
         "for i in range(len(symbols) - 1): pairs[symbols[i], symbols[i + 1]] += freq (the counts returned, in a "
         "Counter, as the course asks; words are tuples already)", "pair_counts", '''
def pair_counts(word_freqs):
    pairs = Counter()
    for token, freq in word_freqs.items():
        symbols = token
        for i in range(len(symbols) - 1):
            # Key of `pairs` is a tuple of two consecutive symbols
            pairs[symbols[i], symbols[i + 1]] += freq
    return pairs
'''),
    Port("tiktoken _educational.bpe_train merge step (new_word built with i += 2 on a match, last symbol appended)",
         "openai/tiktoken tiktoken/_educational.py, bpe_train: new_words = []; for word in words: new_word = []; "
         "i = 0; while i < len(word) - 1: if (word[i], word[i + 1]) == most_common_pair: new_word.append(token); "
         "i += 2 else: new_word.append(word[i]); i += 1; if i == len(word) - 1: new_word.append(word[i]) "
         "(over the keys of word_freqs, counts added)", "merge_pair", '''
def merge_pair(pair, word_freqs):
    most_common_pair = pair
    token = pair[0] + pair[1]
    new_words = {}
    for word, freq in word_freqs.items():
        new_word = []
        i = 0
        while i < len(word) - 1:
            if (word[i], word[i + 1]) == most_common_pair:
                # We found our pair! Merge it
                new_word.append(token)
                i += 2
            else:
                new_word.append(word[i])
                i += 1
        if i == len(word) - 1:
            new_word.append(word[i])
        new_words[tuple(new_word)] = new_words.get(tuple(new_word), 0) + freq
    return new_words
'''),
    Port("Hugging Face LLM course merge_pair(a, b, splits) (split = split[:i] + [a + b] + split[i + 2:], "
         "splits updated in place and returned)",
         "huggingface/course chapters/en/chapter6/5.mdx (Byte-Pair Encoding tokenization), merge_pair: for word in "
         "word_freqs: split = splits[word]; ... while i < len(split) - 1: if split[i] == a and split[i + 1] == b: "
         "split = split[:i] + [a + b] + split[i + 2:] else: i += 1; splits[word] = split; return splits (here "
         "the dict of the course is the splits)", "merge_pair", '''
def merge_pair(pair, word_freqs):
    a, b = pair
    splits = word_freqs
    for word in list(splits):
        split = list(word)
        if len(split) == 1:
            continue
        i = 0
        while i < len(split) - 1:
            if split[i] == a and split[i + 1] == b:
                split = split[:i] + [a + b] + split[i + 2:]
            else:
                i += 1
        if tuple(split) != word:
            freq = splits.pop(word)
            splits[tuple(split)] = splits.get(tuple(split), 0) + freq
    return splits
''', breach="updates the dict it is given in place (the course's splits) and returns it, instead of building a new "
            "dict and leaving word_freqs unchanged",
         names=("new dict", "in place", "mutat", "changes its argument", "modif", "its argument")),
    Port("tiktoken _educational.bpe_train choice (most_common_pair = max(stats, key=lambda x: stats[x]))",
         "openai/tiktoken tiktoken/_educational.py, bpe_train: most_common_pair = max(stats, key=lambda x: stats[x]) "
         "(a tie goes to the pair counted first); the course's stop when no pair is left added (tiktoken loops "
         "until vocab_size)", "train_bpe", '''
def train_bpe(corpus, num_merges):
    word_freqs = dict(Counter(tuple(word) + ("</w>",) for word in corpus.split()))
    merges = []
    while len(merges) < num_merges:
        # Find the most common pair. This will become our next token
        stats = pair_counts(word_freqs)
        if not stats:
            break
        most_common_pair = max(stats, key=lambda x: stats[x])
        merges.append(most_common_pair)
        word_freqs = merge_pair(most_common_pair, word_freqs)
    return merges
''', breach="on a tie the pair counted first wins (max keeps the first maximum), not the lexicographically "
            "smallest pair", names=TIES),
    Port("subword-nmt learn_bpe main loop (max(stats, key=lambda x: (stats[x], x)), stop when the best pair has "
         "frequency < min_frequency = 2)",
         "rsennrich/subword-nmt subword_nmt/learn_bpe.py, learn_bpe(..., min_frequency=2): most_frequent = "
         "max(stats, key=lambda x: (stats[x], x)); if stats[most_frequent] < min_frequency: sys.stderr.write('no "
         "pair has frequency >= {0}. Stopping'); break (words with the course's separate '</w>'; the course's "
         "pair_counts / merge_pair in place of the incremental statistics)", "train_bpe", '''
def train_bpe(corpus, num_merges, min_frequency=2):
    vocab = dict(Counter(tuple(word) + ("</w>",) for word in corpus.split()))
    merges = []
    for i in range(num_merges):
        stats = pair_counts(vocab)
        if not stats:
            break
        most_frequent = max(stats, key=lambda x: (stats[x], x))
        if stats[most_frequent] < min_frequency:
            break  # no pair has frequency >= min_frequency. Stopping
        merges.append(most_frequent)
        vocab = merge_pair(most_frequent, vocab)
    return merges
''', breach="stops as soon as the best pair occurs fewer than min_frequency = 2 times (pairs seen once are never "
            "merged), and breaks ties towards the lexicographically largest pair",
         names=TIES + ("min_frequency", "count 1", "count of 1", "once", "stops early", "stopped early")),
    Port("Google BERT tokenization.WordpieceTokenizer.tokenize (greedy longest-match-first)",
         "google-research/bert tokenization.py, WordpieceTokenizer.tokenize: while start < len(chars): end = "
         "len(chars); while start < end: substr = ''.join(chars[start:end]); if substr in self.vocab: cur_substr = "
         "substr; break; end -= 1; sub_tokens.append(cur_substr); start = end (the vocabulary: the characters and "
         "the merged symbols; no '##', the word ends with '</w>'; a character outside the vocabulary kept alone "
         "instead of [UNK])", "bpe_tokenize", '''
def bpe_tokenize(word, merges):
    vocab = set()
    for a, b in merges:
        vocab.update((a, b, a + b))
    chars = list(word) + ["</w>"]
    sub_tokens = []
    start = 0
    while start < len(chars):
        end = len(chars)
        cur_substr = None
        while start < end:
            substr = "".join(chars[start:end])
            if substr in vocab:
                cur_substr = substr
                break
            end -= 1
        if cur_substr is None:
            cur_substr, end = chars[start], start + 1
        sub_tokens.append(cur_substr)
        start = end
    return sub_tokens
''', breach="greedy longest match against the vocabulary (WordPiece), not the merges replayed by rank",
         names=("longest", "rank", "learned first", "order", "wordpiece")),
    Port("tiktoken _educational.bpe_encode (lowest rank of parts[i] + parts[i + 1] looked up in mergeable_ranks, "
         "one merge per pass)",
         "openai/tiktoken tiktoken/_educational.py, bpe_encode(mergeable_ranks, input): parts = [bytes([b]) for b "
         "in input]; while True: for i, pair in enumerate(zip(parts[:-1], parts[1:])): rank = mergeable_ranks.get("
         "pair[0] + pair[1]); keep the min; if min_rank is None: break; parts = parts[:min_idx] + [parts[min_idx] + "
         "parts[min_idx + 1]] + parts[min_idx + 2:] (mergeable_ranks built from merges as {a + b: rank}; str for "
         "bytes; '</w>' appended)", "bpe_tokenize", '''
def bpe_tokenize(word, merges):
    mergeable_ranks = {}
    for rank, (a, b) in enumerate(merges):
        mergeable_ranks.setdefault(a + b, rank)
    parts = list(word) + ["</w>"]
    while True:
        min_idx = None
        min_rank = None
        for i, pair in enumerate(zip(parts[:-1], parts[1:])):
            rank = mergeable_ranks.get(pair[0] + pair[1])
            if rank is not None and (min_rank is None or rank < min_rank):
                min_idx = i
                min_rank = rank
        if min_rank is None:
            break
        assert min_idx is not None
        parts = parts[:min_idx] + [parts[min_idx] + parts[min_idx + 1]] + parts[min_idx + 2:]
    return parts
''', breach="ranks are looked up by the merged string (tiktoken's token bytes), so two symbols that spell a learned "
            "token merge even when that pair of symbols was never learned",
         names=("string", "symbols", "spell", "concatenat")),
]
