"""greedy_decode_cached(model, src, max_len, bos_id, eos_id): exactly greedy_decode's ids (notebook 08), with the
keys and values of earlier steps cached, so that step t computes attention for the newest token only.

The three parts judge three things, so that one slip costs the part it breaks only:

- ``matches``: the ids, compared with ``lib.transformer.greedy_decode`` run here on the same model. The usual
  mistakes are put into a cached decoder written here (``_cached``), so that a wrong answer can be named;
- ``stops``: when the loop ends and what follows eos, read off the shape and the eos/pad layout of the ids (not
  their values: a wrong position vector changes which words come out, not when decoding stops);
- ``new_token_only``: whether a step works on the newest token only, read off the operators the student's code
  runs (names and output shapes), on a model whose sizes make the shapes unambiguous: batch 3, source length 11,
  at most 9 steps, d_model 16, 2 heads, d_ff 24, 17 target tokens.
"""
import math

import torch

from lib.masking import padding_mask
from lib.multi_head import merge_heads, split_heads
from lib.testing import assert_close, is_close
from lib.transformer import greedy_decode

from ..encoder_decoder.greedy_decode import eos_problem, stopping_layout
from ..encoder_decoder.transformer import batch, reference_model

SRC_VOCAB, TGT_VOCAB = 13, 17
SIZES = dict(d_model=16, n_heads=2, n_layers=2, d_ff=24, dropout=0.0, max_len=40)
# Seeds and eos bonuses of the models of greedy_decode_cached_matches: with these, the sentences end after
# different numbers of steps (one runs to max_len), the runner-up logit along every greedy path is at least
# 0.01 below the argmax, and every mistake below gives ids different from the right ones and from each other's.
MATCH_MODELS = ((103, 1.0, 4), (113, 2.0, 0))   # seed, eos bonus, pad_id
# The other models: the runner-up logit is at least 0.03 below the argmax along every greedy path.
BOS, EOS = 1, 2


def _attend(q, keys, values, mask=None, scale=None):
    scores = q @ keys.transpose(-2, -1) / (math.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, -1) @ values


@torch.no_grad()
def _cached(model, src, max_len, bos, eos, position0=False, no_grow=False, shared=False, scale=None,
            stop=True, pad_after_eos=True, keep_bos=False, src_mask=True, stop_at_first=False):
    """Greedy decoding with a key/value cache, as the exercise asks, or with one mistake put in on purpose."""
    pad = model.pad_id
    mask = padding_mask(src, pad)
    memory = model.encode(src, mask)
    cross_mask = mask.unsqueeze(1) if src_mask else None                 # (B, 1, 1, S)
    pe = model.positions(torch.zeros(1, max_len, model.d_model))[0]
    layers = list(model.decoder_layers)
    memory_kv = [(split_heads(l.cross_attn.w_k(memory), l.cross_attn.n_heads),
                  split_heads(l.cross_attn.w_v(memory), l.cross_attn.n_heads)) for l in layers]
    caches = [[None, None] for _ in layers]
    common = [None, None]
    ys = torch.full((src.shape[0], 1), bos, dtype=torch.long)
    done = torch.zeros(src.shape[0], dtype=torch.bool)
    for t in range(max_len):
        x = model.tgt_embed(ys[:, -1:]) * math.sqrt(model.d_model) + pe[0 if position0 else t]
        for n, layer in enumerate(layers):
            attn = layer.self_attn
            h = attn.n_heads
            k_new, v_new = split_heads(attn.w_k(x), h), split_heads(attn.w_v(x), h)
            cache = common if shared else caches[n]
            if cache[0] is None or no_grow:
                cache[0], cache[1] = k_new, v_new
            else:
                cache[0], cache[1] = torch.cat([cache[0], k_new], 2), torch.cat([cache[1], v_new], 2)
            a = attn.w_o(merge_heads(_attend(split_heads(attn.w_q(x), h), cache[0], cache[1], scale=scale)))
            x = layer.norm1(x + a)
            c = layer.cross_attn
            a = c.w_o(merge_heads(_attend(split_heads(c.w_q(x), c.n_heads), *memory_kv[n], cross_mask)))
            x = layer.norm2(x + a)
            x = layer.norm3(x + layer.ff(x))
        nxt = model.output(x)[:, -1].argmax(-1)
        if pad_after_eos:
            nxt = nxt.masked_fill(done, pad)
        ys = torch.cat([ys, nxt[:, None]], 1)
        done |= nxt == eos
        if stop and (done.any() if stop_at_first else done.all()):
            break
    return ys if keep_bos else ys[:, 1:]


