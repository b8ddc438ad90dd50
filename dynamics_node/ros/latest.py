"""The latest merged joint states, shared by the stream process with the node's process.

The node answers `gravity_compensation` with an empty position, draws its markers and checks joint
limits at "the latest joint states". It used to subscribe to the joint states itself for that: a
second rclpy callback per joint state, about a third of a core at 1 kHz on the 2-core machines,
taken from the stream and from the controller beside it. Now the stream process, which merges the
joint states anyway, writes its merge (per joint: the latest position and its arrival time,
CLOCK_MONOTONIC, which both processes share) into a small shared-memory file after every joint
state (two array copies, about 2 us), and the node reads it when it needs it. No pipe, no thread,
no GIL of the stream is involved in a read.

Memory layout (8-byte words, named here once): `W_SEQ` a sequence counter (odd while the writer
is writing: a seqlock), `W_NAMES` a 64-bit digest of the joint names in merge order (the reader's
model state must have the same joints), `W_N` their number, then `n` positions and `n` arrival
times (float64). The writer (stream process) creates a file per set of merged joints under /dev/shm
(else the temporary folder; a new model state of the same joints keeps the file) and sends its path
to the node, which maps it and unlinks it at once; the writer also unlinks it when it closes, so
nothing is left behind whichever side ends first.
"""
from __future__ import annotations

import hashlib
import mmap
import os
import tempfile

import numpy as np

W_SEQ, W_NAMES, W_N, W_HEADER = 0, 1, 2, 3   # header words; positions and times follow
READ_TRIES = 1000


def names_digest(names) -> int:
    h = hashlib.blake2b("\0".join(names).encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(h.digest(), "little")


def _views(buf, n):
    words = np.frombuffer(buf, dtype=np.uint64, count=W_HEADER)
    data = np.frombuffer(buf, dtype=np.float64, count=2 * n, offset=8 * W_HEADER)
    return words, data[:n], data[n:]


class LatestWriter:
    """The stream process's side: `write(pos, t_pos)` after every joint state."""

    def __init__(self, names):
        self.n = n = len(names)
        folder = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        fd, self.path = tempfile.mkstemp(prefix=f"dynamics_node_latest_{os.getpid()}_", dir=folder)
        try:
            os.ftruncate(fd, 8 * (W_HEADER + 2 * n))
            self._buf = mmap.mmap(fd, 8 * (W_HEADER + 2 * n))
        finally:
            os.close(fd)
        self.words, self.pos, self.t = _views(self._buf, n)
        self.names = tuple(names)
        self.words[W_NAMES] = names_digest(names)
        self.words[W_N] = n
        self.t[:] = -np.inf

    def write(self, pos, t_pos):
        w = self.words
        w[W_SEQ] += 1        # odd: being written
        self.pos[:] = pos
        self.t[:] = t_pos
        w[W_SEQ] += 1        # even: consistent

    def close(self):
        try:
            os.unlink(self.path)
        except OSError:
            pass


class LatestReader:
    """The node's side: `read(names)` -> (positions, arrival times) copies, or None when the
    file holds other joints or the writer kept writing through every try."""

    def __init__(self, path):
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            self._buf = mmap.mmap(fd, size, prot=mmap.PROT_READ)
        finally:
            os.close(fd)
            try:
                os.unlink(path)
            except OSError:
                pass
        n = int(np.frombuffer(self._buf, dtype=np.uint64, count=W_HEADER)[W_N])
        if size < 8 * (W_HEADER + 2 * n):
            raise ValueError(f"{path}: {size} bytes, too short for {n} joints")
        self.words, self.pos, self.t = _views(self._buf, n)

    def read(self, names):
        w = self.words
        if len(names) != int(w[W_N]) or int(w[W_NAMES]) != names_digest(names):
            return None
        for _ in range(READ_TRIES):
            s0 = int(w[W_SEQ])
            if s0 & 1:
                continue
            pos, t = self.pos.copy(), self.t.copy()
            if int(w[W_SEQ]) == s0:
                return pos, t
        return None
