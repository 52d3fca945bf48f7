"""The one place output leaves the process: an answer to stdout (or a new file), an error line to stderr.

Commands build their answer with the other render modules and hand the finished text here, so what a
command prints, in which encoding and how its JSON is laid out, is decided once.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def json_text(doc: Any) -> str:
    """Every command's JSON: indented, UTF-8 text kept as is (zh labels), dataclasses already turned to dicts.

    Strict JSON only (``allow_nan=False``): NaN or Infinity would be refused by the parsers that read the answer.
    The readers refuse non-finite figures, so one reaching here is a bug; the error names where it sits."""
    try:
        return json.dumps(doc, indent=2, ensure_ascii=False, default=str, allow_nan=False) + "\n"
    except ValueError:
        raise ValueError(f"non-finite number at {non_finite_at(doc)} in the JSON answer") from None


def non_finite_at(doc: Any, where: str = "$") -> str | None:
    """The path (``$.a[3].b``) of the first NaN or infinity in ``doc``, or None."""
    if isinstance(doc, float) and not math.isfinite(doc):
        return where
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, (list, tuple)) else ()
    for key, value in items:
        found = non_finite_at(value, f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}")
        if found:
            return found
    return None


def emit(text: str) -> None:
    """The answer to stdout: written whole (the text is encoded before any of it goes out) or refused."""
    _write_stdout(text if text.endswith("\n") or not text else text + "\n")


def emit_chunks(chunks: Iterable[str]) -> None:
    """A long answer written as it is produced (an ``--all`` plan's 10^5 rows), never held as one string."""
    for chunk in chunks:
        _write_stdout(chunk)


def _write_stdout(text: str) -> None:
    """A character stdout's encoding cannot hold (a lone surrogate from a YAML escape or a non-UTF-8 file name,
    under a strict locale) is bad input: one line, exit 2, not a traceback."""
    try:
        sys.stdout.write(text)
    except UnicodeEncodeError as exc:
        from ..atomicfile import unencodable
        from ..errors import UserError

        raise UserError(f"stdout: {unencodable(exc)}") from None


def emit_lines(lines: list[str]) -> None:
    if lines:
        emit("\n".join(lines))


def error(message: str) -> None:
    print(message, file=sys.stderr)


def write_new_file(path: Path, text: str | Iterable[str], option: str = "--output") -> None:
    """--output and --html write a new file only, whole or not at all: an existing one is never overwritten
    (nothing the tool touches is lost) and a failed write leaves nothing behind.  ``option`` names the flag in
    the one-line error."""
    from ..atomicfile import write_new

    write_new(path, [text] if isinstance(text, str) else text, option)
