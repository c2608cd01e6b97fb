"""Held-out set 3 (round 3), notebook 07: pair_counts, merge_pair, train_bpe, bpe_tokenize."""
from . import Port

ASSIGNMENT = "07_bpe"

TIES = ("lexicograph", "tie", "smallest pair", "alphabetical")

PORTS = [
    # --- pair_counts ---------------------------------------------------------------------------------------
    Port("fastBPE count_in_word (cur_pair shifted along the word, count added per pair)",
         "glample/fastBPE fastBPE/fastBPE.hpp, count_in_word(word, wi, count, pair_counts, ...): bool second = "
         "false; for (token : word) { if (second) cur_pair.first = cur_pair.second; cur_pair.second = token; if "
         "(second) pair_counts[cur_pair]->first += count; else second = true; } (the unordered_map of pair counts "
         "held in the Counter the course asks for)",
         "pair_counts", '''
from collections import Counter


def count_in_word(word, count, pair_counts):
    second = False
    cur_pair = [None, None]
    for token in word:
        if second:
            cur_pair[0] = cur_pair[1]
        cur_pair[1] = token
        if second:
            pair_counts[tuple(cur_pair)] += count
        else:
            second = True


def pair_counts(word_freqs):
    counts = Counter()
    for word, count in word_freqs.items():
        count_in_word(word, count, counts)
    return counts
'''),

    Port("Hugging Face LLM course compute_pair_freqs (a defaultdict(int))",
         "huggingface/course chapters/en/chapter6/5.mdx (Byte-Pair Encoding tokenization), compute_pair_freqs("
         "splits): pair_freqs = defaultdict(int); for word, freq in word_freqs.items(): split = splits[word]; if "
         "len(split) == 1: continue; for i in range(len(split) - 1): pair_freqs[(split[i], split[i + 1])] += freq; "
         "return pair_freqs (the splits are the words' symbol tuples)",
         "pair_counts", '''
from collections import defaultdict


def pair_counts(word_freqs):
    splits = {word: list(word) for word in word_freqs}
    pair_freqs = defaultdict(int)
    for word, freq in word_freqs.items():
        split = splits[word]
        if len(split) == 1:
            continue
        for i in range(len(split) - 1):
            pair = (split[i], split[i + 1])
            pair_freqs[pair] += freq
    return pair_freqs
''', breach="returns a defaultdict(int), not the collections.Counter the course asks for",
         names=("counter",)),

    # --- merge_pair ----------------------------------------------------------------------------------------
    Port("LLMs-from-scratch BPETokenizerSimple.replace_pair (a deque, popleft)",
         "rasbt/LLMs-from-scratch ch02/05_bpe-from-scratch/bpe-from-scratch.ipynb, replace_pair(token_id_sequences, "
         "pair_id, new_id): for each sequence dq = deque(token_ids); while dq: current = dq.popleft(); if dq and "
         "(current, dq[0]) == pair_id: replaced.append(new_id); dq.popleft() else replaced.append(current) (the "
         "new symbol is a + b; merged words gathered in a new dict with their counts added)",
         "merge_pair", '''
from collections import deque


def merge_pair(pair, word_freqs):
    pair_id = tuple(pair)
    new_id = pair[0] + pair[1]
    merged = {}
    for token_ids, freq in word_freqs.items():
        dq = deque(token_ids)
        replaced = []
        while dq:
            current = dq.popleft()
            if dq and (current, dq[0]) == pair_id:
                replaced.append(new_id)
                # Remove the 2nd token of the pair, 1st was already removed
                dq.popleft()
            else:
                replaced.append(current)
        word = tuple(replaced)
        merged[word] = merged.get(word, 0) + freq
    return merged
'''),

    # --- train_bpe -----------------------------------------------------------------------------------------
    Port("Hugging Face LLM course BPE training loop (max_freq < freq: the first pair counted wins a tie)",
         "huggingface/course chapters/en/chapter6/5.mdx: while len(vocab) < vocab_size: pair_freqs = "
         "compute_pair_freqs(splits); best_pair = ''; max_freq = None; for pair, freq in pair_freqs.items(): if "
         "max_freq is None or max_freq < freq: best_pair = pair; max_freq = freq; splits = merge_pair(*best_pair, "
         "splits); merges[best_pair] = ... (num_merges steps instead of a vocabulary size; the course's words; "
         "an empty count ends the loop, as the course asks)",
         "train_bpe", '''
from collections import Counter


def train_bpe(corpus, num_merges):
    word_freqs = dict(Counter(tuple(word) + ("</w>",) for word in corpus.split()))
    merges = []
    for _ in range(num_merges):
        pair_freqs = pair_counts(word_freqs)
        if not pair_freqs:
            break
        best_pair = ""
        max_freq = None
        for pair, freq in pair_freqs.items():
            if max_freq is None or max_freq < freq:
                best_pair = pair
                max_freq = freq
        word_freqs = merge_pair(best_pair, word_freqs)
        merges.append(best_pair)
    return merges
''', breach="ties go to the pair counted first (the first word that contains it), not to the lexicographically "
            "smallest pair",
         names=TIES + ("first",)),

    Port("fastBPE learnbpe / find_maxp (ties to the smallest pair of token ids, ids by first appearance)",
         "glample/fastBPE fastBPE/fastBPE.hpp: tokenize() gives every new symbol the next id (int_to_token) as "
         "the words are read; learnbpe: new_token_id = int_to_token.size() for each merge; find_maxp: if "
         "(x.first > max_c) {...} else if (x.first == max_c and x.second < maxp) maxp = x.second, comparing pairs "
         "of ids (the course's separate '</w>' instead of fastBPE's glued one; pair counts recomputed each step "
         "instead of updated; stops when no pair is left, as the course asks)",
         "train_bpe", '''
from collections import Counter


def train_bpe(corpus, num_merges):
    word_count = Counter(corpus.split())
    token_to_int, int_to_token = {}, []
    words, counts = [], []
    for word, count in word_count.items():
        current_word = []
        for token in list(word) + ["</w>"]:
            if token not in token_to_int:
                int_to_token.append(token)
                token_to_int[token] = len(int_to_token) - 1
            current_word.append(token_to_int[token])
        words.append(current_word)
        counts.append(count)

    merges = []
    for _ in range(num_merges):
        contiguous_counts = {}
        for word, count in zip(words, counts):
            for pair in zip(word, word[1:]):
                contiguous_counts[pair] = contiguous_counts.get(pair, 0) + count
        # find_maxp
        max_c, max_p = 0, None
        for pair, c in contiguous_counts.items():
            if c > max_c:
                max_c, max_p = c, pair
            elif c == max_c and pair < max_p:
                max_p = pair
        if max_c == 0:
            break
        new_token = int_to_token[max_p[0]] + int_to_token[max_p[1]]
        merges.append((int_to_token[max_p[0]], int_to_token[max_p[1]]))
        new_token_id = len(int_to_token)
        int_to_token.append(new_token)
        token_to_int[new_token] = new_token_id
        for wi, word in enumerate(words):
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == max_p:
                    out.append(new_token_id)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            words[wi] = out
    return merges
''', breach="ties go to the pair with the smallest symbol ids (ids in order of first appearance, merged symbols "
            "numbered as they are made), not to the lexicographically smallest pair of strings",
         names=TIES + ("id",)),

    # --- bpe_tokenize --------------------------------------------------------------------------------------
    Port("fastBPE applybpe process_bpe (lowest-rank pair, then every occurrence merged left to right)",
         "glample/fastBPE fastBPE/fastBPE.hpp, readCodes: codes[pair] = codes.size() (asserting no duplicate); "
         "process_bpe: while subwords.size() > 1: find the pair with the smallest rank (bestPair->second > "
         "pairRank); if none, break; rebuild newSubwords merging every occurrence of that pair with the "
         "justMerged flag (the course's separate '</w>' instead of the glued one; no '@@' output)",
         "bpe_tokenize", '''
def bpe_tokenize(word, merges):
    codes = {}
    for pair in merges:
        pair = tuple(pair)
        assert pair not in codes
        codes[pair] = len(codes)
    subwords = list(word) + ["</w>"]
    # merge subWords as much as possible
    while len(subwords) > 1:
        # find the best pair
        bestPairId, bestPair, bestRank = -1, None, None
        for i in range(len(subwords) - 1):
            pair = (subwords[i], subwords[i + 1])
            pairRank = codes.get(pair, -1)
            if pairRank >= 0 and (bestPairId == -1 or bestRank > pairRank):
                bestPair, bestRank, bestPairId = pair, pairRank, i
        # if we cannot merge anything, stop
        if bestPairId == -1:
            break
        # otherwise, merge subWords
        justMerged = False
        newSubwords = []
        for i in range(len(subwords)):
            if (i + 1 < len(subwords)) and (not justMerged) and subwords[i] == bestPair[0] \\
                    and subwords[i + 1] == bestPair[1]:
                newSubwords.append(subwords[i] + subwords[i + 1])
                justMerged = True
            else:
                if not justMerged:
                    newSubwords.append(subwords[i])
                justMerged = False
        subwords = newSubwords
    return subwords
'''),

    Port("LLMs-from-scratch tokenize_with_bpe without GPT-2 ranks (passes merging any known pair from the left)",
         "rasbt/LLMs-from-scratch ch02/05_bpe-from-scratch/bpe-from-scratch.ipynb, "
         "BPETokenizerSimple.tokenize_with_bpe, branch 'If we haven't loaded OpenAI's GPT-2 merges, use my "
         "approach': while can_merge: one pass from the left, a pair found in self.bpe_merges is merged and i += 2, "
         "else the token is kept; repeat until a pass merges nothing (the course's characters plus '</w>' instead "
         "of token ids; no vocabulary check, the course passes merges only)",
         "bpe_tokenize", '''
def bpe_tokenize(word, merges):
    bpe_merges = {tuple(pair): pair[0] + pair[1] for pair in merges}
    token_ids = list(word) + ["</w>"]
    can_merge = True
    while can_merge and len(token_ids) > 1:
        can_merge = False
        new_tokens = []
        i = 0
        while i < len(token_ids) - 1:
            pair = (token_ids[i], token_ids[i + 1])
            if pair in bpe_merges:
                merged_token_id = bpe_merges[pair]
                new_tokens.append(merged_token_id)
                i += 2  # Skip the next token as it's merged
                can_merge = True
            else:
                new_tokens.append(token_ids[i])
                i += 1
        if i < len(token_ids):
            new_tokens.append(token_ids[i])
        token_ids = new_tokens
    return token_ids
''', breach="merges whatever known pair it meets in a left-to-right pass, repeated, instead of always the "
            "lowest-rank (earliest learned) pair present",
         names=("rank", "order", "one pass", "left to right", "lowest", "learned first", "earliest")),
]