def _hints(model, src, max_len):
    run = lambda **kw: _cached(model, src, max_len, BOS, EOS, **kw)  # noqa: E731
    return {
        "every new token gets the position vector of position 0: at step t the newest token sits at position t, so "
        "add the position vector of t (model.positions on a (B, 1, d) tensor always adds position 0's)":
            run(position0=True),
        "the self-attention of a step sees the newest token's key and value only: append them to the cache of "
        "the earlier ones and attend to all of them": run(no_grow=True),
        "the decoder layers share one cache: each layer needs its own keys and values (its own w_k and w_v, and "
        "its own inputs)": run(shared=True),
        "the scores are divided by sqrt(d_model); divide by sqrt(d_k), the size of one head's queries and keys":
            run(scale=math.sqrt(model.d_model)),
        "the cross-attention ignores the source padding: mask the padding keys of the memory, as greedy_decode "
        "does with padding_mask(src, model.pad_id)": run(src_mask=False),
        "the decoding does not stop when every sentence has produced eos: break out of the loop once all are done":
            run(stop=False),
        "the decoding stops when the first sentence has produced eos: keep decoding until every sentence has":
            run(stop_at_first=True),
        "sentences that have finished (produced eos) must continue with model.pad_id, not with more predicted "
        "tokens": run(pad_after_eos=False),
        "the output starts with bos: return the generated tokens only, without the bos you started from":
            run(keep_bos=True),
    }


def _build(k, seed, eos_bonus, pad_id):
    """A small reference Transformer here and the same one in the kernel (a handle): pad and bos never
    predicted, eos made more or less likely."""
    here = reference_model(SRC_VOCAB, TGT_VOCAB, pad_id, seed, **SIZES)
    with torch.no_grad():
        here.output.bias[pad_id] = here.output.bias[BOS] = -20.0
        here.output.bias[EOS] += eos_bonus
    there = k.build("a Transformer", k.trusted("lib.transformer").attr("Transformer"), SRC_VOCAB, TGT_VOCAB,
                    pad_id=pad_id, **SIZES)
    problems = k.load(there, here.state_dict())
    if problems:
        raise AssertionError(f"the grader could not set up its model: {problems[0]}")
    k.build("model.eval()", there.attr("eval"))
    return here, there


def _source(seed, pad_id, lengths=(11, 7, 9)):
    src, _ = batch(torch.Generator().manual_seed(seed + 100), len(lengths), 11, 1, SRC_VOCAB, TGT_VOCAB, pad_id,
                   list(lengths), [1] * len(lengths))
    return src


def _compare(out, expected, what, model, src, max_len):
    """Fail unless the ids are the expected ones; the mistakes' ids are computed only when they are not."""
    if out.shape == expected.shape and torch.equal(out, expected):
        return
    hints = _hints(model, src, max_len)
    if not any(is_close(out, wrong) for wrong in hints.values()):
        eos_problem(out, expected, what, EOS, model.pad_id)
    assert_close(out, expected, what, hints=hints)


def _run(k, model, src, max_len, what, watch=False):
    trace = k.trace(what, k.student("greedy_decode_cached"), model, src, max_len, BOS, EOS, watch=watch,
                    no_grad=True)
    out = trace.value
    if not torch.is_tensor(out):
        kind = getattr(out, "description", None) or f"a {type(out).__name__}"
        raise AssertionError(f"{what} should return a tensor of token ids (B, L), got {kind}")
    if out.dtype != torch.long:
        raise AssertionError(f"{what} returns dtype {out.dtype}: return token ids, torch.long (int64)")
    return out, trace


def greedy_decode_cached_matches(k):
    """Equals greedy_decode (notebook 08) on small Transformers with two decoder layers: sentences that end at
    different steps and one that runs to max_len, source padding, pad_id 4 and 0."""
    for seed, bonus, pad_id in MATCH_MODELS:
        here, there = _build(k, seed, bonus, pad_id)
        src = _source(seed, pad_id)
        what = (f"greedy_decode_cached(a Transformer with 2 decoder layers, src {tuple(src.shape)}, max_len=9, "
                f"bos_id={BOS}, eos_id={EOS})")
        out, _ = _run(k, there, src, 9, what)
        _compare(out, greedy_decode(here, src, 9, BOS, EOS), f"{what} (model.pad_id={pad_id})", here, src, 9)


