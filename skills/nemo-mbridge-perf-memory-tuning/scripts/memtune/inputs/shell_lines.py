"""What a pasted shell launch command really runs.

A comment line inside a backslash-continued command ends that command: bash drops the comment to the end of its line
(its own trailing backslash included), so the lines before it run as a command of their own - ``VAR=value \\``
assignments alone only set shell variables, which the program on the next line never sees - and what follows starts
a new command without them.  A user who commented out one line of a long launch block loses every setting above it.
An empty line after a trailing backslash does the same: the backslash joins the empty line, which ends the command
(modelscope/ms-swift#3453: ``NPROC_PER_NODE=2 \\`` then an empty line, then ``swift sft ...`` on one GPU).  So does a
line inside the block that lost its own trailing backslash when the next line is one more option: the options after
it never reach the program (hiyouga/LLaMA-Factory#2867: ``--fp16`` with no backslash, so ``--deepspeed ...`` on the
next line is a command of its own and the run is plain DDP).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

CUT_QUOTE = 120  # characters of the cutting comment line kept for the answer
EMPTY_AFTER = "(empty line) after"  # how an empty cutting line is quoted: by the continued line it follows
NO_BACKSLASH = "(no trailing backslash)"  # how a continued line that lost its backslash is quoted


_ELISIONS = ("...", "\u2026")  # a line standing for the lines left out of a paste
# the program's output pasted after its command, not a command line: an exception or a "Key: text" log line, a
# traceback, a rank-prefixed line ("torch.cuda.OutOfMemoryError: CUDA out of memory" after "--loss_fn 'log_sig'\\")
_OUTPUT = re.compile(r"^(?:Traceback\b|\[|[\w.]*(?:Error|Exception|Warning)\b|[\w.\-]+:\s)")


def lost_backslash(lines: Iterable[str]) -> tuple[str, str] | None:
    """The first continued line with no backslash of its own whose next line is one more option - the command's last,
    or one that continues again ("--fp16" then "--deepspeed ds.json"): (that line quoted, the option lines after it,
    which run as a command of their own).  Whether they matter is the caller's to judge: the settings they name."""
    rows = [line.strip() for line in lines]
    for i in range(1, len(rows) - 1):
        line, nxt = rows[i], rows[i + 1]
        after = rows[i + 2] if i + 2 < len(rows) else ""
        lost = rows[i - 1].endswith("\\") and line and not line.endswith("\\") and line not in _ELISIONS
        last = nxt.endswith("\\") or not after.startswith("-")  # the next option ends the block or continues it
        if lost and not line.startswith("#") and nxt.startswith("-") and last:
            rest = [nxt]
            for row in rows[i + 2:]:
                if not rest[-1].endswith("\\"):
                    break
                rest.append(row)
            return f"{NO_BACKSLASH} {line[:CUT_QUOTE]}", "\n".join(rest)
    return None


def cut_by_comment(lines: Iterable[str]) -> str | None:
    """The first comment or empty line standing inside a backslash-continued command with a command line after it
    (the comment as written, or the continued line the empty one follows), or the first continued line that lost its
    own backslash before another option line."""
    rows = [line.rstrip("\r\n") for line in lines]
    continues = False
    for i, line in enumerate(rows):
        stripped = line.strip()
        if continues and (not stripped or stripped.startswith("#")):
            after = next((r.strip() for r in rows[i + 1:] if r.strip()), "")
            if after and not after.startswith("#") and not _OUTPUT.match(after):
                return stripped[:CUT_QUOTE] if stripped else f"{EMPTY_AFTER} {rows[i - 1].strip()[:CUT_QUOTE]}"
        continues = stripped.endswith("\\") and not stripped.startswith("#")
    return None
