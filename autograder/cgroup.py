"""Limits for a kernel and everything it starts, counted together: a control group (cgroup).

A limit on one process (``RLIMIT_AS``) is no limit on a student: ten forked
children of one kernel each get the whole allowance. A control group counts
every process and thread of the sandbox as one: ``pids`` caps how many there
are, ``memory`` how much they use together. Past the memory limit the kernel
kills a process of the group; past the process limit ``fork`` and thread
starts fail. The launcher (``autograder.sandbox``) makes one group per
kernel, puts the kernel in it before it runs anything, reads afterwards which
limit was hit, and removes the group.

Both layouts are supported: cgroup v1 (one hierarchy per controller, as on
this course's CI machines, where root may write ``pids`` and ``memory``) and
cgroup v2 (one unified hierarchy, as in most containers, where the grader's
own group must allow ``+pids +memory`` in its subtree). The new group is made
inside the grader's own group, so any limit the grader runs under still holds.
``Group.make`` returns None where no group can be made (no permission, no
controller): the launcher then falls back (see ``autograder.sandbox``).
"""
import os
import time

ROOT = "/sys/fs/cgroup"
PREFIX = "autograder-"  # a group's name: autograder-<pid of the launcher that made it>


def _own(controller: str) -> str | None:
    """The grader's own group in the hierarchy of ``controller`` ('' for v2), from /proc/self/cgroup."""
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, names, path = line.rstrip("\n").split(":", 2)
                if controller in names.split(","):
                    return path
    except OSError:
        pass
    return None


def _write(path: str, text: str, folder: int | None = None) -> None:
    fd = os.open(path, os.O_WRONLY, dir_fd=folder)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _read(path: str, folder: int | None = None) -> str:
    try:
        fd = os.open(path, os.O_RDONLY, dir_fd=folder)
    except OSError:
        return ""
    try:
        return os.read(fd, 65536).decode()
    except (OSError, UnicodeDecodeError):
        return ""
    finally:
        os.close(fd)


def _field(text: str, name: str) -> int:
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == name and value.strip().isdigit():
            return int(value)
    return 0


def _sweep(parent: str) -> None:
    """Empty and remove the groups of launchers that are gone (killed with a grader that could not clean up):
    whatever still runs in such a group serves no grader."""
    try:
        names = [n for n in os.listdir(parent) if n.startswith(PREFIX)]
    except OSError:
        return
    for name in names:
        pid = name[len(PREFIX):]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            path = os.path.join(parent, name)
            try:
                fds = {path: (os.open(path, os.O_PATH | os.O_DIRECTORY), os.open(parent, os.O_PATH | os.O_DIRECTORY))}
            except OSError:
                continue
            Group(0, {}, fds).remove()


class Group:
    """One control group per sandbox: ``dirs`` are its folders (one per v1 controller, or one for v2).

    The group's folders are opened when it is made, and used through those descriptors from then on: the
    launcher goes on to make every file system read-only in its own mount namespace, /sys included, but
    descriptors opened before still reach the host's writable mounts."""

    def __init__(self, version: int, dirs: dict, fds: dict | None = None):
        self.version, self.dirs = version, dirs
        self.fds = fds if fds is not None else {
            path: (os.open(path, os.O_PATH | os.O_DIRECTORY), os.open(os.path.dirname(path), os.O_PATH | os.O_DIRECTORY))
            for path in dict.fromkeys(dirs.values())}

    @classmethod
    def reopen(cls, data: dict) -> "Group | None":
        """The group that ``data`` (``Group.data``, from the launcher's log) describes, or None if it is gone."""
        try:
            return cls(int(data["version"]), {k: str(v) for k, v in dict(data["dirs"]).items()
                                              if k in ("pids", "memory") and str(v).startswith(ROOT + "/")})
        except (OSError, KeyError, TypeError, ValueError):
            return None

    @property
    def data(self) -> dict:
        return {"version": self.version, "dirs": self.dirs}

    def _fd(self, controller: str) -> int:
        return self.fds[self.dirs[controller]][0]

    @classmethod
    def make(cls, memory: int, pids: int) -> "Group | None":
        """A new group capped at ``memory`` bytes (0: no cap) and ``pids`` processes and threads."""
        name = f"{PREFIX}{os.getpid()}"
        for make in (cls._v1, cls._v2):
            try:
                group = make(name)
            except OSError:
                continue
            if group is None:
                continue
            try:
                group._set(memory, pids)
                return group
            except OSError:
                group.remove()
        return None

    @classmethod
    def _v1(cls, name: str) -> "Group | None":
        dirs = {}
        for controller in ("pids", "memory"):
            own = _own(controller)
            base = os.path.join(ROOT, controller)
            if own is None or not os.path.isfile(os.path.join(base, "cgroup.procs")):
                break
            parent = base + own.rstrip("/")
            _sweep(parent)
            os.mkdir(os.path.join(parent, name))
            dirs[controller] = os.path.join(parent, name)
        if len(dirs) < 2:
            cls(1, dirs).remove()
            return None
        return cls(1, dirs)

    @classmethod
    def _v2(cls, name: str) -> "Group | None":
        own = _own("")
        unified = ROOT if os.path.isfile(os.path.join(ROOT, "cgroup.controllers")) else os.path.join(ROOT, "unified")
        if own is None or not os.path.isfile(os.path.join(unified, "cgroup.controllers")):
            return None
        parent = unified + own.rstrip("/")
        if not {"pids", "memory"} <= set(_read(os.path.join(parent, "cgroup.controllers")).split()):
            return None
        enabled = set(_read(os.path.join(parent, "cgroup.subtree_control")).split())
        if not {"pids", "memory"} <= enabled:
            _write(os.path.join(parent, "cgroup.subtree_control"), "+pids +memory")  # refused if it holds processes
        _sweep(parent)
        os.mkdir(os.path.join(parent, name))
        return cls(2, {"pids": os.path.join(parent, name), "memory": os.path.join(parent, name)})

    def _set(self, memory: int, pids: int) -> None:
        _write("pids.max", str(pids), self._fd("pids"))
        if memory > 0:
            mem = self._fd("memory")
            limit, swap = (("memory.limit_in_bytes", "memory.memsw.limit_in_bytes") if self.version == 1 else
                           ("memory.max", "memory.swap.max"))
            _write(limit, str(memory), mem)
            try:  # no swapping past the limit either, where swap is accounted
                _write(swap, str(memory) if self.version == 1 else "0", mem)
            except OSError:
                pass

    def add(self, pid: int) -> None:
        """Put process ``pid`` (not yet running student code) in the group."""
        for fd, _ in self.fds.values():
            _write("cgroup.procs", str(pid), fd)

    def hits(self) -> list:
        """Which limits the group hit: 'memory', 'processes'."""
        found = []
        events = "memory.oom_control" if self.version == 1 else "memory.events"
        if _field(_read(events, self._fd("memory")), "oom_kill"):
            found.append("memory")
        if _field(_read("pids.events", self._fd("pids")), "max"):
            found.append("processes")
        return found

    def remove(self) -> None:
        """Kill whatever is left in the group, then remove it."""
        for path, (fd, parent) in self.fds.items():
            for _ in range(100):
                for pid in _read("cgroup.procs", fd).split():
                    try:
                        os.kill(int(pid), 9)
                    except OSError:
                        pass
                try:
                    os.rmdir(os.path.basename(path), dir_fd=parent)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
            os.close(fd)
            os.close(parent)
        self.fds = {}
