"""Find knowledge-base ids and cue phrases in free text (a question, or an agent's answer).

The benchmark never hard-codes what a fix looks like in prose: each fix declares
``recognize: {literals, patterns, phrases: {en, zh}}`` in knowledge/fixes.yaml and
this module only compiles those.  Phrases are matched forgivingly (any case, word
start, ``-``/``_``/space between words) because agents paraphrase; literals are
matched exactly except for case, because they are env vars and config keys.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from memtune.errors import UserError

try:
    from re import _constants as _sre  # Python >= 3.11
    from re import _parser as _sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _sre  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

_WORD = re.compile(r"[A-Za-z0-9_]")
_FOUND_KEPT = 4096  # texts whose matches a recognizer remembers (a scorer meets the same lines in many answers)


@dataclass(frozen=True)
class Match:
    """One recognised id at ``text[start:end]``."""

    ident: str
    start: int
    end: int


def phrase_regex(phrase: str) -> str:
    """Regex for a prose phrase: word-start anchored, flexible separators, short words closed."""
    words = phrase.split()
    if not words:
        raise ValueError("empty phrase")
    body = r"[\s\-_]*".join(re.escape(w) for w in words)
    head = r"(?<![A-Za-z0-9_])" if _WORD.match(phrase[0]) else ""
    # A short final word ("TP", "PP") must end there, or "TP" would match "TPU".
    tail = r"(?![A-Za-z0-9])" if _WORD.match(phrase[-1]) and len(words[-1]) <= 3 else ""
    return head + body + tail


def literal_regex(literal: str) -> str:
    """Regex for an exact literal (env var, config key): alphanumeric edges must not continue."""
    head = r"(?<![A-Za-z0-9_])" if _WORD.match(literal[0]) else ""
    tail = r"(?![A-Za-z0-9])" if _WORD.match(literal[-1]) else ""
    return head + re.escape(literal) + tail


@dataclass(frozen=True)
class _Cue:
    """A compiled pattern (case-insensitive), and lower-case texts of which every match of it contains one (ASCII,
    or Chinese, which has no case), tested with ``in`` before the pattern runs (None: unknown)."""

    regex: re.Pattern[str]
    needles: tuple[str, ...] | None = None

    @classmethod
    def of(cls, source: str, contains: str | Iterable[str] | None = None) -> _Cue:
        options = (contains,) if isinstance(contains, str) else tuple(contains or ())
        # a Chinese needle (ke kuo zhan nei cun duan) has no case to fold: kept, unless a character of it folds to ASCII
        usable = bool(options) and all(
            n and (n.isascii() or not any(_folds_to_ascii(c) for c in n if not c.isascii())) for n in options)
        return cls(re.compile(source, re.IGNORECASE), tuple(sorted(n.lower() for n in options)) if usable else None)


@lru_cache(maxsize=4096)
def _folds_to_ascii(char: str) -> bool:
    """A character outside ASCII that matches an ASCII letter case-insensitively (the Kelvin sign, the long s,
    the dotless i)."""
    return any(c.isascii() for c in char.lower() + char.upper() + char.casefold())


def _unfolded(needle: str, text: str) -> bool:
    """Whether a needle may be in a text whose characters fold to ASCII: a needle without ASCII letters is matched
    as it is; one with them cannot be ruled out."""
    return needle in text or any(c.isascii() and c.isalpha() for c in needle)


def lowered(text: str) -> str | None:
    """``text.lower()``, which holds every case-insensitive match of lower-case ASCII text in ``text``; None when
    a character of ``text`` outside ASCII could be part of such a match."""
    if not text.isascii() and any(_folds_to_ascii(c) for c in set(text) if not c.isascii()):
        return None
    return text.lower()


_HEAD = 3  # characters of a needle's head (Recognizer._by_head)


class Recognizer:
    """Maps text to ids; overlapping hits keep the longest, so specific phrases win."""

    def __init__(self, table: Mapping[str, list[_Cue]]):
        self._table = dict(table)
        self._found: dict[str, tuple[Match, ...]] = {}
        # every cue in table order, and, per needle, the cues it gates: a text is tested once per distinct needle,
        # and only the cues of the needles it holds (and those without one) run their patterns
        self._cues = [(ident, cue) for ident, cues in self._table.items() for cue in cues]
        self._always = [i for i, (_, cue) in enumerate(self._cues) if cue.needles is None]
        self._gated: dict[str, list[int]] = {}
        for i, (_, cue) in enumerate(self._cues):
            for needle in cue.needles or ():
                self._gated.setdefault(needle, []).append(i)
        # the needles by their first three characters: a text is only tested for those whose head it holds (hundreds
        # of needles, a few candidates per line); shorter needles are always tested
        self._by_head: dict[str, list[str]] = {}
        self._short = [n for n in self._gated if len(n) < _HEAD]
        for needle in self._gated:
            if len(needle) >= _HEAD:
                self._by_head.setdefault(needle[:_HEAD], []).append(needle)

    @property
    def ids(self) -> list[str]:
        return list(self._table)

    @classmethod
    def from_recognize(cls, entries: Iterable[Mapping[str, Any]], where: str) -> Recognizer:
        """Build from KB-style entries ``{id, recognize: {literals, patterns, phrases}}``.

        The id itself is always recognised too: an answer that writes `selective-recompute` or
        `capacity-activations` (as agents using this skill do) names it unambiguously.
        """
        table: dict[str, list[_Cue]] = {}
        for entry in entries:
            ident = entry.get("id")
            spec = entry.get("recognize")
            if not ident or not isinstance(spec, Mapping):
                continue
            table[ident] = [_Cue.of(literal_regex(ident), ident), *_compile_spec(spec, f"{where}: {ident}")]
        return cls(table)

    @classmethod
    def from_phrases(cls, phrases: Mapping[str, Mapping[str, list[str]]], where: str) -> Recognizer:
        """Build from ``{id: {en: [...], zh: [...]}}`` (the grader's cause table)."""
        return cls.from_recognize(({"id": k, "recognize": {"phrases": v}} for k, v in phrases.items()), where)

    def merged(self, other: Recognizer) -> Recognizer:
        """Ids from ``other`` only where this recognizer has none (KB patterns win over fallbacks)."""
        table = dict(other._table)
        table.update(self._table)
        return Recognizer(table)

    def find(self, text: str) -> list[Match]:
        """The ids in ``text``, left to right; remembered per text, as the table never changes (the benchmark
        scorer reads the same template lines in hundreds of answers)."""
        found = self._found.get(text)
        if found is None:
            if len(self._found) >= _FOUND_KEPT:
                self._found.clear()
            found = self._found[text] = tuple(self._scan(text))
        return list(found)

    def _scan(self, text: str) -> list[Match]:
        low = lowered(text)  # a pattern none of whose needles is in the text cannot match it
        if low is None:
            held = [n for n in self._gated if _unfolded(n, text)]
        else:
            heads = {low[i:i + _HEAD] for i in range(len(low) - _HEAD + 1)} & self._by_head.keys()
            held = [n for n in (*self._short, *(n for h in heads for n in self._by_head[h])) if n in low]
        chosen = sorted({*self._always, *(i for n in held for i in self._gated[n])})
        hits = [
            Match(ident, m.start(), m.end())
            for ident, cue in (self._cues[i] for i in chosen)
            for m in cue.regex.finditer(text)
            if m.end() > m.start()
        ]
        hits.sort(key=lambda h: (h.start, -(h.end - h.start)))
        kept: list[Match] = []
        for hit in hits:
            if kept and hit.start < kept[-1].end:
                continue
            kept.append(hit)
        return kept


def required_literal(pattern: str) -> str | None:
    """The one literal every match of ``pattern`` holds, when :func:`required_any` finds a single one."""
    found = required_any(pattern)
    return found[0] if found and len(found) == 1 else None


def required_any(pattern: str) -> tuple[str, ...] | None:
    """Lower-case texts of which every match of ``pattern`` holds at least one (from the parsed pattern: literals in
    sequence, inside groups and repeats that must match at least once, and one from each branch of an alternation:
    "(reduc|lower|shrink)\\w* ..." holds "reduc", "lower" or "shrink"); each 2+ ASCII characters, or 1+ Chinese
    ones; None when there is no such set.  It is the needle of a pattern the knowledge base writes itself: a text
    holding none of them is not run through the pattern, and answers name a few of the hundreds of patterns."""
    try:
        tree = _sre_parse.parse(pattern)
    except Exception:  # noqa: BLE001 - an unreadable pattern simply has no needle (compiling it reports it)
        return None
    found = _factor(list(tree))
    return tuple(sorted(found)) if found else None


def _usable(option: str) -> bool:
    """Long enough to rule a text out: 2+ characters with any ASCII among them ("pp" before "PP to 8"), any Chinese
    one (a single character is rare enough in an English answer). An ``in`` test costs far less than a pattern."""
    return len(option) >= 2 or (len(option) == 1 and not option.isascii())


def _factor(items: list[Any]) -> frozenset[str] | None:
    """The best set of texts (one of which every match of ``items`` holds): the fewest, longest options."""
    options: list[frozenset[str]] = []
    run = ""
    for op, arg in items:
        if op is _sre.LITERAL:
            run += chr(arg)
            continue
        if run:
            options.append(frozenset({run.lower()}))
        run = ""
        found: frozenset[str] | None = None
        if op is _sre.SUBPATTERN:
            found = _factor(list(arg[-1]))
        elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT) and arg[0] >= 1:
            found = _factor(list(arg[2]))
        elif op is _sre.BRANCH:
            branches = [_factor(list(branch)) for branch in arg[1]]
            found = frozenset().union(*branches) if all(branches) else None
        if found:
            options.append(found)
    if run:
        options.append(frozenset({run.lower()}))
    good = [option for option in options if all(_usable(o) for o in option)]
    return max(good, key=lambda o: (min(len(s) for s in o) >= 3, -len(o), min(len(s) for s in o)), default=None)


