"""Write one fix into the user's launch script or config YAML, with a backup first; and undo it.

What is written comes from the fix's ``apply.env`` (``export`` lines, for a shell
script) or ``apply.bridge_override`` (``section.key=value``, for a YAML config) in
knowledge/fixes.yaml; nothing else is invented here.  Edits are line-based so the
rest of the file stays byte-identical: a YAML file is never re-dumped, and the
edited YAML must parse to the old data with only the target keys changed.
"""

from __future__ import annotations

import copy
import difflib
import json
import re
import shlex
import stat
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from ..errors import UserError
from ..inputs import limits, yamltree
from . import launch, safewrite
from .safewrite import BACKUP_TAG  # noqa: F401  (re-exported for the CLI text)

MAX_TARGET_BYTES = 4 * 1024 * 1024  # a launch script or config is small; anything larger is not one
SHELL_SUFFIXES = (".sh", ".bash", ".zsh", ".sbatch", ".slurm")
YAML_SUFFIXES = (".yaml", ".yml")
_SHEBANG = re.compile(rb"^#!\s*\S*(/|\s)(ba|z|da|k)?sh\b")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_KEY_PATH = re.compile(r"^[A-Za-z_][\w-]*(\.[A-Za-z_][\w-]*)+$")
_PLACEHOLDER = re.compile(r"<[^>]*>|\.\.\.|\{[^}]*\}")
_OPTION_LIST = re.compile(r"^[A-Za-z_]\w*:[^,:\s]+(,[A-Za-z_]\w*:[^,:\s]+)*$")


@dataclass
class Plan:
    """The edit ``apply`` would make; nothing is written until ``write_with_backup``."""

    path: Path
    kind: str  # shell | yaml
    old_text: str
    new_text: str
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.old_text != self.new_text

    def diff(self) -> str:
        return unified_diff(self.old_text, self.new_text, str(self.path))


def unified_diff(old: str, new: str, name: str, labels: tuple[str, str] = ("now", "after")) -> str:
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=name, tofile=name, fromfiledate=labels[0], tofiledate=labels[1])
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


# --------------------------------------------------------------------------- target files


def read_target(path: Path) -> tuple[str, str]:
    """``(kind, text)`` of a file apply may edit; refuses links, binaries, big files and other types."""
    try:
        info = path.lstat()
    except OSError:
        raise UserError(f"{path}: no such file") from None
    if stat.S_ISLNK(info.st_mode):
        raise UserError(f"{path}: is a symbolic link; pass the real file if you mean it")
    if not stat.S_ISREG(info.st_mode):
        raise UserError(f"{path}: not a regular file")
    data = limits.read_bytes(path, "a launch script or config", MAX_TARGET_BYTES)
    if b"\0" in data:
        raise UserError(f"{path}: binary file (contains NUL bytes); only shell scripts and YAML are edited")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text (byte {exc.start}); only shell scripts and YAML are edited") from None
    suffix = path.suffix.lower()
    if suffix in YAML_SUFFIXES:
        return "yaml", text
    if suffix in SHELL_SUFFIXES or _SHEBANG.match(data):
        return "shell", text
    raise UserError(f"{path}: not a shell script ({', '.join(SHELL_SUFFIXES)} or a #!/bin/sh line) "
                    f"or YAML ({', '.join(YAML_SUFFIXES)}); nothing changed")


# --------------------------------------------------------------------------- settings from the fix


def _checked_value(fix_id: str, item: str, value: str) -> str:
    if _PLACEHOLDER.search(value):
        raise UserError(f"fix {fix_id}: {item!r} needs a value you choose; set it by hand")
    return value


def env_settings(fix: dict[str, Any]) -> list[tuple[str, str]]:
    """``NAME=VALUE`` pairs from ``apply.env`` (an optional leading ``export`` is allowed)."""
    pairs = []
    for item in fix.get("apply", {}).get("env", []):
        try:
            words = shlex.split(item)
        except ValueError:
            words = []
        if words and words[0] == "export":
            words = words[1:]
        name, sep, value = words[0].partition("=") if len(words) == 1 else ("", "", "")
        if not sep or not _ENV_NAME.match(name):
            raise UserError(f"fix {fix['id']}: env line {item!r} is not NAME=VALUE; apply it by hand")
        pairs.append((name, _checked_value(fix["id"], item, value)))
    return pairs


