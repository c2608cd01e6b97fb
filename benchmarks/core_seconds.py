"""Run a command and say how much processor time it took: the busy core-seconds of the whole machine (from
/proc/stat, so every process the command starts counts, and so does anything else running), and with
--per-process the processor seconds of each process it started, grouped by name (sampled every 50 ms from
/proc, so a process that lives less than that may be missed). Linux only.

    python benchmarks/core_seconds.py python3 course.py test
    python benchmarks/core_seconds.py --per-process .venv/bin/python -m autograder grade SUBMITTED --out OUT
"""
import collections
import os
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def busy_ticks() -> int:
    """All cores' non-idle ticks so far (user, nice, system, irq, softirq, steal)."""
    fields = open("/proc/stat").readline().split()[1:]
    return sum(int(fields[i]) for i in (0, 1, 2, 4, 5, 6, 7))


def processes() -> dict:
    """{(pid, start time): (processor seconds, name, command line)} of every process now running."""
    seen = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = open(f"/proc/{pid}/stat").read()
            command = open(f"/proc/{pid}/cmdline").read().replace("\0", " ").strip()
        except OSError:
            continue
        name, rest = stat.split("(", 1)[1].rsplit(")", 1)
        fields = rest.split()
        seen[pid, fields[19]] = ((int(fields[11]) + int(fields[12])) / TICK, name, command)
    return seen


def main(argv) -> int:
    per_process = argv[:1] == ["--per-process"]
    command = argv[1:] if per_process else argv
    if not command:
        print(__doc__)
        return 2
    before, start, last = busy_ticks(), time.monotonic(), {}
    old = set(processes()) if per_process else set()
    proc = subprocess.Popen(command)
    while proc.poll() is None:
        if per_process:
            last.update(processes())
        time.sleep(0.05)
    if per_process:
        last.update(processes())
    busy, wall = (busy_ticks() - before) / TICK, time.monotonic() - start
    if per_process:
        groups = collections.defaultdict(lambda: [0.0, 0])
        for key, (seconds, name, line) in last.items():
            if key not in old and key[0] != str(proc.pid):
                group = groups[f"{name} | {line[:80]}"]
                group[0] += seconds
                group[1] += 1
        for label, (seconds, count) in sorted(groups.items(), key=lambda g: -g[1][0]):
            print(f"{seconds:8.2f} s {count:4d} x  {label}")
    print(f"busy {busy:.0f} core-s, wall {wall:.0f} s, exit status {proc.returncode}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
