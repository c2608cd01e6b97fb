"""The channel between the judge and the student's kernel carries data only: values round-trip exactly,
objects stay in the kernel as handles, and nothing that could run code in the grader is ever read."""
import base64
import collections
import json
import pickle
import re

import pytest
import torch

from autograder import probe
from autograder.checks.kernel import Bans, Kernel, LocalTransport, ProbeFailure, Remote, grad


def roundtrip(value):
    return probe.decode(probe.encode(value))


@pytest.mark.parametrize("value", [
    None, True, 3, -2**70, 1.5, float("inf"), "text", [1, [2, (3, "x")]], (), {("a", "b"): 2, "c": [1.0]},
    {1, 2}, frozenset({"x"}), collections.Counter({("l", "o"): 5}), torch.float64, torch.device("cpu"),
])
def test_plain_values_round_trip(value):
    back = roundtrip(value)
    assert back == value and type(back) is type(value)


def test_tensors_round_trip_with_dtype_shape_and_meta():
    for t in (torch.randn(2, 3), torch.arange(5), torch.ones(2, dtype=torch.bool), torch.zeros(0, 4),
              torch.randn(3, dtype=torch.bfloat16), torch.tensor(2.5, dtype=torch.float64)):
        back = roundtrip(t)
        assert back.dtype == t.dtype and back.shape == t.shape and torch.equal(back, t)
    meta = roundtrip(torch.empty(2, 5, device="meta"))
    assert meta.device.type == "meta" and meta.shape == (2, 5)
    a = torch.randn(4)
    x, y = roundtrip((a, a[:2]))  # views of one storage travel as copies
    assert torch.equal(x, a) and torch.equal(y, a[:2])


def test_objects_stay_in_the_kernel_as_handles():
    class Liar(torch.Tensor):
        def __eq__(self, other):
            return True

    handles = {}
    text = probe.encode([torch.nn.Linear(2, 3), str.upper, torch.zeros(2).as_subclass(Liar), type("S", (str,), {})("x")],
                        handles)
    module, fn, liar, s = probe.decode(text, handle=lambda d: d)
    assert module["module"] and module["handle"] in handles
    assert fn["callable"] and liar["tensor_subclass"] and s["type"].endswith("S")
    assert len(handles) == 4  # nothing but data left the kernel


class Payload:
    def __reduce__(self):  # unpickling it would end the test run
        return (exec, ("raise SystemExit('a pickle from the kernel was unpickled')",))


@pytest.mark.parametrize("reply", [
    base64.b64encode(pickle.dumps(Payload())).decode(),  # a pickle where JSON is expected
    json.dumps({"ok": True, "v": {"$": "pickle", "v": "gASV"}}),  # an unknown tag
    json.dumps({"ok": True, "v": {"$": "tensor", "key": "t0"}}),  # a tensor that is not there
    json.dumps({"ok": True, "v": {"$": "list", "v": [1]}, "tensors": "not base64!"}),
    "[" * 100_000 + "]" * 100_000,  # nested too deeply to parse
    json.dumps({"ok": True, "v": "x" * (probe.MAX_BYTES + 1)}),  # too large
    json.dumps({"ok": True, "v": {"$": "dict", "v": [[[1], 2]]}}),  # an unhashable key
])
def test_a_hostile_reply_is_refused_not_run(reply):
    k = Kernel(lambda request, answer: reply)
    with pytest.raises(ProbeFailure):
        k.call("softmax(x)", k.student("softmax"), torch.ones(2))


def test_requests_run_student_code_only_through_the_kernel_side():
    ns = {}
    exec("import torch\ndef f(x, dim=-1):\n    return x * 2, {'n': x.shape[dim]}\n"
         "def broken(x):\n    raise ValueError('odd d_model 5')\n", ns)
    k = Kernel(LocalTransport(ns))
    out, info = k.call("f(x)", k.student("f"), torch.ones(3), dim=0)
    assert torch.equal(out, torch.full((3,), 2.0)) and info == {"n": 3}
    with pytest.raises(AssertionError, match="broken\\(x\\) raised ValueError: odd d_model 5") as e:
        k.call("broken(x)", k.student("broken"), torch.ones(1))
    assert "ValueError" in e.value.types
    with pytest.raises(AssertionError, match="not defined"):
        k.call("missing()", k.student("missing"))
    counter = Remote(("import", "collections")).attr("Counter")
    assert k.call("Counter('aab')", counter, "aab") == collections.Counter("aab")
    layer = k.call("Linear(2, 3)", Remote(("import", "torch.nn")).attr("Linear"), 2, 3)
    assert isinstance(layer, Remote) and layer.module
    assert k.describe(layer).isa("torch.nn.modules.linear.Linear")


def _own(ns, module, withheld=()):
    """A judge's Kernel for which ``module`` holds the references of the notebook being graded."""
    return Kernel(LocalTransport(ns), own=(module,), withheld=withheld)


