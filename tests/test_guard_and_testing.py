"""The grading guard catches every spelling of a banned built-in; the test
helpers' messages say what is wrong."""
import pytest
import torch
import torch.nn.functional as F

from lib import self_attention as ref
from lib.guard import ForbiddenCall, forbid, lifted, trusted
from lib.testing import assert_close, assert_shape

x = torch.randn(3, 4)
SPELLINGS = {
    "torch.softmax": lambda: torch.softmax(x, -1),
    "Tensor.softmax": lambda: x.softmax(-1),
    "F.softmax": lambda: F.softmax(x, -1),
    "nn.Softmax": lambda: torch.nn.Softmax(-1)(x),
    "F.log_softmax": lambda: F.log_softmax(x, -1),
    "aten._softmax": lambda: torch.ops.aten._softmax(x, -1, False),
    "F.scaled_dot_product_attention": lambda: F.scaled_dot_product_attention(x[None], x[None], x[None]),
    "nn.MultiheadAttention": lambda: torch.nn.MultiheadAttention(4, 1, batch_first=True)(x[None], x[None], x[None]),
    "lib reference": lambda: ref.softmax(x),
    "lib reference module": lambda: ref.SelfAttention(4)(x[None]),
}


@pytest.mark.parametrize("name", SPELLINGS)
def test_forbid_catches(name):
    with forbid(ops=("softmax", "scaled_dot_product"), references=("softmax", "SelfAttention")):
        with pytest.raises(ForbiddenCall):
            SPELLINGS[name]()


def test_trusted_lifts_the_ban_and_state_is_restored():
    with forbid(ops=("softmax",), references=("softmax", "scaled_dot_product_attention")):
        out, _ = trusted(ref.scaled_dot_product_attention)(x, x, x)
        assert torch.isfinite(out).all()
        assert torch.allclose(trusted(torch.softmax)(x, -1), ref.softmax.__wrapped__(x))
    torch.softmax(x, -1)  # allowed again outside
    ref.softmax(x)


def test_forbid_refuses_listed_modules_and_lifted_runs_them():
    mha = torch.nn.MultiheadAttention(4, 1, batch_first=True)
    q = x[None]
    with forbid(modules=("nn.MultiheadAttention", "F.multi_head_attention_forward")):
        with pytest.raises(ForbiddenCall, match="nn.MultiheadAttention"):
            mha.train()(q, q, q)  # in training mode it never reaches a fused operator
        with pytest.raises(ForbiddenCall):
            F.multi_head_attention_forward(q, q, q, 4, 1, mha.in_proj_weight, mha.in_proj_bias, None, None, False,
                                           0.0, mha.out_proj.weight, mha.out_proj.bias)
        with lifted():
            assert mha(q, q, q)[0].shape == q.shape
    assert mha(q, q, q)[0].shape == q.shape  # put back after the block


def test_allowed_ops_still_work_under_the_ban():
    with forbid(ops=("softmax",)):
        e = (x - x.amax(-1, keepdim=True)).exp()
        torch.logsumexp(x, -1)
        assert torch.allclose((e / e.sum(-1, keepdim=True)).sum(-1), torch.ones(3))


def test_assert_close_messages():
    with pytest.raises(AssertionError, match=r"has shape \(2, 3\), expected \(3, 2\)"):
        assert_close(torch.zeros(2, 3), torch.zeros(3, 2), "out")
    with pytest.raises(AssertionError, match=r"first at index \(1, 0\), got 5, expected 0"):
        t = torch.zeros(2, 2)
        t[1, 0] = 5
        assert_close(t, torch.zeros(2, 2), "out")
    with pytest.raises(AssertionError, match="is wrong: transposed"):
        w = torch.rand(2, 3)
        assert_close(w.T.contiguous(), w, "w", hints={"transposed": w.T})
    with pytest.raises(AssertionError, match="NaN or inf"):
        assert_close(torch.tensor([float("nan")]), torch.tensor([1.0]), "out")
    with pytest.raises(AssertionError, match="should be a tensor"):
        assert_shape([1, 2], (2,), "out")
    assert_close(torch.ones(2), torch.ones(2) + 1e-7, "out")


def test_the_ban_starts_without_importing_dynamo():
    """A dispatch mode's first call would import torch._dynamo (a second per grading kernel): it does not."""
    import subprocess
    import sys
    code = ("import sys, torch\nfrom lib.guard import forbid\nwith forbid(ops=('softmax',)):\n    torch.ones(2).exp()\n"
            "sys.exit('torch._dynamo' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_a_check_failure_in_a_notebook_ends_in_its_message():
    """In a kernel, a failed check's traceback shows the check cell's line and the message, not the frames of
    lib/testing.py between them; the error is still an AssertionError to the grader and to ``except``."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    from autograder import course
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import torch\nfrom lib.testing import assert_close\n"
        "try:\n    assert_close(torch.ones(2), torch.zeros(2), 'x')\nexcept AssertionError:\n    print('caught')\n"
        "assert_close(torch.ones(2), torch.zeros(2), 'softmax([1, 2])')")])
    with pytest.raises(CellExecutionError):
        NotebookClient(nb, timeout=60, kernel_name="python3",
                       resources={"metadata": {"path": str(course.ROOT)}}).execute()
    outputs = nb.cells[0].outputs
    assert outputs[0].text == "caught\n"
    error = outputs[-1]
    assert error.ename == "AssertionError"
    text = "\n".join(error.traceback)
    assert "testing.py" not in text, text
    assert error.traceback[-1] == ("AssertionError: softmax([1, 2]) differs from the expected value: first at index "
                                   "(0,), got 1, expected 0"), error.traceback
    assert "assert_close(torch.ones(2), torch.zeros(2), 'softmax([1, 2])')" in text, text


def test_a_demo_that_meets_nan_says_so_and_why(capsys):
    from lib.testing import report_not_finite
    assert report_not_finite({"a": 1.0, "b": torch.ones(2)}, "cause") and capsys.readouterr().out == ""
    assert not report_not_finite({"a": float("nan"), "b": torch.tensor([1.0, float("inf")]), "c": 2.0},
                                 "Subtract each row's maximum")
    assert capsys.readouterr().out == "NaN or inf in a, b: the plot leaves these points out. Subtract each row's maximum\n"
