"""Which kind of input a file is: a config, a training log or a memory snapshot.

The file name decides when its suffix is unambiguous; otherwise the first bytes do: a pickle starts
with the PROTO opcode, and a log carries a text only logs print (a memory report or an allocator
failure, the triggers of knowledge/signatures.yaml, passed in as ``log_markers``).  Anything else
is read as a config, whose reader then says what it could not parse.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePath

KINDS = ("config", "log", "snapshot")
KIND_OF_SUFFIX = {
    ".pickle": "snapshot", ".pkl": "snapshot",
    ".log": "log", ".out": "log", ".err": "log", ".gz": "log",
    ".yaml": "config", ".yml": "config", ".json": "config", ".sh": "config", ".bash": "config",
    ".slurm": "config", ".sbatch": "config",
}
PICKLE_PROTO = b"\x80"  # protocol 2+ pickles (every torch.cuda.memory._dump_snapshot file) start with it
HEAD_BYTES = 256 * 1024  # how much of a file the content test reads


def detect_kind(name: str, head: bytes, log_markers: Iterable[str]) -> str:
    """``config``, ``log`` or ``snapshot`` for a file called ``name`` whose first bytes are ``head``."""
    by_suffix = KIND_OF_SUFFIX.get(PurePath(name).suffix.lower())
    if by_suffix:
        return by_suffix
    if head.startswith(PICKLE_PROTO):
        return "snapshot"
    text = head.decode("utf-8", errors="replace")
    if any(marker in text for marker in log_markers):
        return "log"
    return "config"
