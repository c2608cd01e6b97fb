"""The grader's end of a student's kernel: the Unix sockets it talks over, and a judge's requests to it.

Two callers drive a kernel. nbgrader's Execute step (``execute.py``) runs a
whole notebook through nbclient, with ``SocketKernelManager``. The live check
(``live.py``) starts a sandboxed kernel itself (``SandboxedKernel``) and runs
only what one exercise needs. Both send a judge's requests the same way
(``request_code``: a ``serve(...)`` call of ``autograder.probe``), keep the
same reply limit, and read the outcome with ``reply_of``, so a judge gets the
same answers and the same failures from either.
"""
import base64
import os
import shutil
import signal
import subprocess
import tempfile
import uuid
from dataclasses import dataclass, field
from time import monotonic

from jupyter_client.manager import AsyncKernelManager
from traitlets import CaselessStrEnum

from . import probe, proctree, settings, spawn
from .zygote import FRESH

# The most a kernel may send back for one judge's request, in bytes (characters of ASCII JSON), all its
# replies together. The kernel side answers each request once, with at most probe.MAX_BYTES (64 MiB); grading
# the nine solution notebooks, the largest reply was 0.15 MiB (146 KiB, a judge of greedy_decode_cached), and
# every request got one reply. A kernel that sends more is not answering honestly: the request fails, and
# what it sent beyond the limit is dropped, not kept in the grader's memory.
PROBE_REPLY_LIMIT = probe.MAX_BYTES
PROBE_CODE = "__import__('autograder.probe', fromlist=['serve']).serve(__import__('base64').b64decode('{}').decode())"

# what a student reads when the kernel died or hung: the same words from grading and from the live check
DIED = ("the kernel died while running this cell (os._exit, a crash, or more memory than the limit allows)")
HUNG = "this cell ran past its time limit and did not stop when interrupted"


def request_code(text: str) -> str:
    """The code that has the kernel answer one request (a JSON text of ``autograder.probe``)."""
    return PROBE_CODE.format(base64.b64encode(text.encode()).decode("ascii"))


class KernelStopped(Exception):
    """The kernel died or stopped answering while a judge was talking to it."""


def failure(message: str):
    from .checks import ProbeFailure
    return ProbeFailure(message)


def probe_timeout(seconds: int):
    return failure(f"the student's code ran past the time limit ({seconds} s) and was interrupted")


def reply_of(replies: list, nbytes: int, error: dict | None, seconds: int) -> str:
    """A request's reply, from what the kernel sent while it ran: its probe replies (``nbytes`` of them in
    all) and the error the request cell ended with, if any. Raises ``ProbeFailure`` when there is none."""
    if nbytes > PROBE_REPLY_LIMIT:
        raise failure(f"the kernel's answer was larger than {PROBE_REPLY_LIMIT // 2**20} MiB")
    if error is not None:
        if error.get("ename") == "CellTimeoutError":
            raise probe_timeout(seconds)
        if not replies:
            raise failure(f"the kernel could not answer ({error.get('ename')}: {str(error.get('evalue'))[:200]})")
    if not replies:
        raise failure("the kernel sent no answer")
    return replies[-1]


class SocketKernelManager(AsyncKernelManager):
    """nbclient's kernel manager, for a kernel that listens on Unix sockets (Jupyter's ``ipc`` transport), in a fresh
    folder of its own, not on TCP ports of the host.

    TCP ports on the host's loopback are reachable by every process on the machine, every other student's
    kernel included. With Unix sockets the grading kernel needs no network at all, so the sandbox gives it
    a network namespace of its own (``autograder.sandbox``)."""
    transport = CaselessStrEnum(["tcp", "ipc"], default_value="ipc", config=True)

    def _ip_default(self) -> str:
        if self.transport != "ipc":
            return super()._ip_default()
        return os.path.join(tempfile.mkdtemp(prefix="k", dir=os.environ.get(settings.SOCKETS) or None), "ipc")

    def cleanup_ipc_files(self) -> None:
        super().cleanup_ipc_files()
        if self.transport == "ipc" and os.path.basename(self.ip) == "ipc":
            shutil.rmtree(os.path.dirname(self.ip), ignore_errors=True)


@dataclass
class Outcome:
    """What one piece of code did in the kernel: the error it ended with (``ename``, ``evalue``), the probe
    replies it published, their size, and whether it ran past its time (it was interrupted then)."""
    error: dict | None = None
    replies: list = field(default_factory=list)
    nbytes: int = 0
    timed_out: bool = False


def within(fn, arg, seconds: float):
    """``fn(arg)`` run in a thread of its own for at most ``seconds``: (finished, its result or None).
    A request from the kernel may ask the grader to run one of the notebook's references on arguments the
    kernel chose (``probe._stub``); a call too large to finish in the kernel's time is stopped with an
    exception raised in its thread (at its next Python line: each PyTorch operation in it still finishes)."""
    import ctypes
    import threading
    result = []
    worker = threading.Thread(target=lambda: result.append(fn(arg)), daemon=True)
    worker.start()
    worker.join(max(seconds, 0))
    if worker.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident), ctypes.py_object(TimeoutError))
        return False, None
    return True, (result[0] if result else None)