def override_settings(fix: dict[str, Any]) -> list[tuple[list[str], str]]:
    """``(key path, raw value)`` from ``apply.bridge_override`` (``section.key=value``)."""
    pairs = []
    for item in fix.get("apply", {}).get("bridge_override", []):
        key, sep, value = item.strip().strip("'\"").lstrip("+").partition("=")
        if not sep or not _KEY_PATH.match(key):
            raise UserError(f"fix {fix['id']}: apply.bridge_override item {item!r} is not section.key=value; "
                            "apply it by hand")
        pairs.append((key.split("."), _checked_value(fix["id"], item, value)))
    return pairs


def plan_apply(fix: dict[str, Any], path: Path, command_patterns: list[str]) -> Plan:
    kind, text = read_target(path)
    if kind == "shell":
        pairs = env_settings(fix)
        if not pairs:
            raise UserError(f"fix {fix['id']} sets no environment variable, so there is nothing to add to the shell "
                            f"script {path}; see 'memtune explain {fix['id']}'")
        new_text, notes = edit_shell(text, pairs, launch.compile_patterns(command_patterns), str(path), fix["id"])
    else:
        overrides = override_settings(fix)
        if not overrides:
            raise UserError(f"fix {fix['id']} has no Bridge config key to set in {path}; "
                            f"see 'memtune explain {fix['id']}'")
        new_text, notes = edit_yaml(text, overrides, str(path))
    other = {"shell": ("bridge_override", "config YAML"), "yaml": ("env", "launch script")}[kind]
    if fix.get("apply", {}).get(other[0]):
        notes.append(f"{fix['id']} also needs {', '.join(fix['apply'][other[0]])}; "
                     f"apply it to your {other[1]} too (memtune apply {fix['id']} --to FILE)")
    return Plan(path, kind, text, new_text, notes)


# --------------------------------------------------------------------------- shell edit


def _eol(line: str) -> str:
    return "\r\n" if line.endswith("\r\n") else "\n"


def _merge_options(old: str, new: str) -> str:
    """``a:1,b:2`` + ``b:3,c:4`` -> ``a:1,b:3,c:4`` (the allocator's ``opt:val,...`` format)."""
    merged = dict(part.split(":", 1) for part in old.split(","))
    merged.update(part.split(":", 1) for part in new.split(","))
    return ",".join(f"{k}:{v}" for k, v in merged.items())


def _wanted(name: str, old: str | None, value: str, notes: list[str]) -> str | None:
    """The value to write for ``name`` given what the job sees now; None when it already has it."""
    if old == value:
        notes.append(f"{name} is already {value!r} for the training command")
        return None
    if old is not None and _OPTION_LIST.match(old) and _OPTION_LIST.match(value):
        merged = _merge_options(old, value)
        if merged == old:
            notes.append(f"{name} already contains {value!r}")
            return None
        notes.append(f"{name} was {old!r}; the new value keeps its other options")
        return merged
    if old is not None:
        notes.append(f"{name} was {old!r}; the new value overrides it")
    return value


def _edit_command_assignment(lines: list[str], command: launch.LogicalLine, name: str, value: str,
                             source: str) -> list[str]:
    """Rewrite ``NAME=...`` in front of the training command, where it wins over any export."""
    pattern = re.compile(rf"(^|\s){re.escape(name)}=(\"[^\"]*\"|'[^']*'|[^\s;&|]*)")
    lines = list(lines)
    for i in range(command.first, command.last + 1):
        m = pattern.search(lines[i])
        if m:
            lines[i] = f"{lines[i][:m.start(2)]}{shlex.quote(value)}{lines[i][m.end(2):]}"
            edited = launch.logical_lines(lines[command.first:command.last + 1])[0].text
            if launch.command_assignments(edited).get(name) == value:
                return lines
            break
    raise UserError(f"{source}:{command.first + 1}: the training command sets {name} itself, which wins over an "
                    f"export, and memtune could not edit it there; set {name}={value} on that line by hand")


