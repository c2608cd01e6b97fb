"""greedy_decode(model, src, max_len, bos_id, eos_id): compared with greedy decoding computed here, on a
scripted stand-in model (its sentences end where the test wants) and on a small reference Transformer with
two decoder layers (where decoding without the causal mask changes the tokens)."""
import torch

from lib.testing import assert_close, is_close

from . import causal
from .scripted import ScriptedModel
from .transformer import batch, reference_model

SCRIPTED = "autograder.checks.encoder_decoder.scripted"
# The reference Transformer of greedy_decode_matches: with this seed and this bonus for eos, its four sentences
# end after 4, 4 and 3 tokens or not at all (8 columns), and decoding without the causal mask changes the last
# one, which then ends after 5 (5 columns). The closest runner-up logit is 0.06 below the argmax.
TRANSFORMER_SEED, EOS_BONUS = 53, 1.25


def _greedy(model, src, max_len, bos, eos, stop=True, pad_after_eos=True, position=-1, keep_bos=False,
            pad_value=None, mask_pad=None, causal_mask=True, stop_at_first=False):
    """Greedy decoding as the exercise asks, or with one mistake put in on purpose."""
    pad = model.pad_id if pad_value is None else pad_value
    with torch.no_grad():
        src_mask = (src != (model.pad_id if mask_pad is None else mask_pad))[:, None, :]
        memory = model.encode(src, src_mask)
        ys = torch.full((src.shape[0], 1), bos, dtype=torch.long)
        done = torch.zeros(src.shape[0], dtype=torch.bool)
        for _ in range(max_len):
            logits = model.decode(ys, memory, src_mask, causal(ys.shape[1]) if causal_mask else None)
            nxt = logits[:, position].argmax(-1)
            if pad_after_eos:
                nxt = nxt.masked_fill(done, pad)
            ys = torch.cat([ys, nxt[:, None]], dim=1)
            done |= nxt == eos
            if stop and (done.any() if stop_at_first else done.all()):
                break
    return ys if keep_bos else ys[:, 1:]


def _scripted(k, pad_id, seed, eos_id, eos="length"):
    """The stand-in model here (for the expected values) and the same one in the kernel (a handle)."""
    here = ScriptedModel(13, pad_id, eos_id, seed, eos).eval()
    there = k.build(f"ScriptedModel(pad_id={pad_id})", k.trusted(SCRIPTED).attr("ScriptedModel"), 13, pad_id,
                    eos_id, seed, eos)
    k.load(there, here.state_dict())
    k.lift(there, "encode", "decode")
    return here, there


def _transformer(k, pad_id, bos_id, eos_id, seed):
    """A small reference Transformer (two decoder layers) here and the same one in the kernel (a handle):
    random weights, pad and bos never predicted, eos a little more likely."""
    sizes = dict(d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0, max_len=40)
    here = reference_model(11, 13, pad_id, seed, **sizes)
    with torch.no_grad():
        here.output.bias[pad_id] = here.output.bias[bos_id] = -20.0
        here.output.bias[eos_id] += EOS_BONUS
    there = k.build("a Transformer", k.trusted("lib.transformer").attr("Transformer"), 11, 13, pad_id=pad_id,
                    **sizes, seed=0)
    k.load(there, here.state_dict())
    k.lift(there, "encode", "decode", "forward")
    return here, there


def _hints(model, src, max_len, bos, eos):
    hints = {
        "the decoding does not stop when every sentence has produced eos: break out of the loop once all are done":
            _greedy(model, src, max_len, bos, eos, stop=False),
        "the decoding stops when the first sentence has produced eos: keep decoding until every sentence has":
            _greedy(model, src, max_len, bos, eos, stop_at_first=True),
        "sentences that have finished (produced eos) must continue with model.pad_id, not with more predicted "
        "tokens": _greedy(model, src, max_len, bos, eos, pad_after_eos=False),
        "the next token comes from the logits of the first position: take the last one, logits[:, -1]":
            _greedy(model, src, max_len, bos, eos, position=0),
        "the output starts with bos: return the generated tokens only, without the bos you started from":
            _greedy(model, src, max_len, bos, eos, keep_bos=True),
        "model.decode runs without a causal mask: pass tgt_mask = causal_mask(ys.shape[1]), so that the model "
        "decodes as it was trained (with two or more decoder layers the mask changes the last position's logits "
        "too)": _greedy(model, src, max_len, bos, eos, causal_mask=False),
    }
    if model.pad_id != 0:
        hints["finished sentences are padded with 0: pad with model.pad_id"] = \
            _greedy(model, src, max_len, bos, eos, pad_value=0)
        hints["the source padding mask is built with pad id 0: use padding_mask(src, model.pad_id)"] = \
            _greedy(model, src, max_len, bos, eos, mask_pad=0)
        hints["pad id 0 is hard-coded (in the source mask and the padding of finished sentences): use "
              "model.pad_id"] = _greedy(model, src, max_len, bos, eos, pad_value=0, mask_pad=0)
    return hints