def test_the_notebooks_own_references_run_in_the_grader():
    """An injected reference of the notebook being graded is a stand-in in the kernel: its calls, and the
    gradients through them, are computed by the grader; the reference itself never enters the kernel."""
    import lib.self_attention as ref
    seen = []
    ns = {}
    exec("def attend(x):\n    seen.append(softmax)\n    return softmax(x @ x.T, dim=-1) @ x\n", ns)
    ns["seen"] = seen
    k = _own(ns, "lib.self_attention", withheld=("scaled_dot_product_attention", "SelfAttention"))
    x, up = torch.randn(3, 4), torch.randn(3, 4)
    trace = k.trace("attend(x)", k.student("attend"), grad(x), backward=up,
                    inject={"softmax": k.reference("lib.self_attention.softmax")})
    # The grader runs the reference itself, so the value and the gradient are the reference's own, to the bit.
    # (Not torch.softmax's: its fused backward rounds differently from the reference's shift, exp and divide,
    # by up to a few 1e-6, which fails allclose's default atol of 1e-8 on a gradient entry near zero for about
    # one random input in twelve.)
    here = x.clone().requires_grad_(True)
    expected = ref.softmax(here @ here.T, dim=-1) @ here
    (expected * up).sum().backward()
    assert torch.equal(trace.value, expected) and torch.equal(trace.grads["args"][0], here.grad)
    stand_in = seen[0].__wrapped__  # the injected function, under the ban lifter's wrapper
    assert stand_in.__code__.co_filename == probe.__file__ and stand_in is not ref.softmax
    with pytest.raises(ValueError, match="not a reference of an earlier exercise"):
        k.call("attend(x)", k.student("attend"), x, inject={"softmax": k.reference(
            "lib.self_attention.scaled_dot_product_attention")})


def test_a_reference_class_is_a_stand_in_with_its_parameters_in_the_kernel():
    """A module of the notebook's references, built for the judge, keeps its parameters, submodules and
    training flags in the kernel (they can be read, loaded and changed there) and runs in the grader with
    them, on the kernel's random numbers: the same weights and dropout as the reference made in the kernel."""
    from lib.feed_forward import FeedForward
    k = _own({}, "lib.feed_forward")
    layer = k.build("FeedForward(4, 8)", k.reference("lib.feed_forward.FeedForward"), 4, 8, dropout=0.5, seed=3)
    info = k.describe(layer)
    assert info.isa("lib.feed_forward.FeedForward") and set(info.all_params()) == {
        "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"}
    assert info.children["linear1"].isa("torch.nn.modules.linear.Linear")
    torch.manual_seed(3)
    here = FeedForward(4, 8, dropout=0.5)
    x = torch.randn(2, 5, 4)
    torch.manual_seed(7)
    expected = here(x)  # train mode: dropout, from the seed
    assert torch.equal(k.call("layer(x)", layer, x, seed=7), expected)
    k.call("layer.eval()", layer.attr("eval"))
    assert k.load(layer, {"linear2.bias": torch.ones(4)}) == []
    with torch.no_grad():
        here.linear2.bias.fill_(1.0)
    assert torch.allclose(k.call("layer(x)", layer, x), here.eval()(x))
    up = torch.randn(2, 5, 4)
    trace = k.trace("layer(x)", layer, grad(x), backward=up)
    here.zero_grad()
    (here(x) * up).sum().backward()
    assert torch.allclose(trace.grads["params"]["linear1.weight"], here.linear1.weight.grad)


def test_parts_of_a_stand_in_from_earlier_notebooks_are_real_in_the_kernel():
    """In the kernel's copy of a reference module, the parts made from earlier notebooks' modules (which the kernel
    has imported) and torch.nn's are real modules that student code may call, a bias-free nn.Linear included; the
    parts defined by the notebook's own references stay containers that refuse to run."""
    from lib.gpt import GPT
    from lib.transformer import Transformer
    ns = {}
    exec("def encoder_layer(model, x):\n    return model.encoder_layers[0](x)\n\n"
         "def decoder_norm(model, x):\n    return model.decoder_layers[0].norm1(x)\n\n"
         "def decoder_layer(model, x):\n    return model.decoder_layers[0](x, x)\n\n"
         "def block_parts(model, x):\n    b = model.blocks[0]\n"
         "    return model.head(b.ff(b.ln2(x)) + b.attn(x, x, x)[0])\n",
         ns)
    k = Kernel(LocalTransport(ns), own=("lib.transformer", "lib.decoder"))
    model = k.build("Transformer", k.reference("lib.transformer.Transformer"), 11, 13, d_model=8, n_heads=2,
                    n_layers=1, d_ff=16, dropout=0.0, seed=0)
    here = Transformer(11, 13, d_model=8, n_heads=2, n_layers=1, d_ff=16, dropout=0.0).eval()
    assert k.load(model, here.state_dict()) == []
    k.call("model.eval()", model.attr("eval"))
    x = torch.randn(2, 3, 8)
    with torch.no_grad():   # lib.encoder.EncoderLayer (notebook 06's), and a LayerNorm inside 08's own DecoderLayer
        assert torch.allclose(k.call("encoder_layer", k.student("encoder_layer"), model, x),
                              here.encoder_layers[0](x), atol=1e-6)
        assert torch.allclose(k.call("decoder_norm", k.student("decoder_norm"), model, x),
                              here.decoder_layers[0].norm1(x), atol=1e-6)
    with pytest.raises(AssertionError, match="part of a course's module"):   # lib.decoder.DecoderLayer: 08's own
        k.call("decoder_layer", k.student("decoder_layer"), model, x)
    k = Kernel(LocalTransport(ns), own=("lib.gpt",))
    gpt = k.build("GPT", k.reference("lib.gpt.GPT"), 11, d_model=8, n_heads=2, n_layers=1, d_ff=16, dropout=0.0,
                  seed=0)
    here = GPT(11, d_model=8, n_heads=2, n_layers=1, d_ff=16, dropout=0.0).eval()
    assert k.load(gpt, here.state_dict()) == []
    b = here.blocks[0]
    with torch.no_grad():   # its head is nn.Linear(..., bias=False): in the kernel too
        assert torch.allclose(k.call("block_parts", k.student("block_parts"), gpt, x),
                              here.head(b.ff(b.ln2(x)) + b.attn(x, x, x)[0]), atol=1e-6)


