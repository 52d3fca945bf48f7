"""What a pasted shell launch command really runs.

A comment line inside a backslash-continued command ends that command: bash drops the comment to the end of its line
(its own trailing backslash included), so the lines before it run as a command of their own - ``VAR=value \\``
assignments alone only set shell variables, which the program on the next line never sees - and what follows starts
a new command without them.  A user who commented out one line of a long launch block loses every setting above it.
An empty line after a trailing backslash does the same: the backslash joins the empty line, which ends the command
(modelscope/ms-swift#3453: ``NPROC_PER_NODE=2 \\`` then an empty line, then ``swift sft ...`` on one GPU).
"""

from __future__ import annotations

from collections.abc import Iterable

CUT_QUOTE = 120  # characters of the cutting comment line kept for the answer
EMPTY_AFTER = "(empty line) after"  # how an empty cutting line is quoted: by the continued line it follows


def cut_by_comment(lines: Iterable[str]) -> str | None:
    """The first comment or empty line standing inside a backslash-continued command with a command line after it:
    the comment as written, or the continued line the empty one follows."""
    rows = [line.rstrip("\r\n") for line in lines]
    continues = False
    for i, line in enumerate(rows):
        stripped = line.strip()
        if continues and (not stripped or stripped.startswith("#")):
            after = next((r.strip() for r in rows[i + 1:] if r.strip()), "")
            if after and not after.startswith("#"):
                return stripped[:CUT_QUOTE] if stripped else f"{EMPTY_AFTER} {rows[i - 1].strip()[:CUT_QUOTE]}"
        continues = stripped.endswith("\\") and not stripped.startswith("#")
    return None
