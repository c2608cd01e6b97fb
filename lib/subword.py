"""A subword tokenizer for translation (notebook 08), trained with Hugging Face ``tokenizers``.

One BPE vocabulary for both languages (English and German share most
letters, and a shared vocabulary lets names pass through unchanged). The text
is split at spaces, each word keeping a "▁" that stands for the space before
it (``Metaspace``), and punctuation right after a letter is cut off the
word ("shirt." -> "▁shirt" "."); the decoder turns "▁" back into
spaces, so ``decode(tok, encode(tok, s)) == s`` for any text whose characters
were seen in training and that has single spaces and no space at either end.

Special tokens have fixed ids: ``<pad>`` 0, ``<bos>`` 1, ``<eos>`` 2,
``<unk>`` 3 (a character never seen in training).

    tok = train_tokenizer(english + german, vocab_size=1000)
    encode(tok, "der Hund sieht den Ball .")          # [..., EOS_ID]
    batch_encode(tok, ["a b .", "a ."], add_bos=True)  # (2, T) int64, padded with PAD_ID
"""
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIAL_TOKENS = [PAD, BOS, EOS, UNK]
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3


def new_tokenizer() -> Tokenizer:
    """An untrained BPE tokenizer with the pre-tokenizer and decoder used here."""
    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always"),
        # "shirt." -> "▁shirt" "." ; a lone " ." stays one piece "▁."
        pre_tokenizers.Split(Regex(r"(?<=\w)[^\w\s▁]"), behavior="isolated"),
    ])
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    return tok


def train_tokenizer(texts, vocab_size: int = 1000) -> Tokenizer:
    """Learn BPE merges on ``texts`` (an iterable of str) until the vocabulary has ``vocab_size`` tokens.

    Specials first: their ids are PAD_ID, BOS_ID, EOS_ID, UNK_ID.
    """
    tok = new_tokenizer()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    for token, i in zip(SPECIAL_TOKENS, (PAD_ID, BOS_ID, EOS_ID, UNK_ID)):
        assert tok.token_to_id(token) == i, (token, tok.token_to_id(token))
    return tok


def save_tokenizer(tok: Tokenizer, path) -> None:
    """Write ``tok`` as one JSON file."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))


def load_tokenizer(path) -> Tokenizer:
    """Read a tokenizer written by ``save_tokenizer``."""
    return Tokenizer.from_file(str(path))


def encode(tok: Tokenizer, text: str, add_bos: bool = False, add_eos: bool = True) -> list[int]:
    """str -> token ids, with BOS_ID first and EOS_ID last if asked."""
    ids = tok.encode(text, add_special_tokens=False).ids
    return ([BOS_ID] if add_bos else []) + ids + ([EOS_ID] if add_eos else [])


def decode(tok: Tokenizer, ids) -> str:
    """Token ids (list or 1-d tensor) -> str: stops at the first EOS_ID, skips PAD_ID and BOS_ID."""
    if isinstance(ids, torch.Tensor):
        ids = ids.tolist()
    kept = []
    for i in ids:
        i = int(i)
        if i == EOS_ID:
            break
        if i not in (PAD_ID, BOS_ID):
            kept.append(i)
    return tok.decode(kept, skip_special_tokens=False)


def batch_encode(tok: Tokenizer, texts, add_bos: bool = False, add_eos: bool = True) -> torch.Tensor:
    """list of B str -> (B, T) int64, right-padded with PAD_ID; T = the longest encoding."""
    seqs = [([BOS_ID] if add_bos else []) + e.ids + ([EOS_ID] if add_eos else [])
            for e in tok.encode_batch(list(texts), add_special_tokens=False)]
    out = torch.full((len(seqs), max((len(s) for s in seqs), default=0)), PAD_ID, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = torch.tensor(s, dtype=torch.long)
    return out