def edit_shell(text: str, pairs: list[tuple[str, str]], patterns: list[re.Pattern[str]],
               source: str, fix_id: str) -> tuple[str, list[str]]:
    """Insert ``export NAME=VALUE`` lines just before the first training command.

    A variable the command line itself assigns (``NAME=x torchrun ...``) is edited there
    instead: that assignment wins over every export, so an export would report a fix the
    job never sees.
    """
    lines = text.splitlines(keepends=True)
    command = launch.find_training_command(lines, patterns)
    if command is None:
        raise UserError(f"{source}: no training command (torchrun, srun, python, ...) found; "
                        "add the export before your launch line by hand")
    facts = launch.launch_facts(text, patterns)
    notes: list[str] = []
    exports: list[str] = []
    first = lines[command.first]
    indent = first[: len(first) - len(first.lstrip())]
    eol = _eol(first)
    for name, value in pairs:
        on_command = name in facts["command_env"]
        wanted = _wanted(name, facts["exports"].get(name), value, notes)
        if wanted is None:
            continue
        if on_command:
            lines = _edit_command_assignment(lines, command, name, wanted, source)
            notes.append(f"{name} is set on the training command itself (line {command.first + 1}), which wins over "
                         "any export; it was edited there")
        else:
            exports.append(f"{indent}export {name}={shlex.quote(wanted)}{eol}")
    if exports:
        lines = lines[: command.first] + [f"{indent}# added by memtune apply {fix_id}{eol}", *exports] \
            + lines[command.first:]
    return "".join(lines), notes


# --------------------------------------------------------------------------- YAML edit


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _is_content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#") and stripped not in ("---", "...")


def _key_re(key: str) -> re.Pattern[str]:
    quoted = re.escape(key)
    return re.compile(rf"^(?P<ind> *)(?P<key>{quoted}|\"{quoted}\"|'{quoted}')\s*:(?P<rest>(\s.*)?)$")


def _find_key(lines: list[str], start: int, end: int, indent: int, key: str) -> int | None:
    pattern = _key_re(key)
    for i in range(start, end):
        if _is_content(lines[i]) and _indent(lines[i]) == indent and pattern.match(lines[i].rstrip("\r\n")):
            return i
    return None


def _block_end(lines: list[str], idx: int, end: int) -> int:
    """One past the last content line that belongs to the key on line ``idx``."""
    own = _indent(lines[idx])
    last = idx
    for j in range(idx + 1, end):
        if not _is_content(lines[j]):
            continue
        ind = _indent(lines[j])
        if ind < own or (ind == own and not lines[j].lstrip().startswith("- ")):
            break
        last = j
    return last + 1


def _content_end(lines: list[str], start: int, end: int) -> int:
    last = start - 1
    for j in range(start, end):
        if _is_content(lines[j]):
            last = j
    return last + 1


def _indent_step(lines: list[str]) -> int:
    steps = [b - a for a, b in zip(map(_indent, lines), map(_indent, lines[1:]), strict=False) if b > a]
    return min(steps) if steps else 2


def _split_comment(rest: str) -> tuple[str, str]:
    """``' value  # note'`` -> ``('value', '  # note')``, leaving '#' inside quotes alone."""
    quote = None
    for i, ch in enumerate(rest):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or rest[i - 1] in " \t"):
            j = i
            while j > 0 and rest[j - 1] in " \t":
                j -= 1
            return rest[:j].strip(), rest[j:]
    return rest.strip(), ""


def _yaml_scalar(raw: str) -> tuple[Any, str]:
    """The value an override means, and YAML text that reads back as exactly that value."""
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        value = raw
    text = raw.strip() or "null"
    try:
        if yaml.safe_load(f"k: {text}") == {"k": value}:
            return value, text
    except yaml.YAMLError:
        pass
    return value, json.dumps(value)


def _set_in(data: dict[str, Any], path: list[str], value: Any) -> None:
    for key in path[:-1]:
        if not isinstance(data.get(key), dict):
            data[key] = {}
        data = data[key]
    data[path[-1]] = value