class SandboxedKernel:
    """A kernel started by ``autograder.sandbox`` (with the environment ``env`` says: its view, its limits)
    on Unix sockets in a folder under ``sockets``, driven with Jupyter's blocking client.

    The launcher is killed with the thread that started it (the sandbox's parent-death signal): start these
    from a thread that lives as long as they should. ``launch`` starts the launcher: a fresh process by default,
    or a fork of a zygote (``autograder.zygote.Zygote.command``)."""

    def __init__(self, env: dict, cwd: str, sockets: str, startup: float = 120, launch=FRESH):
        from jupyter_client import BlockingKernelClient
        from jupyter_client.connect import write_connection_file

        self.folder, self.stopped = tempfile.mkdtemp(prefix="k", dir=sockets), ""
        connection = os.path.join(self.folder, "kernel.json")
        write_connection_file(connection, ip=os.path.join(self.folder, "ipc"), transport="ipc",
                              key=uuid.uuid4().hex.encode())
        self.proc = subprocess.Popen([*launch, "-f", connection], env=env,
                                     cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        self.kc = BlockingKernelClient(connection_file=connection)
        self.kc.load_connection_file()
        # jupyter_client takes a kernel for dead when one heartbeat is a second late, which a busy machine's kernel
        # starting up can be: "the kernel did not start", though it had. A dead one still fails within seconds.
        self.kc.hb_channel.time_to_dead = 10.0
        self.kc.start_channels()
        try:
            self.kc.wait_for_ready(timeout=startup)
        except RuntimeError:
            self.close()
            raise KernelStopped("the kernel did not start") from None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def cpu(self) -> float | None:
        """Processor seconds of the kernel and every process below its launcher, read from /proc."""
        return proctree.cpu(spawn.launcher(self.proc.pid))

    def run(self, code: str, timeout: float, answer=None) -> Outcome:
        """Run ``code`` (not kept in the kernel's history). While it runs, an input request is answered with
        ``answer(prompt)``; a display of ``probe.MIME`` is kept as a reply, everything else it shows is
        dropped. Past ``timeout`` seconds the kernel is interrupted; when it does not stop, it is killed and
        ``KernelStopped`` raised, as it is when the kernel dies."""
        import zmq

        if self.stopped or not self.alive():
            raise KernelStopped(self.stopped or DIED)
        msg_id = self.kc.execute(code, store_history=False, allow_stdin=True)
        out, idle, replied = Outcome(), False, False
        poller = zmq.Poller()
        channels = {self.kc.iopub_channel.socket: self.kc.iopub_channel,
                    self.kc.stdin_channel.socket: self.kc.stdin_channel,
                    self.kc.shell_channel.socket: self.kc.shell_channel}
        for sock in channels:
            poller.register(sock, zmq.POLLIN)
        deadline, interrupted = monotonic() + timeout, None
        while not (idle and replied):
            now = monotonic()
            if now >= deadline and interrupted is None:
                out.timed_out = True
                out.error = {"ename": "CellTimeoutError", "evalue": f"ran past {timeout:.0f} s"}
                self.interrupt()
                interrupted = now
            if interrupted is not None and now - interrupted > 5:
                self.close(HUNG)
                raise KernelStopped(HUNG)
            ready = dict(poller.poll(int(max(0.01, min(1.0, deadline - now if interrupted is None else 1.0)) * 1000)))
            if not ready and not self.alive():
                self.close(DIED)
                raise KernelStopped(DIED)
            for sock in ready:
                channel = channels[sock]
                # a kernel can send without end: drain at most a few hundred messages, then look at the clock
                for _ in range(500):
                    if not channel.msg_ready():
                        break
                    try:
                        msg = channel.get_msg(timeout=0)
                    except (ValueError, KeyError, TypeError, IndexError):
                        continue  # a message the kernel forged or cut short: dropped
                    if not isinstance(msg.get("parent_header"), dict) or msg["parent_header"].get("msg_id") != msg_id:
                        continue
                    kind, content = msg.get("msg_type"), msg.get("content")
                    if not isinstance(content, dict):
                        continue
                    if channel is self.kc.stdin_channel and kind == "input_request":
                        prompt = str(content.get("prompt", ""))
                        finished, reply = within(answer, prompt, deadline - monotonic()) if answer else (True, None)
                        if not finished:  # the grader's reference ran past the kernel's time: a time-out
                            deadline = monotonic()
                        self.kc.input(reply or probe.pack({"ok": False, "fault": "no answer"}, {}))
                    elif channel is self.kc.shell_channel and kind == "execute_reply":
                        replied = True
                    elif kind == "status" and content.get("execution_state") == "idle":
                        idle = True
                    elif kind == "error" and not out.timed_out:
                        out.error = {"ename": content.get("ename", "Error"), "evalue": content.get("evalue", "")}
                    elif kind == "display_data" and isinstance(content.get("data", {}).get(probe.MIME), str):
                        text = content["data"][probe.MIME]
                        out.nbytes += len(text)
                        if out.nbytes <= PROBE_REPLY_LIMIT:
                            out.replies.append(text)
                        else:
                            out.replies.clear()
        return out

    def interrupt(self) -> None:
        """SIGINT to the launcher, which hands it to the kernel (ipykernel's own way of being interrupted)."""
        try:
            os.kill(self.proc.pid, signal.SIGINT)
        except ProcessLookupError:
            pass

    def close(self, why: str = "the kernel was closed") -> None:
        """Kill the launcher (its kernel, and everything the kernel started, die with it)."""
        self.stopped = self.stopped or why
        try:
            self.kc.stop_channels()
        except Exception:  # noqa: BLE001 - closing what may be half made
            pass
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

