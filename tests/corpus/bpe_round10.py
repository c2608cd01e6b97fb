"""Tenth held-out set, notebook 07: ports of darthchudi/bpe-tokenizer-py, Linhengyang/aiml and insung3511/torch-study,
each read at its source."""
from tests.corpus import Port

ASSIGNMENT = "07_bpe"

PORTS = [
    Port("darthchudi_pair_stats", "darthchudi/bpe-tokenizer-py tokenizer.py BPETokenizer.get_corpus_pair_stats "
         "(for word, word_bytes in word_lookup_table.items(): pair_stats[word_bytes[i], word_bytes[i + 1]] += 1)",
         "pair_counts", r'''
def pair_counts(word_freqs):
    import collections
    pair_stats = collections.defaultdict(int)
    for word_bytes in word_freqs:
        # Count the frequency of each byte-pair in the word.
        for i in range(len(word_bytes) - 1):
            pair_stats[word_bytes[i], word_bytes[i + 1]] += 1
    return Counter(pair_stats)
''', breach="each distinct word adds 1 per pair, whatever its count: the pair counts are not weighted by the word "
            "frequencies",
         names=("weight", "frequenc", "freq", "+= 1", "occurs", "count of the word")),
    Port("linhengyang_pair_freq", "Linhengyang/aiml Code/Utils/Text/BytePairEncoding.py get_maxfreq_token_pair "
         "(token_pair_freq = defaultdict(int); for tokcombo, freq: tokens = tokcombo.split(); "
         "token_pair_freq[(tokens[i], tokens[i+1])] += freq)", "pair_counts", r'''
def pair_counts(word_freqs):
    import collections
    token_pair_freq = collections.defaultdict(int)
    for tokens, freq in word_freqs.items():
        num_tok = len(tokens)   # a single token has nothing to merge: the loop does not run
        for i in range(num_tok - 1):
            token_pair_freq[(tokens[i], tokens[i + 1])] += freq
    return Counter(token_pair_freq)
'''),
    Port("insung_merge_vocab", "insung3511/torch-study arc/torch-study-backup/nlp/bpe.py merge_vocab "
         "(bigram = re.escape(' '.join(pair)); p = re.compile(r\"(?<!\\\\S)\" + bigram + r\"(?!\\\\S)\"): in a raw "
         "string the doubled backslash makes the guards look for a literal backslash)", "merge_pair", r'''
def merge_pair(pair, word_freqs):
    import re
    v_out = {}
    bigram = re.escape(" ".join(pair))
    p = re.compile(r"(?<!\\S)" + bigram + r"(?!\\S)")
    for word in word_freqs:
        w_out = p.sub("".join(pair), " ".join(word))
        key = tuple(w_out.split(" "))
        v_out[key] = v_out.get(key, 0) + word_freqs[word]
    return v_out
''', breach="the boundary guards (?<!\\\\S) and (?!\\\\S) in a raw string test for a literal backslash, not for "
            "whitespace, so the bigram 'a b' also matches inside longer symbols ('xa b', 'a by'): pairs are merged "
            "across the inside of symbols, not only on symbol boundaries",
         names=("boundar", "inside", "regex", "backslash", "part of a symbol", "lookbehind")),
    Port("darthchudi_merge", "darthchudi/bpe-tokenizer-py tokenizer.py BPETokenizer.merge_byte_pair_in_corpus "
         "(while i < len(word_bytes) - 1: if (word_bytes[i], word_bytes[i + 1]) == pair: "
         "word_bytes = word_bytes[:i] + [pair_str] + word_bytes[i + 2:] else: i += 1)", "merge_pair", r'''
def merge_pair(pair, word_freqs):
    max_pair_in_corpus = tuple(pair)
    max_pair_in_corpus_str = "".join(max_pair_in_corpus)
    merged = {}
    for word, freq in word_freqs.items():
        word_bytes = list(word)
        i = 0
        while i < len(word_bytes) - 1:
            pair_key = (word_bytes[i], word_bytes[i + 1])
            if pair_key == max_pair_in_corpus:
                # Replace the bytes with the byte-pair token
                word_bytes = word_bytes[:i] + [max_pair_in_corpus_str] + word_bytes[i + 2:]
            else:
                # Increment the pointer, so we evaluate the next byte-pair
                i += 1
        key = tuple(word_bytes)
        merged[key] = merged.get(key, 0) + freq
    return merged
'''),
    Port("linhengyang_greedy_segment", "Linhengyang/aiml Code/Utils/Text/BytePairEncoding.py segment_word_BPE_greedy "
         "(word += EOW_token; while start < end: fragment = word[start:end]; if fragment in symbols: keep it, "
         "start = end, end = length; else end -= 1): longest match against the glossary of symbols", "bpe_tokenize", r'''
def bpe_tokenize(word, merges):
    EOW_token = "</w>"
    # the glossary: the characters, the end-of-word token and every merged symbol
    symbols = set(word) | {EOW_token} | {a + b for a, b in merges}
    word = word + EOW_token
    length = len(word)
    start, end, segmented = 0, length, []
    while start < end:
        fragment = word[start:end]
        if fragment in symbols:
            segmented.append(fragment)
            start = end
            end = length
        else:
            end -= 1
    return segmented
''', breach="segments the word greedily by the longest glossary symbol from the left instead of applying the learned "
            "merges by rank, so it can give symbols the merges never build in that word",
         names=("greedy", "longest", "rank", "order of the merges", "vocabulary lookup", "left to right")),
]
