"""Seventh held-out set, graded before any change to the judges.

Ports for notebook 07 (byte-pair encoding), from projects no earlier set used: bpeasy (gautierdag,
Rust: src/lib.rs get_most_frequent_pair), BytePairEncoding.jl (chengchingwen, Julia: src/stats.jl Statistic,
merge_pair!, merged_pairs, learn), Hugging Face transformers FSMT (tokenization_fsmt.py FSMTTokenizer.bpe) and
rust-tokenizers (guillaume-be, Rust: tokenization_utils.rs bpe and group_common_pairs).
"""
from tests.corpus import Port

ASSIGNMENT = "07_bpe"

PORTS = [
    Port(
        name="bpeasy_pair_counts",
        style="gautierdag/bpeasy src/lib.rs, get_most_frequent_pair (for each sentence, windows(2) over its "
              "symbols, local counts += base_counts[i], reduced into global_pair_counts); rayon's par_iter as a "
              "loop, the HashMap as a Counter, the positions map left out",
        cell="pair_counts",
        code=r'''
def pair_counts(word_freqs):
    global_pair_counts = Counter()
    for sentence, base_count in word_freqs.items():
        local_pair_counts = Counter()
        for window in zip(sentence, sentence[1:]):
            current_pair = (window[0], window[1])
            local_pair_counts[current_pair] += base_count
        # Merge the pair counts from all sentences
        for k, v in local_pair_counts.items():
            global_pair_counts[k] += v
    return global_pair_counts
''',
    ),
    Port(
        name="bpe_jl_statistic",
        style="chengchingwen/BytePairEncoding.jl src/stats.jl, Statistic(word_counts, endsym) constructor "
              "(for (index, word_units) in enumerate(vkeys), for pair in bi_pairs(word_units): "
              "pair_freq[pair] = get(pair_freq, pair, 0) + vocab[word_units]), Julia Dicts as Python dicts",
        cell="pair_counts",
        code=r'''
def pair_counts(word_freqs):
    vocab = word_freqs
    vkeys = list(vocab.keys())
    pair_freq = {}
    pair_index = {}
    for index, word_units in enumerate(vkeys):
        for pair in zip(word_units, word_units[1:]):            # bi_pairs(word_units)
            pair_freq[pair] = pair_freq.get(pair, 0) + vocab[word_units]
            indices = pair_index.setdefault(pair, [])
            indices.append(index)
    return pair_freq
''',
        breach="the pair statistics are a plain dict (Julia's Dict{Pair, Int}), not the collections.Counter the "
               "exercise asks for (the counts themselves are right)",
        names=("Counter", "type", "dict"),
    ),
    Port(
        name="bpe_jl_merge_pair",
        style="chengchingwen/BytePairEncoding.jl src/stats.jl, merge_pair! and merged_pairs (only the words whose "
              "pair_index holds the pair are rewritten; delete!(vocab, word_units) then "
              "vocab[new_word_units] = freq), on a copy of the dict instead of the Statistic",
        cell="merge_pair",
        code=r'''
def merge_pair(pair, word_freqs):
    pair = tuple(pair)

    def merged_pairs(bipairs, pair):
        # merge the pair in the word tuple, return the new word units and the indices where merge happened
        bipairs = list(bipairs)
        new_pairs, indice = [], []
        merged = "".join(pair)
        for i, x in enumerate(bipairs):
            if 0 < i and bipairs[i - 1] == pair:
                bipairs[i] = (merged, x[1])
            elif x == pair:
                new_pairs.append(merged)
                indice.append(i)
                continue
            else:
                new_pairs.append(x[0])
            if i == len(bipairs) - 1:
                new_pairs.append(x[1])
        return tuple(new_pairs), indice

    vocab = dict(word_freqs)
    vkeys = list(vocab.keys())
    pair_index = [index for index, units in enumerate(vkeys) if pair in zip(units, units[1:])]
    # might have duplicate index because one word can have more than one occurence of a pair
    for index in dict.fromkeys(pair_index):
        word_units = vkeys[index]
        freq = vocab[word_units]
        del vocab[word_units]   # pair would be merged, this word units (w/o merged) doesn't exist anymore
        bipairs = list(zip(word_units, word_units[1:]))
        new_word_units, merged_indices = merged_pairs(bipairs, pair)
        vkeys[index] = new_word_units        # update the word units to the new one (w/ merged)
        vocab[new_word_units] = freq         # set the frequency
    return vocab
''',
        breach="when a merged word becomes equal to another word, BytePairEncoding.jl sets its count "
               "(vocab[new_word_units] = freq) instead of adding the two counts, so one of them is lost",
        names=("add", "sum", "equal", "count", "overwrit", "collid", "lost"),
    ),
    Port(
        name="bpe_jl_learn",
        style="chengchingwen/BytePairEncoding.jl src/learn.jl and src/stats.jl, learn(word_counts, n_merge, "
              "endsym, min_freq = 10) with BPELearner's endsym = \"</w>\" (bpe_units glues the end symbol to the "
              "last unit), most_freq_pair = argmax(stats) (the first maximum met), stats[pair] < min_freq && "
              "break; the merging_rank Dict returned as the list in rank order; the notebook's pair_counts and "
              "merge_pair for the Statistic updates",
        cell="train_bpe",
        code=r'''
def train_bpe(corpus, num_merges, endsym="</w>", min_freq=10):
    word_counts = Counter(corpus.split())
    # Statistic(word_counts, endsym): the units of each word, the end symbol on the last one
    vocab = {tuple(word[:-1]) + (word[-1] + endsym,): freq for word, freq in word_counts.items()}
    merging_rank = []
    for i in range(num_merges):
        stats = pair_counts(vocab)
        most_freq_pair = max(stats, key=stats.get)       # argmax(stats.pair_freq)
        if stats[most_freq_pair] < min_freq:
            break
        vocab = merge_pair(most_freq_pair, vocab)
        merging_rank.append(most_freq_pair)
    return merging_rank
''',
        breach="three conventions of BytePairEncoding.jl's learner: the end-of-word marker is glued to the last "
               "character ('w</w>'), not a separate '</w>' symbol; training stops as soon as the best pair occurs "
               "fewer than min_freq = 10 times (the classic corpus gives no merge at all); ties go to the first "
               "maximum met, not the smallest pair, and an empty corpus raises",
        names=("</w>", "marker", "min_freq", "frequency", "fewer", "stops", "tie", "smallest", "empty"),
    ),
    Port(
        name="fsmt_bpe",
        style="huggingface/transformers src/transformers/models/fsmt/tokenization_fsmt.py, FSMTTokenizer.bpe "
              "(word = tuple(token[:-1]) + (token[-1] + '</w>',), get_pairs, min over bpe_ranks, the index-scan "
              "merge), the cache left out and the ' '.join / split pair replaced by the list",
        cell="bpe_tokenize",
        code=r'''
def bpe_tokenize(word, merges):
    bpe_ranks = dict(zip([tuple(m) for m in merges], range(len(merges))))

    def get_pairs(word):
        pairs = set()
        prev_char = word[0]
        for char in word[1:]:
            pairs.add((prev_char, char))
            prev_char = char
        return pairs

    token = word
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
        word = new_word
        if len(word) == 1:
            break
        else:
            pairs = get_pairs(word)
    return list(word)
''',
        breach="FSMT (like XLM and OpenAI GPT) glues '</w>' to the last character: 'low' starts as "
               "('l', 'o', 'w</w>'), so merges learned with a separate '</w>' such as ('w', '</w>') or "
               "('est', '</w>') never apply and the pieces differ",
        names=("</w>", "marker", "end-of-word", "separate", "last character", "glued"),
    ),
    Port(
        name="rust_tokenizers_bpe",
        style="guillaume-be/rust-tokenizers main/src/tokenizer/tokenization_utils.rs, bpe and group_common_pairs "
              "(min_by_key over the word's pairs by rank, i64::MAX when absent; scan with position() for "
              "byte_1; stop when no known pair is left or one token remains); the word starts as its characters "
              "and a separate '</w>', as the exercise asks; the BpePairVocab HashMap as a dict",
        cell="bpe_tokenize",
        code=r'''
def bpe_tokenize(word, merges):
    bpe_ranks = {}
    for index, (byte_1, byte_2) in enumerate(merges):     # BpePairVocab: data.insert((t0, t1), index)
        bpe_ranks[(byte_1, byte_2)] = index

    def get_pairs(token):
        if len(token) < 2:
            return None
        return {(token[idx], token[idx + 1]) for idx in range(len(token) - 1)}

    def group_common_pairs(tokens):
        pairs = get_pairs(tokens)
        if pairs is None:
            return tokens, True
        bigram = min(pairs, key=lambda pair: bpe_ranks.get(pair, 2 ** 63 - 1))
        if bigram not in bpe_ranks:
            return tokens, True
        byte_1, byte_2 = bigram
        temp_sub_tokens = []
        i = 0
        while i < len(tokens):
            rest = tokens[i:]
            if byte_1 in rest:
                j = rest.index(byte_1) + i
            else:
                temp_sub_tokens.extend(tokens[i:])
                break
            temp_sub_tokens.extend(tokens[i:j])
            i = j
            if tokens[i] == byte_1 and i < len(tokens) - 1:
                if tokens[i + 1] == byte_2:
                    temp_sub_tokens.append(byte_1 + byte_2)
                    i += 2
                else:
                    temp_sub_tokens.append(byte_1)
                    i += 1
            else:
                temp_sub_tokens.append(byte_1)
                i += 1
        if len(temp_sub_tokens) == 1:
            return temp_sub_tokens, True
        return temp_sub_tokens, False

    sub_tokens = [c for c in word] + ["</w>"]
    output = (sub_tokens, False)
    while True:
        output = group_common_pairs(output[0])
        if output[1]:
            break
    return output[0]
''',
    ),
]