def greedy_decode_cached_stops(k):
    """Stops at max_len when no sentence ends; stops after one step when all end at once; one sentence alone;
    sentences that end at different steps: judged on the shape and the eos positions, whatever the words are."""
    for bonus, name in ((-60.0, "never"), (60.0, "always")):
        here, there = _build(k, 103, bonus, 0)
        src = _source(103, 0)
        what = (f"greedy_decode_cached(a model that {name} predicts eos, src {tuple(src.shape)}, max_len=7, "
                f"bos_id={BOS}, eos_id={EOS})")
        out, _ = _run(k, there, src, 7, what)
        stopping_layout(out, what, 7, src.shape[0], BOS, EOS)
        if name == "never" and out.shape[1] not in (7, 8):  # 8: with bos in front, which the ids' part names
            raise AssertionError(f"{what} returns {out.shape[1]} tokens per sentence: with no eos, write max_len=7")
        if name == "always" and out.shape[1] not in (1, 2):
            raise AssertionError(f"{what} returns {tuple(out.shape)}, expected (3, 1): stop as soon as every "
                                 f"sentence has produced eos, do not always run max_len steps")
    for seed, bonus, pad_id in MATCH_MODELS:  # sentences that end at different steps
        here, there = _build(k, seed, bonus, pad_id)
        src = _source(seed, pad_id)
        what = (f"greedy_decode_cached(a Transformer, src {tuple(src.shape)}, max_len=9, bos_id={BOS}, eos_id={EOS}) "
                f"(model.pad_id={pad_id})")
        stopping_layout(_run(k, there, src, 9, what)[0], what, 9, src.shape[0], BOS, EOS)
    here, there = _build(k, 113, 2.0, 4)
    src = _source(113, 4, lengths=(6,))
    what = f"greedy_decode_cached(a Transformer, one sentence {tuple(src.shape)}, max_len=9, bos_id={BOS}, eos_id={EOS})"
    stopping_layout(_run(k, there, src, 9, what)[0], what, 9, 1, BOS, EOS)


COMPUTE = {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "einsum", "_softmax", "softmax", "_safe_softmax",
           "exp", "_log_softmax"}


def greedy_decode_cached_new_token_only(k):
    """Each step computes attention for the newest token only: one query against the cached keys, and the linear
    layers of the decoder on one position per sentence (read off the shapes of the operators that run)."""
    here, there = _build(k, 113, -60.0, 0)             # never predicts eos: all 9 steps run
    b, max_len = 3, 9
    src = _source(113, 0)
    what = f"greedy_decode_cached(a Transformer, src {tuple(src.shape)}, max_len={max_len}, bos_id={BOS}, eos_id={EOS})"
    out, trace = _run(k, there, src, max_len, what, watch=True)
    features = {SIZES["d_model"], SIZES["d_ff"], TGT_VOCAB}
    rows_seen, newest = [], 0
    for op, _, shape in trace.ops:
        if op not in COMPUTE or not shape or len(shape) < 2:
            continue
        n = shape[-2]
        if 2 <= n <= max_len and shape[-1] == n:
            raise AssertionError(
                f"{what} computes attention for {n} queries against {n} keys in one step (operator '{op}', output "
                f"shape {tuple(shape)}): it runs the decoder on all the tokens so far, as greedy_decode does, so "
                f"nothing is saved. At step t, compute the query, key and value of the newest token only, append the "
                f"key and value to each layer's cache, and attend with that one query to all the cached keys")
        if len(shape) >= 3 and shape[-2] == 1:
            continue  # one position per row: the newest token (its attention over the cache is judged above)
        rows = math.prod(shape[:-1])
        if shape[-1] in features and rows % b == 0 and 2 <= rows // b <= max_len:
            rows_seen.append((op, tuple(shape), rows // b))
        newest += shape[-1] == TGT_VOCAB and rows == b       # the output layer, on one position per sentence
    if rows_seen:
        op, shape, n = rows_seen[0]
        raise AssertionError(
            f"{what} runs a linear layer of the decoder on {n} positions per sentence in one step (operator '{op}', "
            f"output shape {shape}): the earlier tokens are processed again at every step (for example their keys "
            f"and values recomputed from cached inputs). Cache the projected keys and values themselves, w_k(x) and "
            f"w_v(x) of each new token, so that every step projects one token per sentence")
    if newest < max_len:  # judged on what ran, so code that never runs the decoder step by step cannot pass
        raise AssertionError(
            f"{what} ran the model's output layer on the newest token {newest} times, expected once per step "
            f"({max_len} steps with a model that never predicts eos): at each step, run the decoder on the newest "
            f"token and take the next token from model.output of that one position")
