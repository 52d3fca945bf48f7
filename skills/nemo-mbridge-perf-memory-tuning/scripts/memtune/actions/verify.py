"""Evaluate the checks declared in knowledge/validations.yaml; print the command checks.

``env`` and ``config`` checks are pure condition evaluations over the facts the
user passed.  ``command`` checks are upstream tests (GPU jobs of minutes): the
helper never starts them.  It prints the exact command line, built from the
argument list in the knowledge base (a placeholder may only replace a whole
argument and is shell-quoted), with its directory and time limit, so that the
user, or the agent with the user's OK, runs it where the GPUs are.
"""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..conditions import evaluate
from ..engine import check_constraints
from ..errors import UserError
from ..knowledge import Knowledge
from ..textfmt import fill

_PLACEHOLDER = re.compile(r"^\{([a-z_]+)\}$")
# Which option supplies the facts a check needs, for the "skipped" hint.
_SOURCE_HINT = {"launch": "--launch", "env": "--env / --launch", "config": "--config / --set"}


@dataclass
class StepResult:
    """``detail``: the failure text (from validations.yaml, in the asked language) or the line to run.
    A skipped step says why in ``reason`` instead: a ui.yaml label id and its values, worded by render/verify.py."""

    id: str
    kind: str
    status: str  # pass | fail | n/a | skipped | to-run
    detail: str = ""
    seconds: float | None = None
    reason: tuple[str, dict[str, str]] | None = None


class MissingValue(UserError):
    """A command step's placeholder has no value (``option`` names the flag that gives it)."""

    def __init__(self, option: str) -> None:
        super().__init__(f"needs {option}")
        self.option = option


def steps(kb: Knowledge) -> list[dict[str, Any]]:
    return kb.entries("validations")


def command_patterns(kb: Knowledge) -> list[str]:
    return kb.tables["validations"]["launch_script"]["command_patterns"]


def select(kb: Knowledge, ids: list[str] | None) -> list[dict[str, Any]]:
    """The steps named by ``ids`` (all when None), in knowledge-base order; unknown ids are an error."""
    every = steps(kb)
    if not ids:
        return every
    known = {s["id"] for s in every}
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise UserError(f"unknown validation id {', '.join(map(repr, unknown))}; known: {', '.join(sorted(known))}")
    return [s for s in every if s["id"] in ids]


# --------------------------------------------------------------------------- env / config checks


def _missing_source(step: Mapping[str, Any], flat: Mapping[str, Any]) -> tuple[str, dict[str, str]] | None:
    missing = [f for f in step.get("needs", []) if not flat.get(f)]
    if not missing:
        return None
    hints = sorted({_SOURCE_HINT.get(f.split(".", 1)[0], f) for f in missing})
    return "verify-needs", {"sources": "; ".join(hints)}


def evaluate_check(step: Mapping[str, Any], flat: Mapping[str, Any], kb: Knowledge, lang: str = "en") -> StepResult:
    """pass / fail / n/a (does not apply here) / skipped (the evidence it needs was not given)."""
    result = StepResult(step["id"], step["kind"], "skipped")
    missing = _missing_source(step, flat)
    if missing:
        result.reason = missing
        return result
    if step.get("applies_when") and not evaluate(step["applies_when"], flat):
        result.status = "n/a"
        return result
    if step["kind"] == "config":
        violated = [v.id for v in check_constraints(flat, kb)]
        passed = not violated
        extra = {"violations": ", ".join(violated)}
    else:
        passed = evaluate(step["pass_when"], flat)
        extra = {}
    result.status = "pass" if passed else "fail"
    if not passed:
        result.detail = fill(step["fail"][lang], {**flat, **extra})
    return result


# --------------------------------------------------------------------------- command checks


def command_argv(step: Mapping[str, Any], values: Mapping[str, str]) -> tuple[list[str], str | None]:
    """The argv and working directory with whole-item placeholders filled; a missing value is an error."""
    def sub(item: str) -> str:
        m = _PLACEHOLDER.match(item)
        if m is None:
            if "{" in item or "}" in item:
                raise UserError(f"validations.yaml: {step['id']}: {item!r} mixes a placeholder with text")
            return item
        if not values.get(m.group(1)):
            raise MissingValue(f"--{m.group(1).replace('_', '-')}")
        return values[m.group(1)]

    argv = [sub(item) for item in step["argv"]]
    cwd = sub(step["cwd"]) if step.get("cwd") else None
    return argv, cwd


def shell_line(step: Mapping[str, Any], argv: list[str], cwd: str | None) -> str:
    """One line to paste: cd, the step's time limit, the argv; every item shell-quoted."""
    run = shlex.join(["timeout", str(step["timeout_s"]), *argv])
    return f"cd {shlex.quote(cwd)} && {run}" if cwd else run


def plan_command(step: Mapping[str, Any], values: Mapping[str, str]) -> StepResult:
    """The command line to run (status to-run), or why it cannot run here yet (skipped)."""
    result = StepResult(step["id"], "command", "to-run")
    try:
        argv, cwd = command_argv(step, values)
    except MissingValue as exc:
        result.status, result.reason = "skipped", ("verify-needs", {"sources": exc.option})
        return result
    problem = _preflight(step, argv, cwd)
    if problem:
        result.status, result.reason = "skipped", problem
        return result
    result.detail = shell_line(step, argv, cwd)
    return result


def _preflight(step: Mapping[str, Any], argv: list[str], cwd: str | None) -> tuple[str, dict[str, str]] | None:
    if cwd is not None and not Path(cwd).is_dir():
        return "verify-not-a-directory", {"path": cwd}
    base = Path(cwd or ".")
    missing = [f for f in step.get("requires_files", []) if not (base / f).is_file()]
    if missing:
        return "verify-missing-files", {"path": str(base), "files": ", ".join(missing)}
    if shutil.which(argv[0]) is None:
        return "verify-not-on-path", {"program": argv[0]}
    return None
