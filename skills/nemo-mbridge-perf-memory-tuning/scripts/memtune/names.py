"""The names a user types (settings, flags, environment variables, classes), matched to the fixes and the settings
the knowledge base spells them in: the answer then says which of the user's own names the helper knows and which
the agent must read up on before trusting the answer."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from .facts import TrainingConfig
from .inputs.question import name_key
from .knowledge import Knowledge

_TOKEN = re.compile(r"--?[A-Za-z][\w\-]*|[A-Za-z_][\w.]*", re.A)
_PAIR = re.compile(r"(--?[A-Za-z][\w\-]*|[A-Za-z_][\w.]*)(?:\s*[=:]\s*|\s+)([\w.\-]+)", re.A)
_CONFIG_FIELDS = frozenset(TrainingConfig.__dataclass_fields__)


def _keys(token: str) -> Iterable[str]:
    """A token's key and, for a dotted path, each part that is a name of its own (has "_" in it): a user who writes
    ``gpu_memory_utilization`` means the fix line's ``actor_rollout_ref.rollout.gpu_memory_utilization``."""
    key = name_key(token.rstrip("."))
    yield key
    if "." in key:
        yield from (part for part in key.split(".") if "_" in part)


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _pair_key(name: str, value: str) -> str:
    return f"{name_key(name)}={value.lower()}"


def _build(kb: Knowledge) -> dict[str, str]:
    """name key (and ``key=value``) -> the fix that spells it.  A fix that sets the name to the value the user wrote
    wins (``recompute_granularity=full`` is full recompute's, not selective's); then a fix whose recognizer literal
    the name is, one whose own interfaces set it, one whose framework lines do."""
    index: dict[str, str] = {}
    fixes = kb.entries("fixes")
    for source in (lambda f: (f.get("recognize") or {}).get("literals") or [],
                   lambda f: _strings(f.get("apply") or {}),
                   lambda f: _strings([fw.get("lines") or [] for fw in f.get("frameworks") or []])):
        for fix in fixes:
            for text in source(fix):
                for name, value in _PAIR.findall(text):
                    for key in _keys(name):
                        index.setdefault(f"{key}={value.lower()}", fix["id"])
                for token in _TOKEN.findall(text):
                    for key in _keys(token):
                        if "_" in key:
                            index.setdefault(key, fix["id"])
    return index


def known_names(named: list[Mapping[str, Any]], kb: Knowledge) -> list[dict[str, Any]]:
    """Each name the user typed with the fix that sets it (``fix``), or whether the helper reads it as a run setting
    (``setting``: a TrainingConfig field); neither means the knowledge base does not know it."""
    if not named:
        return []  # the index costs ~20 ms to build: only for a question that names something
    index: dict[str, str] = kb.memo("names.fix_index", _build)
    out = []
    for item in named:
        keys = list(_keys(item["key"]))
        pair = _PAIR.fullmatch(item["text"])
        typed = [f"{k}={pair.group(2).lower()}" for k in _keys(pair.group(1))] if pair else []
        fix = next((index[k] for k in typed + keys if k in index), None)
        setting = fix is None and any(k in _CONFIG_FIELDS for k in keys)
        out.append({"text": item["text"], "fix": fix, "setting": setting})
    return out


def fixes_named(text: str, kb: Knowledge) -> list[tuple[str, int, int]]:
    """(fix, start, end) of each setting name in ``text`` that a fix spells ("micro_train_batch_size" is the
    micro-batch's): where a sentence says the user set it (the caller checks for a value), it names the lever."""
    index: dict[str, str] = kb.memo("names.fix_index", _build)
    out = []
    for m in _TOKEN.finditer(text):
        fix = next((index[k] for k in _keys(m.group(0)) if "_" in k and k in index), None)
        if fix:
            out.append((fix, m.start(), m.end()))
    return out