def _run(k, model, src, max_len, bos, eos, what):
    out = k.call(what, k.student("greedy_decode"), model, src, max_len, bos, eos)
    if not torch.is_tensor(out):
        kind = getattr(out, "description", None) or f"a {type(out).__name__}"
        raise AssertionError(f"{what} should return a tensor of token ids (B, L), got {kind}")
    if out.dtype != torch.long:
        raise AssertionError(f"{what} returns dtype {out.dtype}: return token ids, torch.long (int64)")
    return out


def greedy_decode_matches(k):
    """Equals greedy decoding of a scripted model (sentence lengths varying, pad_id 0 and 4) and of a small
    reference Transformer with two decoder layers (pad_id 4, source padding in every row)."""
    g = torch.Generator().manual_seed(95)
    for pad_id, bos, eos in ((0, 1, 2), (4, 1, 2)):
        src, _ = batch(g, 4, 6, 1, 11, 13, pad_id, [6, 4, 5, 6], [1] * 4)
        here, there = _scripted(k, pad_id, 96 + pad_id, eos)
        what = f"greedy_decode(model, src {tuple(src.shape)}, max_len=9, bos_id={bos}, eos_id={eos})"
        out = _run(k, there, src, 9, bos, eos, what)
        _compare(out, _greedy(here, src, 9, bos, eos), f"{what} (model.pad_id={pad_id})",
                 _hints(here, src, 9, bos, eos), eos, pad_id)
    pad_id, bos, eos = 4, 1, 2
    here, there = _transformer(k, pad_id, bos, eos, seed=TRANSFORMER_SEED)
    src, _ = batch(torch.Generator().manual_seed(TRANSFORMER_SEED + 100), 4, 7, 1, 11, 13, pad_id, [6, 4, 5, 3],
                   [1] * 4)
    what = (f"greedy_decode(a Transformer with 2 decoder layers, src {tuple(src.shape)}, max_len=8, bos_id={bos}, "
            f"eos_id={eos})")
    k.call("model.train()", there.attr("train"))  # no dropout in it: the mode changes nothing but the flag
    out = _run(k, there, src, 8, bos, eos, what)
    if not k.describe(there).training:
        raise AssertionError(f"{what} switched the model to eval mode (model.eval() inside): leave the model's mode "
                             f"as the caller set it; the caller calls model.eval() before decoding")
    _compare(out, _greedy(here, src, 8, bos, eos), f"{what} (model.pad_id={pad_id})", _hints(here, src, 8, bos, eos),
             eos, pad_id)


def _compare(out, expected, what, hints, eos, pad_id):
    """The ids against the expected ones: a known mistake named by its ids, else by how sentences end."""
    if out.shape == expected.shape and torch.equal(out, expected):
        return
    if not any(is_close(out, wrong) for wrong in hints.values()):
        eos_problem(out, expected, what, eos, pad_id)
    assert_close(out, expected, what, hints=hints)


