"""JSON parsing shared by the readers: every way json.loads can fail becomes one UserError line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import UserError


def parse_json(text: str, path: str | Path) -> Any:
    """``json.loads`` with the file and line named on failure (deep nesting and huge ints included)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    except (ValueError, RecursionError):
        raise UserError(f"{path}: invalid JSON: nested too deeply or a number with thousands of digits") from None
