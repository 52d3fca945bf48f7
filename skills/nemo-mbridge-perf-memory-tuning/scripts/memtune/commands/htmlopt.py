"""``--html FILE`` shared by estimate, snapshot and compare: the option, and writing the page.

The page is an extra artifact beside the usual stdout answer, so it is written through the same
never-overwrite helper as ``diagnose --output``: an existing file is refused with a one-line error.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--html", type=Path, metavar="FILE",
                        help="also write a self-contained HTML page with pictures to this new file (never overwrites)")


def write(path: Path, text: str) -> None:
    from ..render.out import write_new_file

    write_new_file(path, text, option="--html")