def eos_problem(out, expected, what, eos, pad):
    """Two ways of ending sentences, named from the ids whatever the words are (one place for greedy_decode and
    greedy_decode_cached): eos left out of the output, and decoding that goes on after eos."""
    if not torch.is_tensor(out) or out.dim() != 2 or out.shape[0] != expected.shape[0]:
        return
    if bool((expected == eos).any()) and not bool((out == eos).any()):
        raise AssertionError(f"{what} contains no eos, though sentences end: eos itself is missing. Each sentence's "
                             f"ids run up to and including its eos, then model.pad_id ({pad})")
    if out.shape == expected.shape:
        wrong = out != expected
        filler = out[wrong].unique().tolist()
        if bool(wrong.any()) and bool((expected[wrong] == pad).all()) and len(filler) == 1:
            value = filler[0]
            named = "eos itself" if value == eos else f"{value}"
            raise AssertionError(f"{what}: after a sentence's eos its row continues with {named}, not model.pad_id "
                                 f"({pad}). A finished sentence's eos is written once, then pad_id fills the row")
    rows = out.tolist()
    unfinished = [i for i, row in enumerate(expected.tolist()) if eos not in row]
    if out.shape == expected.shape and unfinished and all(rows[i][-1] == eos for i in unfinished):
        raise AssertionError(f"{what}: sentence {unfinished[0]} reaches max_len without producing eos, yet its last "
                             f"token is eos: eos is forced at max_len (as fairseq's generator does). Greedy decoding "
                             f"writes the model's own choice at every step and simply stops at max_len")
    after = [row[row.index(eos) + 1:] for row in rows if eos in row]
    if out.shape[1] > expected.shape[1] and any(t != pad for rest in after for t in rest):
        raise AssertionError(f"{what} has shape {tuple(out.shape)}, expected {tuple(expected.shape)}: decoding keeps "
                             f"going after eos (tokens follow a sentence's eos, and the loop runs on after every "
                             f"sentence has ended). Write model.pad_id after a sentence's eos, and stop once every "
                             f"sentence has produced eos")


def stopping_layout(out, what, max_len, rows, bos, eos):
    """The stopping rules of greedy decoding, on the shape and the eos positions of the ids alone, whatever the
    words are: ``rows`` sentences, at most ``max_len`` tokens, no step after every sentence has produced eos, none
    missing before. A leading bos and what follows an eos are left to the part that compares the ids, which names
    them: one slip, one part. Shared by greedy_decode (08) and greedy_decode_cached (09)."""
    if out.dim() != 2 or out.shape[0] != rows:
        raise AssertionError(f"{what} returns shape {tuple(out.shape)}: expected (B, L) with B = {rows}, one row per "
                             f"sentence")
    if out.shape[1] and bool((out[:, 0] == bos).all()):
        out = out[:, 1:]
    if out.shape[1] > max_len:
        raise AssertionError(f"{what} returns {out.shape[1]} tokens per sentence, more than max_len={max_len}")
    ended = [row.index(eos) if eos in row else None for row in out.tolist()]
    if out.shape[1] < max_len and None in ended:
        raise AssertionError(f"{what} stops after {out.shape[1]} steps, but row {ended.index(None)} has produced no "
                             f"eos yet: keep decoding until every sentence has produced eos (or max_len tokens are "
                             f"written), not until the first one has")
    if out.shape[1] and None not in ended and max(ended) < out.shape[1] - 1:
        raise AssertionError(f"{what} returns {out.shape[1]} tokens per sentence, but every sentence had produced eos "
                             f"by step {max(ended) + 1}: stop as soon as every sentence has produced eos, do not "
                             f"always run max_len steps")


def greedy_decode_stops(k):
    """Stops at max_len when no sentence ends; stops at once when all end; works for one sentence: judged on the
    shape and the eos positions of the ids, not on which tokens come out."""
    g = torch.Generator().manual_seed(97)
    src, _ = batch(g, 3, 5, 1, 11, 13, 0, [5, 5, 3], [1] * 3)
    for eos, max_len, steps in (("never", 7, 7), ("always", 7, 1)):
        _, there = _scripted(k, 0, 98, 2, eos=eos)
        what = f"greedy_decode(model that {eos} predicts eos, src (3, 5), max_len={max_len}, bos_id=1, eos_id=2)"
        out = _run(k, there, src, max_len, 1, 2, what)
        stopping_layout(out, what, max_len, 3, 1, 2)
        if out.shape[1] not in (steps, steps + 1):  # + 1: with bos in front, which greedy_decode_matches names
            raise AssertionError(f"{what} returns {tuple(out.shape)}, expected (3, {steps})")
    src4, _ = batch(torch.Generator().manual_seed(95), 4, 6, 1, 11, 13, 0, [6, 4, 5, 6], [1] * 4)
    _, there = _scripted(k, 0, 96, 2)  # its sentences end after different numbers of steps
    what = "greedy_decode(model, src (4, 6), max_len=9, bos_id=1, eos_id=2)"
    stopping_layout(_run(k, there, src4, 9, 1, 2, what), what, 9, 4, 1, 2)
    _, there = _scripted(k, 0, 99, 2)
    single = src[2:3, :3]
    what = "greedy_decode(model, one sentence of 3 tokens (1, 3), max_len=9, bos_id=1, eos_id=2)"
    stopping_layout(_run(k, there, single, 9, 1, 2, what), what, 9, 1, 1, 2)