def edit_yaml(text: str, overrides: list[tuple[list[str], str]], source: str) -> tuple[str, list[str]]:
    """Set each ``section.key`` by editing only its line (or adding lines); the rest stays as it was."""
    try:
        old_data = yamltree.safe_load_bounded(text, source)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise UserError(f"{source}:{mark.line + 1 if mark else '?'}: invalid YAML; nothing changed") from None
    if old_data is None:
        old_data = {}
    if not isinstance(old_data, dict):
        raise UserError(f"{source}: top level is a {type(old_data).__name__}, not a mapping of config sections")
    lines = text.splitlines(keepends=True)
    eol = _eol(lines[0]) if lines else "\n"
    step = _indent_step([ln for ln in lines if _is_content(ln)])
    expected = copy.deepcopy(old_data)
    notes = []
    for path, raw in overrides:
        value, rendered = _yaml_scalar(raw)
        dotted = ".".join(path)
        current: Any = old_data
        for key in path:
            current = current.get(key) if isinstance(current, dict) else None
        if current == value and _has_path(old_data, path):
            notes.append(f"{dotted} is already {rendered}")
            continue
        lines = _set_path(lines, path, rendered, step, eol, source)
        _set_in(expected, path, value)
    new_text = "".join(lines)
    try:
        new_data = yamltree.safe_load_bounded(new_text, source) or {}
    except yaml.YAMLError:
        new_data = None
    if new_data != expected:
        raise UserError(f"{source}: could not set {', '.join('.'.join(p) for p, _ in overrides)} without "
                        "disturbing the rest of the file; set it by hand")
    return new_text, notes


def _has_path(data: Any, path: list[str]) -> bool:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return False
        data = data[key]
    return True


def _set_path(lines: list[str], path: list[str], rendered: str, step: int, eol: str, source: str) -> list[str]:
    lines = list(lines)
    start, end = 0, len(lines)
    first_content = next((ln for ln in lines if _is_content(ln)), None)
    indent = _indent(first_content) if first_content else 0
    for depth, key in enumerate(path):
        idx = _find_key(lines, start, end, indent, key)
        if idx is None:
            at = _content_end(lines, start, end)
            if at == len(lines) and lines and not lines[-1].endswith(("\n", "\r")):
                lines[-1] += eol
            new = [f"{' ' * (indent + step * i)}{k}:{eol}" for i, k in enumerate(path[depth:-1])]
            new.append(f"{' ' * (indent + step * (len(path) - 1 - depth))}{path[-1]}: {rendered}{eol}")
            return lines[:at] + new + lines[at:]
        match = _key_re(key).match(lines[idx].rstrip("\r\n"))
        assert match is not None
        value_text, comment = _split_comment(match.group("rest"))
        bend = _block_end(lines, idx, end)
        if depth == len(path) - 1:
            line_eol = _eol(lines[idx]) if lines[idx].endswith("\n") else ""
            head = f"{match.group('ind')}{match.group('key')}: {rendered}{comment}{line_eol}"
            return lines[:idx] + [head] + lines[bend:]
        if value_text:  # a scalar, or null: a Bridge section left unset is not ours to invent
            raise UserError(f"{source}:{idx + 1}: '{key}' holds {value_text!r}, not a section; "
                            f"cannot set {'.'.join(path)} there (configure '{key}' first)")
        children = [j for j in range(idx + 1, bend) if _is_content(lines[j])]
        start, end = idx + 1, bend
        indent = _indent(lines[children[0]]) if children else _indent(lines[idx]) + step
    return lines


# --------------------------------------------------------------------------- backup, write, rollback
# The crash-safety lives in safewrite.py; these wrappers speak in apply's terms.


def write_with_backup(plan: Plan, now: datetime | None = None,
                      allow_read_only: bool = False) -> tuple[Path, list[str]]:
    """Save a verified backup recorded in the journal, then write the plan's text; ``(backup, notes)``."""
    return safewrite.replace_with_backup(plan.path, plan.old_text.encode("utf-8"), plan.new_text.encode("utf-8"),
                                         now, allow_read_only)


def backups(path: Path) -> list[Path]:
    return safewrite.backups(path)


def plan_rollback(path: Path) -> tuple[safewrite.Restore, str]:
    """The newest verified backup and the diff restoring it would make."""
    plan = safewrite.plan_restore(path, MAX_TARGET_BYTES)
    try:
        diff = unified_diff(plan.current.decode("utf-8"), plan.data.decode("utf-8"), str(path),
                            ("now", f"from {plan.backup.name}"))
    except UnicodeDecodeError:
        diff = f"binary difference: {len(plan.current)} bytes -> {len(plan.data)} bytes\n"
    return plan, diff


def rollback(path: Path, force: bool = False, allow_read_only: bool = False,
             now: datetime | None = None) -> tuple[Path, list[str]]:
    """Restore the newest backup byte for byte, then remove it (the next rollback goes one step further back)."""
    plan, notes = safewrite.restore(path, MAX_TARGET_BYTES, force, allow_read_only, now)
    return plan.backup, notes
