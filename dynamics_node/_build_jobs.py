"""How many processes compile the kernels (``_jit_build``): one per core this process may run on, at
most ``DYNAMICS_BUILD_JOBS``, make's ``-jN`` (MAKEFLAGS), colcon's ``--parallel-workers`` and what the
memory holds (a build process peaks at about a gigabyte). docs/install.md, Compiling the kernels.
"""
from __future__ import annotations

import os
import re

JOBS = "DYNAMICS_BUILD_JOBS"
PROCESS_MEMORY = 1.5e9   # bytes a build process may need (its peak is about 1e9 with numba 0.68)


def cores():
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this system
        return os.cpu_count() or 1


def memory_jobs(meminfo="/proc/meminfo"):
    """How many build processes the available memory holds (Linux's MemAvailable); None where unknown."""
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return max(1, int(int(line.split()[1]) * 1024 // PROCESS_MEMORY))
    except (OSError, ValueError, IndexError):
        pass
    return None


def ancestors(depth=8):
    """The command lines of the processes above this one (Linux's /proc), nearest first."""
    out, pid = [], os.getppid()
    while pid > 1 and len(out) < depth:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                out.append([a.decode(errors="replace") for a in f.read().split(b"\0") if a])
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def makeflags_jobs(flags):
    """N of make's -jN (or --jobs=N) in MAKEFLAGS; None for none, and for a -j without a number."""
    m = re.search(r"(?:^|\s)(?:-j\s*|--jobs[=\s]\s*)(\d+)", flags or "")
    return int(m[1]) if m else None


def colcon_workers(argv):
    """N of ``colcon build --parallel-workers N`` when argv is such a command line, else None."""
    names = [os.path.basename(a) for a in argv[:3]]
    if "colcon" not in names or "build" not in argv:
        return None
    for i, a in enumerate(argv):
        value = a.split("=", 1)[1] if a.startswith("--parallel-workers=") else (
            argv[i + 1] if a == "--parallel-workers" and i + 1 < len(argv) else None)
        if value is not None and value.isdigit():
            return int(value)
    return None


def jobs(environ=None, cores_=None, ancestors_=None, memory=None):
    """The number of build processes: the smallest of the limits of the module docstring that apply
    (colcon passes its --parallel-workers to no package: it is read from the command line of the
    colcon process above this one). Raises ValueError for a DYNAMICS_BUILD_JOBS that is not a
    positive integer."""
    environ = os.environ if environ is None else environ
    limits = [cores_ or cores(), memory if memory is not None else memory_jobs()]
    value = environ.get(JOBS, "").strip()
    if value:
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"{JOBS}={value!r}: a number of processes (1, 2, ...) is wanted")
        limits.append(int(value))
    limits.append(makeflags_jobs(environ.get("MAKEFLAGS")))
    colcon = [n for n in map(colcon_workers, ancestors() if ancestors_ is None else ancestors_) if n]
    limits.append(colcon[0] if colcon else None)
    return max(1, min(n for n in limits if n))