def _compile_spec(spec: Mapping[str, Any], where: str) -> list[_Cue]:
    """Literals (each match holds the literal), then the knowledge base's own patterns, then phrases (each match
    holds every word of the phrase; the longest is the needle)."""
    cues = [_Cue.of(literal_regex(lit), lit) for lit in spec.get("literals") or [] if lit]
    for pattern in spec.get("patterns") or []:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise UserError(f"{where}: recognize pattern {pattern!r} is not a valid regex ({exc})") from None
        cues.append(_Cue.of(pattern, required_any(pattern)))
    phrases = spec.get("phrases") or {}
    for lang in ("en", "zh"):
        cues.extend(_Cue.of(phrase_regex(p), max(p.split(), key=len)) for p in phrases.get(lang) or [] if p.strip())
    return cues


class CueSet:
    """A set of cue phrases (both languages) searched as one regex."""

    def __init__(self, phrases: Iterable[str]):
        unique = sorted({p for p in phrases if p and p.strip()}, key=len, reverse=True)
        self._rx = re.compile("|".join(phrase_regex(p) for p in unique), re.IGNORECASE) if unique else None

    @classmethod
    def from_langs(cls, spec: Mapping[str, list[str]] | None) -> CueSet:
        spec = spec or {}
        return cls([*(spec.get("en") or []), *(spec.get("zh") or [])])

    def search(self, text: str) -> bool:
        return bool(self._rx and self._rx.search(text))

    def spans(self, text: str) -> list[tuple[int, int]]:
        return [(m.start(), m.end()) for m in self._rx.finditer(text)] if self._rx else []


def fix_recognizer(kb: Any) -> Recognizer:
    """The recognizer of every fix in knowledge/fixes.yaml, compiled once per knowledge base (the question reader
    and the situation reader share it)."""
    return kb.memo("fix-recognizer", lambda k: Recognizer.from_recognize(k.entries("fixes"), "knowledge/fixes.yaml"))
