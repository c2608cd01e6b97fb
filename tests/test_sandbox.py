"""The sandbox keeps what the kernel needs to run when it lives under /tmp, which it replaces."""
import sys

from autograder import sandbox


def test_a_course_and_venv_under_tmp_stay_visible(monkeypatch, tmp_path):
    clone = tmp_path / "clone"  # pytest's tmp_path is under /tmp on Linux, like a CI's fresh clone can be
    for folder in ("lib", ".venv/lib/site-packages", "work/w0"):
        (clone / folder).mkdir(parents=True)
    monkeypatch.setattr(sys, "prefix", str(clone / ".venv"))
    monkeypatch.setattr(sys, "exec_prefix", str(clone / ".venv"))
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    monkeypatch.setattr(sys, "path", [str(clone / "work" / "w0"), str(clone / ".venv/lib/site-packages"), "/usr/lib"])
    monkeypatch.setattr(sandbox, "__file__", str(clone / "autograder" / "sandbox.py"))
    real = str(clone.resolve())
    if real.startswith("/tmp/"):
        assert sandbox._under_tmp("/tmp/autograder-x/w0/nb") == [real]  # outermost folder only
        # a notebook folder inside the clone: the clone still comes back (the folder is bound over it, writable)
        assert sandbox._under_tmp(str((clone / "work" / "w0").resolve())) == [real]
    # folders inside the notebook's own folder are not bound separately
    assert sandbox._under_tmp(str(clone.resolve())) == []
