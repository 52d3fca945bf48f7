"""Read a launch shell script: which line starts training, and which variables are exported before it.

The allocator reads ``PYTORCH_CUDA_ALLOC_CONF`` once, at the first CUDA allocation,
so only an ``export`` that runs before the training command reaches the job.
The patterns that recognise a training command live in knowledge/validations.yaml
(``launch_script.command_patterns``); this module only applies them.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class LogicalLine:
    """One shell command that may span physical lines joined by a trailing backslash."""

    first: int  # 0-based index of its first physical line
    last: int  # 0-based index of its last physical line
    text: str  # physical lines joined, continuation backslashes removed


def logical_lines(lines: list[str]) -> list[LogicalLine]:
    out: list[LogicalLine] = []
    start, parts = None, []
    for i, raw in enumerate(lines):
        body = raw.rstrip("\r\n")
        if start is None:
            start = i
        if body.endswith("\\") and not body.lstrip().startswith("#"):
            parts.append(body[:-1])
            continue
        parts.append(body)
        out.append(LogicalLine(start, i, " ".join(p.strip() for p in parts).strip()))
        start, parts = None, []
    if start is not None:
        out.append(LogicalLine(start, len(lines) - 1, " ".join(p.strip() for p in parts).strip()))
    return out


def compile_patterns(patterns: Iterable[str]) -> list[re.Pattern[str]]:
    return [re.compile(p) for p in patterns]


def find_training_command(lines: list[str], patterns: list[re.Pattern[str]]) -> LogicalLine | None:
    """The first logical line that starts a training launcher (comments never match)."""
    for logical in logical_lines(lines):
        if logical.text.startswith("#"):
            continue
        if any(p.search(logical.text) for p in patterns):
            return logical
    return None


def parse_exports(text: str) -> list[tuple[str, str]]:
    """``export A=1 B="x y"`` -> [(A, 1), (B, x y)]; names without a value are left out."""
    try:
        words = shlex.split(text, comments=True)
    except ValueError:
        return []
    if not words or words[0] != "export":
        return []
    pairs = []
    for word in words[1:]:
        name, sep, value = word.partition("=")
        if sep and _NAME.match(name):
            pairs.append((name, value))
    return pairs


def command_assignments(text: str) -> dict[str, str]:
    """``A=1 env B=2 torchrun ...`` -> {A: 1, B: 2}: assignments the shell gives the command itself.

    They win over any earlier ``export`` of the same name, so a fix exported above the
    command does not reach the job while one of these still sets the variable.
    """
    try:
        words = shlex.split(text, comments=True)
    except ValueError:
        return {}
    found: dict[str, str] = {}
    for i, word in enumerate(words):
        name, sep, value = word.partition("=")
        if sep and _NAME.match(name):
            found[name] = value
        elif not (word == "env" and i == len(found)):
            break
    return found


def launch_facts(text: str, patterns: list[re.Pattern[str]]) -> dict[str, Any]:
    """``launch.*`` facts: the training command and the exports before/after it."""
    lines = text.splitlines(keepends=True)
    command = find_training_command(lines, patterns)
    before: dict[str, str] = {}
    after: list[str] = []
    for logical in logical_lines(lines):
        for name, value in parse_exports(logical.text):
            if command is None or logical.first < command.first:
                before[name] = value
            elif name not in before and name not in after:
                after.append(name)
    on_command = command_assignments(command.text) if command else {}
    return {
        "provided": True,
        "command": command.text if command else None,
        "command_line": command.first + 1 if command else None,
        "exports": {**before, **on_command},  # what the training process sees: the command's own wins
        "command_env": on_command,
        "exported": sorted({**before, **on_command}),
        "exports_after_command": after,
    }