def test_the_grader_answers_only_questions_about_the_references_it_gave():
    k = _own({}, "lib.self_attention", withheld=("SelfAttention",))
    spec = k.reference("lib.self_attention.softmax").ref()["stub"]

    def ask(message, tensors=None):
        return json.loads(k.answer(probe.pack(message, tensors or {})))

    x = probe.Encoder()
    args = x([torch.zeros(2)])
    assert ask({"op": "run", "id": spec["id"], "args": args}, x.tensors)["ok"] is True
    for question in ({"op": "run", "id": spec["id"] + 1000, "args": args},  # a number it never gave
                     {"op": "new", "id": spec["id"], "args": args},  # a function is not a class
                     {"op": "run", "id": spec["id"], "method": "__class__", "args": args},
                     {"op": "run", "id": spec["id"], "args": {"$": "ref", "global": "x"}}):  # not data
        reply = ask(question, x.tensors)
        assert reply["ok"] is False and "fault" in reply, question


def test_work_handed_to_another_thread_or_process_fails_and_is_flagged():
    """The ban holds on the calling thread only: a call that hands work to a thread (a pool of its own or one
    made before the call) or a process fails, and is kept in ``flags`` for a person; printing and a progress
    bar (whose threads are the kernel's and tqdm's) are fine."""
    ns = {}
    exec("import os, torch\nfrom concurrent.futures import ThreadPoolExecutor\nfrom tqdm import tqdm\n"
         "POOL = ThreadPoolExecutor(1)\nPOOL.submit(int).result()\n"
         "def pooled(x):\n    return POOL.submit(torch.softmax, x, -1).result()\n"
         "def own(x):\n    with ThreadPoolExecutor(1) as pool:\n"
         "        return pool.submit(torch.softmax, x, -1).result()\n"
         "def forked(x):\n    if os.fork() == 0:\n        os._exit(0)\n    os.wait()\n    return x\n"
         "def plain(x):\n    for _ in tqdm(range(3)):\n        print('step')\n    return x.exp()\n", ns)
    k = Kernel(LocalTransport(ns), Bans(ops=("softmax",)))
    x = torch.randn(2, 3)
    try:
        assert torch.equal(k.call("plain(x)", k.student("plain"), x), x.exp()) and not k.flags
        for name, where in [("pooled", "another thread (ThreadPoolExecutor)"),
                            ("own", "another thread (ThreadPoolExecutor)"), ("forked", "another process (os.fork)")]:
            with pytest.raises(AssertionError, match=re.escape(f"{name}(x) ran work on {where}, where the ban on "
                                                               f"PyTorch's built-in softmax cannot be checked")):
                k.call(f"{name}(x)", k.student(name), x)
        assert len(k.flags) == 3
    finally:
        ns["POOL"].shutdown()


def test_a_missing_name_is_explained_by_the_cells_that_ran():
    """IPython keeps every cell that ran in In: none defining the name means its answer cell is empty or as
    released; one defining it means that cell stopped first."""
    from autograder.probe import _why_undefined
    empty = _why_undefined("softmax", {"In": ["", "import torch", "# YOUR CODE HERE\nraise NotImplementedError()"]})
    assert empty == "no cell that ran defines it; write softmax in its answer cell"
    for source in ("import nope\ndef softmax(x, dim=-1):\n    return x", "softmax = torch.softmax",
                   "class softmax:\n    pass", "softmax: object = None"):
        assert "did the cell stop with an error" in _why_undefined("softmax", {"In": ["", source]}), source
    assert empty == _why_undefined("softmax", {"In": ["", "softmax == 3", "print(softmax)"]})
    assert "did the cell stop" in _why_undefined("softmax", {})  # no IPython: say what may have happened
