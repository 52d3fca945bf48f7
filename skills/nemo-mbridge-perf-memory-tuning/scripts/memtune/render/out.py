"""The one place output leaves the process: an answer to stdout (or a new file), an error line to stderr.

Commands build their answer with the other render modules and hand the finished text here, so what a
command prints, in which encoding and how its JSON is laid out, is decided once.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def json_text(doc: Any) -> str:
    """Every command's JSON: indented, UTF-8 text kept as is (zh labels), dataclasses already turned to dicts."""
    return json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n"


def emit(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")


def emit_chunks(chunks: Iterable[str]) -> None:
    """A long answer written as it is produced (an ``--all`` plan's 10^5 rows), never held as one string."""
    for chunk in chunks:
        sys.stdout.write(chunk)


def emit_lines(lines: list[str]) -> None:
    if lines:
        emit("\n".join(lines))


def error(message: str) -> None:
    print(message, file=sys.stderr)


def write_new_file(path: Path, text: str | Iterable[str], option: str = "--output") -> None:
    """--output and --html write a new file only: an existing one is never overwritten (nothing the tool
    touches is lost).  ``option`` names the flag in the one-line error."""
    from ..errors import UserError

    try:
        with open(path, "x", encoding="utf-8") as fh:
            fh.writelines([text] if isinstance(text, str) else text)
    except FileExistsError:
        raise UserError(f"{option} {path}: file exists; choose a new path") from None
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot write ({exc.strerror})") from None
