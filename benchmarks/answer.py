"""Read an answer (our diagnose JSON, or any agent's Markdown) into the ids the scorer compares.

Markdown is parsed with markdown-it-py, not searched as flat text, because *where* a fix is
named decides what it means: under "Avoid" / "不要" headings, after a lead-in such as
"**Do not:**", or in a negated clause it is advice against; under "Cause" / "Evidence"
headings it is neither advice for nor against; elsewhere it is a recommendation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from markdown_it import MarkdownIt
from memtune.errors import UserError
from memtune.recognize import CueSet, Recognizer

GRADING_FILE = Path(__file__).resolve().parent / "grading.yaml"
KINDS = ("avoid", "neutral", "recommend", "cause")  # heading classification order

# Clause ends: hard punctuation anywhere, '.' or ',' only before whitespace/end (not "cfg.model", "[a,b]").
# A colon ends a clause only for causes: "Avoid: X" negates X, but "not fragmentation: the logits" does not
# negate the logits.
_CLAUSE_END = re.compile(r"[;!?。；！？，\n]|[.,](?=\s|$)")
_CAUSE_CLAUSE_END = re.compile(r"[;!?。；！？，：\n]|[.,:](?=\s|$)")


@dataclass
class Answer:
    """What an answer recommends, flags as avoid, and names as cause, in its own order."""

    recommended: list[str] = field(default_factory=list)
    avoided: list[str] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)
    first_fix: str | None = None
    text: str = ""  # what literal `mentions` are searched in
    source: str = "markdown"  # markdown | json

    @property
    def top_cause(self) -> str | None:
        return self.causes[0] if self.causes else None


@dataclass(frozen=True)
class Grading:
    """The grader vocabulary from grading.yaml, compiled."""

    headings: dict[str, CueSet]
    negation_before: CueSet
    negation_after: CueSet
    negation_exceptions: CueSet
    cause_before: CueSet
    cause_after: CueSet
    cause_phrases: dict[str, dict[str, list[str]]]

    @classmethod
    def load(cls, path: Path = GRADING_FILE) -> Grading:
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise UserError(f"{path}: cannot read grading vocabulary ({exc})") from None
        try:
            neg, cneg = data["negation"], data["cause_negation"]
            return cls(
                headings={kind: CueSet.from_langs(data["headings"][kind]) for kind in KINDS},
                negation_before=CueSet.from_langs(neg["before"]),
                negation_after=CueSet.from_langs(neg["after"]),
                negation_exceptions=CueSet.from_langs(neg.get("exceptions")),
                cause_before=CueSet.from_langs(cneg["before"]),
                cause_after=CueSet.from_langs(cneg["after"]),
                cause_phrases=dict(data["causes"]),
            )
        except (KeyError, TypeError) as exc:
            raise UserError(f"{path}: missing or malformed key {exc}") from None

    def classify(self, heading: str) -> str:
        """avoid | neutral | recommend | cause | other, first cue family that matches wins."""
        for kind in KINDS:
            if self.headings[kind].search(heading):
                return kind
        return "other"


def negated(
    text: str,
    start: int,
    end: int,
    before: CueSet,
    after: CueSet,
    exceptions: CueSet | None = None,
    clause_end: re.Pattern[str] = _CLAUSE_END,
) -> bool:
    """True when the clause around ``text[start:end]`` argues against it."""
    lo = max((m.end() for m in clause_end.finditer(text, 0, start)), default=0)
    nxt = clause_end.search(text, end)
    hi = nxt.start() if nxt else len(text)
    head = text[lo:start]
    if exceptions:
        for a, b in exceptions.spans(head):
            head = head[:a] + " " * (b - a) + head[b:]
    return before.search(head) or after.search(text[end:hi])


@dataclass
class _Unit:
    text: str
    kind: str
    olist: int | None  # the outermost recommendation ordered list this unit sits in


def _inline_text(token: Any) -> str:
    parts = []
    for child in token.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append("\n")
    return "".join(parts) if parts else token.content


def _is_lead(text: str, raw: str) -> bool:
    """A short paragraph that introduces the list right after it ("**Avoid:**", "Try, in order:")."""
    stripped = text.strip()
    return 0 < len(stripped) <= 100 and (stripped.endswith((":", "：")) or raw.strip().startswith(("**", "__")))


def _units(markdown: str, grading: Grading) -> list[_Unit]:
    tokens = MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(markdown)
    units: list[_Unit] = []
    headings: list[tuple[int, str]] = []  # (level, effective kind)
    lists: list[tuple[str, int | None]] = []  # (kind, recommendation ordered-list id)
    next_olist = 0
    row: list[str] | None = None
    last_para: tuple[int, str, str] | None = None  # (closing token index, text, raw)

    def section_kind() -> str:
        if lists:
            return lists[-1][0]
        return headings[-1][1] if headings else "other"

    def olist() -> int | None:
        return lists[-1][1] if lists else None

    for i, tok in enumerate(tokens):
        if tok.type == "heading_open":
            level = int(tok.tag[1:])
            text = _inline_text(tokens[i + 1])
            while headings and headings[-1][0] >= level:
                headings.pop()
            kind = grading.classify(text)
            if kind == "other" and headings:
                kind = headings[-1][1]
            headings.append((level, kind))
            units.append(_Unit(text, kind, None))
        elif tok.type in ("bullet_list_open", "ordered_list_open"):
            kind = section_kind()
            if last_para and last_para[0] == i - 1 and _is_lead(last_para[1], last_para[2]):
                lead = grading.classify(last_para[1])
                kind = lead if lead != "other" else kind
            ident = olist()
            if ident is None and tok.type == "ordered_list_open" and kind == "recommend":
                ident, next_olist = next_olist, next_olist + 1
            lists.append((kind, ident))
        elif tok.type in ("bullet_list_close", "ordered_list_close"):
            lists.pop()
        elif tok.type == "tr_open":
            row = []
        elif tok.type == "tr_close" and row is not None:
            units.append(_Unit(" — ".join(row), section_kind(), olist()))
            row = None
        elif tok.type == "inline":
            prev = tokens[i - 1].type if i else ""
            if prev == "heading_open":
                continue
            text = _inline_text(tok)
            if row is not None:
                row.append(text)
            else:
                units.append(_Unit(text, section_kind(), olist()))
                if prev == "paragraph_open":
                    last_para = (i + 1, text, tok.content)
        elif tok.type in ("fence", "code_block"):
            units.append(_Unit(tok.content, section_kind(), olist()))
    return units


_LABEL = re.compile(r"^\s*([^:：\n]{1,40})[:：]")


def _label_kind(text: str, grading: Grading) -> str | None:
    """A leading "Sources:" / "Evidence:" / "Avoid:" label re-files one paragraph or list item."""
    m = _LABEL.match(text)
    kind = grading.classify(m.group(1)) if m else "other"
    return kind if kind in ("avoid", "neutral", "cause") else None


def from_markdown(markdown: str, fixes: Recognizer, causes: Recognizer, grading: Grading) -> Answer:
    """Score-ready view of a free-text answer."""
    recommended: list[tuple[int, str, int | None, str]] = []  # (order, id, olist, kind)
    avoided: list[str] = []
    cause_hits: list[tuple[int, int, str]] = []  # (preference, order, id)
    order = 0
    for unit in _units(markdown, grading):
        kind = _label_kind(unit.text, grading) or unit.kind
        for m in fixes.find(unit.text):
            order += 1
            against = negated(
                unit.text, m.start, m.end, grading.negation_before, grading.negation_after, grading.negation_exceptions
            )
            if kind == "avoid" or against:
                avoided.append(m.ident)
            elif kind in ("recommend", "other"):
                recommended.append((order, m.ident, unit.olist, kind))
        for m in causes.find(unit.text):
            order += 1
            if kind == "avoid" or negated(
                unit.text, m.start, m.end, grading.cause_before, grading.cause_after, clause_end=_CAUSE_CLAUSE_END
            ):
                continue
            cause_hits.append((0 if kind == "cause" else 1, order, m.ident))
    return Answer(
        recommended=_unique(r[1] for r in recommended),
        avoided=_unique(avoided),
        causes=_unique(c[2] for c in sorted(cause_hits)),
        first_fix=_first_fix(recommended),
        text=markdown,
        source="markdown",
    )


def _first_fix(recommended: list[tuple[int, str, int | None, str]]) -> str | None:
    """First item of the first ordered recommendation list, else first recommendation, else first mention."""
    in_lists = sorted((r for r in recommended if r[2] is not None), key=lambda r: (r[2], r[0]))
    if in_lists:
        return in_lists[0][1]
    for kind in ("recommend", "other"):
        for r in recommended:
            if r[3] == kind:
                return r[1]
    return None


def from_json(diagnosis: Mapping[str, Any], markdown: str = "") -> Answer:
    """Our diagnose output: fixes ordered by rank, ``avoid`` ids, causes in the order given."""
    fixes = [f for f in diagnosis.get("fixes") or [] if isinstance(f, Mapping) and f.get("id")]
    ranked = sorted(enumerate(fixes), key=lambda p: (_rank(p[1].get("rank")), p[0]))
    recommended = _unique(f["id"] for _, f in ranked)
    return Answer(
        recommended=recommended,
        avoided=_unique(a["id"] for a in diagnosis.get("avoid") or [] if isinstance(a, Mapping) and a.get("id")),
        causes=_unique(c["id"] for c in diagnosis.get("causes") or [] if isinstance(c, Mapping) and c.get("id")),
        first_fix=recommended[0] if recommended else None,
        text=json.dumps(diagnosis, ensure_ascii=False) + "\n" + markdown,
        source="json",
    )


def _rank(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("inf")


def _unique(items: Any) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)
