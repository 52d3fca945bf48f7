"""The user's free-text question -> QuestionFacts (language, model, topics, numbers, stated settings).

Every word it recognises is a pattern in knowledge/vocabulary.yaml (models, tasks, topics with
English and Chinese keywords, layout spellings, GPU counts, memory figures, claims such as
"expandable_segments already set") or an alias in knowledge/gpus.yaml; this module only applies
them.  Patterns are matched case-insensitively with ASCII word boundaries, so "LoRA" is found in
"用LoRA微调" as well as in "LoRA + SP".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from ..facts import QuestionFacts, TrainingConfig
from .gpu import find_gpus, gpu_pattern

FLAGS = re.I | re.A
_CONFIG_FIELDS = set(TrainingConfig.__dataclass_fields__)


@lru_cache(maxsize=1024)
def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, FLAGS)


def _vocab(kb: Any) -> Mapping[str, Any]:
    return kb.tables.get("vocabulary") or {}


_ABSURD_DIGITS = re.compile(r"\d{100,}")  # no figure in a question is this long: read it as no number


def parse_question(text: str | None, kb: Any = None) -> QuestionFacts:
    """Read what a question states; anything it does not state stays unknown."""
    if not text or not text.strip():
        return QuestionFacts()
    if kb is None:
        from .. import knowledge

        kb = knowledge.load()
    vocab = _vocab(kb)
    q = QuestionFacts(provided=True, text=text, lang=_language(text, vocab))
    text = _ABSURD_DIGITS.sub(lambda m: "#" * len(m.group()), text)  # int() refuses > 4300 digits
    gpus = list(find_gpus(text, kb))
    if gpus:
        q.gpu_name = gpus[0][2]["name"]
    else:
        q.gpu_nominal_gb = _gpu_size(text, vocab)
    masked = _mask(text, [(s, e) for s, e, _ in gpus])
    q.model_name = _model(text, vocab)
    q.topics = _topics(text, vocab)
    q.memory_bytes = _memory(masked, vocab)
    q.num_gpus = _gpu_count(text, vocab, kb)
    q.layout = _layout(masked, vocab)
    task = _first(text, vocab.get("tasks") or [])
    if task:
        q.layout["task"] = task
    q.env, claimed = _claims(text, vocab)
    for key, value in claimed.items():
        q.layout.setdefault(key, value)
    return q


def _gpu_size(text: str, vocab: Mapping[str, Any]) -> float | None:
    """A GPU described only by its memory size ("8x 80 GB GPUs", "80G 的卡")."""
    for pattern in vocab.get("gpu_size") or []:
        m = _rx(pattern).search(text)
        if m:
            return float(m.group("gb"))
    return None


def _language(text: str, vocab: Mapping[str, Any]) -> str:
    for lang in vocab.get("languages") or []:
        if re.search(lang["pattern"], text):
            return lang["id"]
    return "en"


def _mask(text: str, spans: list[tuple[int, int]]) -> str:
    """Blank GPU mentions (and the size written next to them) so "H100 80GB" is not a memory figure."""
    chars = list(text)
    size = _rx(r"[\s\-_]*\d+(?:\.\d+)?\s*G(?:i?B)?\b")
    for start, end in spans:
        m = size.match(text, end)
        if m:
            end = m.end()
        before = re.search(r"\d+(?:\.\d+)?\s*G(?:i?B)?[\s\-_]*$", text[:start], FLAGS)
        if before:
            start = before.start()
        for i in range(start, end):
            chars[i] = "#"
    return "".join(chars)


def _model(text: str, vocab: Mapping[str, Any]) -> str | None:
    best: tuple[int, str] | None = None
    for model in vocab.get("models") or []:
        for pattern in model.get("patterns") or []:
            for m in _rx(pattern).finditer(text):
                if best is None or m.end() - m.start() > best[0]:
                    best = (m.end() - m.start(), model["name"])
    return best[1] if best else None


def _topics(text: str, vocab: Mapping[str, Any]) -> list[str]:
    found = []
    for topic in vocab.get("topics") or []:
        words = [w for lang in ("en", "zh") for w in (topic.get("keywords") or {}).get(lang) or []]
        if any(_rx(w).search(text) for w in words):
            found.append(topic["id"])
    return found


def _first(text: str, entries: list[Mapping[str, Any]]) -> str | None:
    for entry in entries:
        if any(_rx(p).search(text) for p in entry.get("patterns") or []):
            return entry["id"]
    return None


def _memory(text: str, vocab: Mapping[str, Any]) -> float | None:
    mem = vocab.get("memory") or {}
    units = {k.lower(): v for k, v in (vocab.get("units") or {}).items()}
    figures = [m for m in _rx(mem.get("figure", r"$^")).finditer(text) if m.group("u").lower() in units]
    if not figures:
        return None
    window = int(mem.get("cue_window_chars") or 0)
    cues = [_rx(c) for c in mem.get("cues") or []]

    def cued(m: re.Match[str]) -> bool:
        before = text[max(0, m.start() - window): m.start()]
        return any(c.search(before) for c in cues)

    chosen = next((m for m in figures if cued(m)), figures[0])
    return float(chosen.group("v")) * units[chosen.group("u").lower()]


def _gpu_count(text: str, vocab: Mapping[str, Any], kb: Any) -> int | None:
    gpu = gpu_pattern(kb)
    for group in vocab.get("gpu_count") or []:
        for pattern in group.get("patterns") or []:
            m = _rx(pattern.replace("{gpu}", gpu)).search(text)
            if not m:
                continue
            parts = m.groupdict()
            if parts.get("nodes") and parts.get("per_node"):
                return int(parts["nodes"]) * int(parts["per_node"])
            if parts.get("n"):
                return int(parts["n"])
    return None


def _number(text: str) -> int:
    t = text.replace(" ", "").lower()
    return int(t[:-1]) * 1024 if t.endswith("k") else int(t)


def _layout(text: str, vocab: Mapping[str, Any]) -> dict[str, Any]:
    layout: dict[str, Any] = {}
    for entry in vocab.get("layout") or []:
        for pattern in entry.get("patterns") or []:
            m = _rx(pattern).search(text)
            if m:
                layout[entry["field"]] = _number(m.group("v"))
                break
    return layout


def _claims(text: str, vocab: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(EnvFacts field -> value, TrainingConfig field -> value) the question states."""
    env: dict[str, Any] = {}
    config: dict[str, Any] = {}
    for claim in vocab.get("claims") or []:
        if not any(_rx(p).search(text) for p in claim.get("patterns") or []):
            continue
        for key, value in (claim.get("sets") or {}).items():
            scope, _, name = key.partition(".")
            if scope == "env":
                env[name] = value
            elif scope == "config" and name in _CONFIG_FIELDS:
                config[name] = value
    return env, config
