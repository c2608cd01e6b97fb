"""The channel between the judge and the student's kernel carries data only: values round-trip exactly,
objects stay in the kernel as handles, and nothing that could run code in the grader is ever read."""
import base64
import collections
import json
import pickle

import pytest
import torch

from autograder import probe
from autograder.checks.kernel import Kernel, LocalTransport, ProbeFailure, Remote


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
    k = Kernel(lambda request: reply)
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
