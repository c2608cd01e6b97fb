"""What the sandbox's launcher (``autograder.sandbox``) wrote of a kernel it ran: which protections were in
force, and which limits the kernel reached. The launcher writes one JSON line when the kernel starts and one
when it ends, to the file named by ``settings.Sandbox.log``; grading and the live check read it here."""
import json
from pathlib import Path

from . import cgroup, files
from .settings import Limits


def sandbox_state(log: Path) -> tuple[str, list]:
    """Which protections the kernel ran under ('isolated', or 'limits only (why)'), and the limits of the
    sandbox it reached ('memory', 'processes'), from the launcher's log (see autograder.sandbox)."""
    try:
        lines = files.read(log, 2**16).decode().splitlines()
        log.unlink()
        states = [json.loads(line) for line in lines]
    except (OSError, UnicodeDecodeError, ValueError):
        return "unknown (the kernel did not start)", []
    state = states[0] if states else {}
    hits = [h for s in states[1:] for h in s.get("hits", [])]
    group = cgroup.Group.reopen(state["cgroup"]) if state.get("cgroup") else None
    if group is not None:  # the sandbox is gone by now: read which limits it reached, then remove its group
        hits += group.hits()
        group.remove()
    if state.get("namespaces") and state.get("network"):
        return "isolated", hits
    if state.get("namespaces"):
        return "isolated files, shared network (the kernel did not use Unix sockets)", hits
    return "limits only" + (f" ({state['error']})" if state.get("error") else " (not Linux)"), hits


def limit_notes(hits, limits: Limits) -> list:
    """What the report says of each sandbox limit a kernel reached."""
    said = {"memory": f"the kernel and the processes it started reached their memory limit "
                      f"({limits.memory // 2**20} MiB together) and were stopped",
            "processes": f"the kernel and the processes it started reached their limit of {limits.pids} "
                         f"processes and threads together; starting more failed"}
    return [said[h] for h in dict.fromkeys(hits) if h in said]


