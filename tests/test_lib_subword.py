"""The joint English/German BPE tokenizer of notebook 08 (lib/subword.py)."""
import pytest
import torch

from lib.subword import (BOS_ID, EOS_ID, PAD_ID, UNK_ID, batch_encode, decode, encode, load_tokenizer,
                         save_tokenizer, train_tokenizer)
from lib.translation_data import make_splits


@pytest.fixture(scope="module")
def data():
    splits = make_splits(n_train=3000, n_valid=10, n_test=300, seed=0)
    texts = [s for pair in splits["train"] for s in pair]
    return splits, train_tokenizer(texts, vocab_size=600)


def test_special_tokens_have_fixed_ids(data):
    _, tok = data
    assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
    assert [tok.token_to_id(t) for t in ("<pad>", "<bos>", "<eos>", "<unk>")] == [0, 1, 2, 3]
    assert tok.get_vocab_size() == 600


def test_round_trip_on_every_test_sentence_both_languages(data):
    splits, tok = data
    for en, de in splits["test"]:
        for s in (en, de):
            assert decode(tok, encode(tok, s)) == s
            assert decode(tok, encode(tok, s, add_bos=True, add_eos=False)) == s
    assert decode(tok, encode(tok, "der Hund , weil Hühner .")) == "der Hund , weil Hühner ."


def test_one_vocabulary_for_both_languages(data):
    _, tok = data
    vocab = tok.get_vocab()
    assert "▁the" in vocab and "▁der" in vocab and "▁." in vocab


def test_encode_adds_bos_and_eos_and_decode_stops_at_eos(data):
    _, tok = data
    plain = encode(tok, "the dog sees the ball .", add_eos=False)
    assert encode(tok, "the dog sees the ball .") == plain + [EOS_ID]
    assert encode(tok, "the dog sees the ball .", add_bos=True) == [BOS_ID] + plain + [EOS_ID]
    assert all(i > UNK_ID for i in plain)
    ids = [BOS_ID] + plain + [EOS_ID] + plain + [PAD_ID, PAD_ID]
    assert decode(tok, ids) == "the dog sees the ball ."
    assert decode(tok, torch.tensor(ids)) == "the dog sees the ball ."
    assert decode(tok, [BOS_ID, EOS_ID]) == ""


def test_unseen_characters_become_unk(data):
    _, tok = data
    assert UNK_ID in encode(tok, "the dog sees the ball 😀 .")


def test_save_and_load_give_the_same_encodings(data, tmp_path):
    splits, tok = data
    path = tmp_path / "sub" / "tok.json"
    save_tokenizer(tok, path)
    again = load_tokenizer(path)
    for en, de in splits["test"][:100]:
        for s in (en, de):
            assert encode(again, s, add_bos=True) == encode(tok, s, add_bos=True)
    assert decode(again, encode(again, splits["test"][0][1])) == splits["test"][0][1]


def test_batch_encode_pads_with_pad_id(data):
    _, tok = data
    texts = ["the dog sleeps .", "because the dog saw the ball , the cat laughed .", "a cat ."]
    batch = batch_encode(tok, texts, add_bos=True, add_eos=True)
    rows = [encode(tok, t, add_bos=True, add_eos=True) for t in texts]
    assert batch.dtype == torch.long and batch.shape == (3, max(map(len, rows)))
    for row, ids in zip(batch.tolist(), rows):
        assert row[:len(ids)] == ids and all(i == PAD_ID for i in row[len(ids):])
    assert [decode(tok, row) for row in batch] == texts
    no_eos = batch_encode(tok, texts, add_bos=False, add_eos=False)
    assert no_eos.shape[1] == batch.shape[1] - 2 and (no_eos != EOS_ID).all() and (no_eos[:, 0] != BOS_ID).all()


def test_training_on_the_default_corpus_is_fast_enough():
    import time
    splits = make_splits()
    texts = [s for pair in splits["train"] for s in pair]
    start = time.perf_counter()
    tok = train_tokenizer(texts)
    assert time.perf_counter() - start < 10  # under 1 s on an idle 2-core machine; slack for a busy one
    assert tok.get_vocab_size() == 1000
