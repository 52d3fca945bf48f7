"""signatures.yaml (with constraints.yaml error patterns and vocabulary.yaml env names) compiled into the
Patterns the scanner runs, once per Knowledge object.

Apart from the reading: what the table may hold, and the typos refused when it is compiled, are in one place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any

from ...facts import MemoryReport
from ...knowledge import Knowledge, KnowledgeError
from ..units import unit_factor

# Named regex groups that carry a size; the group name plus "_bytes" is the OomEvent field.
SIZE_GROUPS = frozenset(
    ["requested", "capacity", "free", "allocated", "reserved", "reserved_unallocated", "private_pool",
     "process", "allowed"]
)
# Named regex groups kept as the line prints them (OomEvent.figures): a host kill's node memory and threshold
TEXT_GROUPS = frozenset(["node_used", "node_total", "threshold", "killed"])
_REPORT_FIELDS = frozenset(f.name for f in fields(MemoryReport)) - {"rank", "line", "iteration"}
_SIDE_KINDS = {"memory-report": "report", "memory-footprint": "footprint", "env-export": "env"}


_PairHow = tuple[str, str | None, int | None] | tuple[()]


class LazyPattern:
    """A regex compiled on first use: a log touches a few of the table's ~200 patterns, and compiling all of
    them cost a cold ``diagnose`` ~15 ms. Compiling puts the compiled methods in the instance's dict, where they
    shadow the class's, so later calls cost what ``re.Pattern``'s do. ``pattern`` (the source) needs no compile."""

    def __init__(self, pattern: str, where: str) -> None:
        self.pattern = pattern
        self._where = where
        self._compiled: re.Pattern[str] | None = None

    def compile(self) -> re.Pattern[str]:
        """The compiled regex; a broken one is a KnowledgeError naming its entry (never a traceback)."""
        if self._compiled is None:
            try:
                compiled = re.compile(self.pattern)
            except re.error as exc:
                raise KnowledgeError(f"signatures.yaml: {self._where}: invalid regex ({exc})") from None
            self._compiled = compiled
            self.search, self.match, self.finditer = compiled.search, compiled.match, compiled.finditer  # type: ignore[method-assign]
            self.findall, self.sub = compiled.findall, compiled.sub  # type: ignore[method-assign]
        return self._compiled

    def search(self, *args: Any) -> re.Match[str] | None:
        return self.compile().search(*args)

    def match(self, *args: Any) -> re.Match[str] | None:
        return self.compile().match(*args)

    def finditer(self, *args: Any) -> Any:
        return self.compile().finditer(*args)

    def findall(self, *args: Any) -> list[Any]:
        return self.compile().findall(*args)

    def sub(self, *args: Any) -> str:
        return self.compile().sub(*args)

    @property
    def groupindex(self) -> Any:
        return self.compile().groupindex


Regex = LazyPattern | re.Pattern[str]


@dataclass(frozen=True)
class Signature:
    """One compiled entry of signatures.yaml."""

    id: str
    kind: str
    context: str
    regex: Regex | None
    triggers: tuple[str, ...] = ()
    format: str | None = None
    fallback: bool = False
    truncated: bool = False
    weak: bool = False
    auxiliary: bool = False
    secondary: bool = False
    echo: bool = False  # a weak line that a firm signal of its kind a few lines away already explains
    names_last_error: bool = False  # a firm line that says what a nearby echo was, of whatever kind
    number_unit: str | None = None
    fields: tuple[tuple[str, Regex], ...] = ()
    pair_item: Regex | None = None
    pair_keys: dict[str, dict[str, str]] = field(default_factory=dict)
    pair_units: dict[str, str] = field(default_factory=dict)  # printed unit -> units.py unit
    pair_counts: bool = False  # some key gives a count (an int field), not bytes
    pair_groups: tuple[int, int, int | None] = (0, 1, None)  # findall positions of pair_item's key, value, unit
    # printed key (, printed unit) -> (field, unit, bytes per unit) or () to skip: resolved once, not per item
    pair_memo: dict[Any, _PairHow] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class PhaseRule:
    id: str
    markers: tuple[tuple[Regex | None, Regex | None, Regex | None], ...]
    log_start: Regex | None
    log_end: Regex | None
    triggers: tuple[str, ...]


@dataclass(frozen=True)
class Patterns:
    """signatures.yaml (plus constraint error patterns) compiled for the scanner."""

    params: dict[str, int]
    memory_kinds: frozenset[str]
    noise: Regex
    prefix: re.Pattern[str]
    prefix_ranks: tuple[str, ...]
    rank_hints: tuple[tuple[tuple[str, ...], Regex], ...]
    tb_start: Regex
    tb_frame: Regex
    tb_ignore: Regex
    tb_exception: Regex
    phases: tuple[PhaseRule, ...]
    alloc_triggers: tuple[str, ...]
    alloc_start: Regex
    alloc_end: Regex
    alloc_stop: Regex
    proc_other: Regex
    proc_self: Regex
    block: tuple[Signature, ...]
    block_fallback: tuple[Signature, ...]
    line: tuple[Signature, ...]
    reports: tuple[Signature, ...]
    footprints: tuple[Signature, ...]
    env: tuple[Signature, ...]
    env_triggers: tuple[str, ...]  # vocabulary.yaml env.process_prefixes: the names worth keeping
    env_never: tuple[str, ...]  # vocabulary.yaml env.never_read, upper-cased
    exception: tuple[Signature, ...]
    frame: tuple[Signature, ...]  # matched against a traceback's frame lines, which no line signature sees
    constraint_signature: str | None
    constraints: tuple[tuple[str, Regex, frozenset[str] | None], ...]  # id, regex, required literals
    triggers: tuple[str, ...]  # every literal that can make a line matter (the pre-filter)
    by_id: dict[str, Signature]


_COMPILED: dict[int, tuple[Knowledge, Patterns]] = {}


def compile_signatures(kb: Knowledge, *, eager: bool = False) -> Patterns:
    """Compile signatures.yaml once per Knowledge object (the KB is immutable once loaded).

    Each regex compiles when first used; ``eager`` compiles them all now, so that ``kb validate`` and the
    tests find a broken one in an entry no example log reaches."""
    cached = _COMPILED.get(id(kb))
    if cached is not None and cached[0] is kb and not eager:
        return cached[1]
    lazy: list[LazyPattern] = []
    patterns = _compile(kb, lazy)
    if eager:
        for pattern in lazy:
            pattern.compile()
    _COMPILED[id(kb)] = (kb, patterns)
    return patterns


def _compile(kb: Knowledge, made: list[LazyPattern]) -> Patterns:
    table = kb.tables.get("signatures")
    if not isinstance(table, dict) or "signatures" not in table:
        raise KnowledgeError("signatures.yaml: missing or has no 'signatures' list")
    frags: dict[str, str] = table.get("fragments", {})

    def rx(text: str, where: str) -> Any:
        for _ in range(4):  # fragments may use fragments
            expanded = text
            for name, value in frags.items():
                expanded = expanded.replace("{" + name + "}", value)
            if expanded == text:
                break
            text = expanded
        made.append(LazyPattern(text, where))
        return made[-1]

    kinds = {k["id"]: bool(k["memory"]) for k in table["kinds"]}
    signatures = [_signature(entry, rx, kinds) for entry in table["signatures"]]
    phases = tuple(_phase_rule(p, rx) for p in table["phases"])
    prefix, prefix_ranks = _combined_prefix(table["prefixes"], rx)
    alloc, tb, procs = table["allocator"], table["traceback"], table["process_lines"]
    rank_hints = tuple((tuple(h["triggers"]), rx(h["regex"], f"rank_hints {h['id']}")) for h in table["rank_hints"])
    constraints = tuple(
        (c["id"], regex, _required_literals(regex.pattern))
        for c in kb.entries("constraints")
        if isinstance(c, dict) and c.get("error_pattern")
        for regex in [_constraint_regex(c)]
    )
    vocab = (kb.tables.get("vocabulary") or {}).get("env") or {}
    env_triggers = tuple(vocab.get("process_prefixes") or ())
    triggers = {t for s in signatures for t in s.triggers}
    triggers.update(env_triggers)
    triggers.update(alloc["triggers"], tb["triggers"], ["Error: "])
    triggers.update(t for p in phases for t in p.triggers)
    triggers.update(t for trig, _ in rank_hints for t in trig)
    triggers.update(t for _, _, literals in constraints if literals for t in literals)
    by_context: dict[str, list[Signature]] = {}
    for sig in signatures:
        key = _SIDE_KINDS.get(sig.kind, sig.context)
        _check_side_signature(sig, key)
        by_context.setdefault(key, []).append(sig)
    block = by_context.get("block", [])
    constraint_sigs = by_context.get("constraints", [])
    return Patterns(
        params={k: int(v) for k, v in table["parser"].items()},
        memory_kinds=frozenset(k for k, memory in kinds.items() if memory),
        noise=rx(table["noise"], "noise"),
        prefix=prefix,
        prefix_ranks=prefix_ranks,
        rank_hints=rank_hints,
        tb_start=rx(tb["start"], "traceback.start"),
        tb_frame=rx(tb["frame"], "traceback.frame"),
        tb_ignore=rx(tb["ignore"], "traceback.ignore"),
        tb_exception=rx(tb["exception"], "traceback.exception"),
        phases=phases,
        alloc_triggers=tuple(alloc["triggers"]),
        alloc_start=rx(alloc["start"], "allocator.start"),
        alloc_end=rx(alloc["end"], "allocator.end"),
        alloc_stop=rx(alloc["stop"], "allocator.stop"),
        proc_other=rx(procs["other"], "process_lines.other"),
        proc_self=rx(procs["self"], "process_lines.self"),
        block=tuple(s for s in block if not s.fallback),
        block_fallback=tuple(s for s in block if s.fallback),
        line=tuple(by_context.get("line", [])),
        reports=tuple(by_context.get("report", [])),
        footprints=tuple(by_context.get("footprint", [])),
        env=tuple(by_context.get("env", [])),
        env_triggers=env_triggers,
        env_never=tuple(str(n).upper() for n in vocab.get("never_read") or ()),
        exception=tuple(by_context.get("traceback-exception", [])),
        frame=tuple(by_context.get("frame", [])),
        constraint_signature=constraint_sigs[0].id if constraint_sigs else None,
        constraints=constraints,
        triggers=tuple(sorted(triggers)),
        by_id={s.id: s for s in signatures},
    )


def _signature(entry: dict[str, Any], rx: Any, kinds: dict[str, bool]) -> Signature:
    sid = entry["id"]
    if entry["kind"] not in kinds:
        raise KnowledgeError(f"signatures.yaml: {sid}: kind {entry['kind']!r} is not listed under kinds")
    pairs = entry.get("pairs") or {}
    item = rx(pairs["item"], f"{sid}.pairs.item") if pairs else None
    return Signature(
        id=sid,
        kind=entry["kind"],
        context=entry["context"],
        regex=rx(entry["regex"], sid) if entry.get("regex") else None,
        triggers=tuple(entry.get("triggers", ())),
        format=entry.get("format"),
        fallback=bool(entry.get("fallback")),
        truncated=bool(entry.get("truncated")),
        weak=bool(entry.get("weak")),
        auxiliary=bool(entry.get("auxiliary")),
        secondary=bool(entry.get("secondary")),
        echo=bool(entry.get("echo")),
        names_last_error=bool(entry.get("names_last_error")),
        number_unit=entry.get("number_unit"),
        fields=tuple((name, rx(text, f"{sid}.fields.{name}")) for name, text in (entry.get("fields") or {}).items()),
        pair_item=item,
        pair_keys=dict(pairs.get("keys", {})),
        pair_units=dict(pairs.get("units", {})),
        pair_groups=_pair_groups(item),
        pair_counts=any(not spec["field"].endswith("_bytes") for spec in (pairs.get("keys") or {}).values()),
    )


def _pair_groups(item: Regex | None) -> tuple[int, int, int | None]:
    """Where ``findall`` puts the key, value and unit of an item (checked by _check_side_signature)."""
    groups = item.groupindex if item is not None else {}
    if "key" not in groups or "value" not in groups:
        return 0, 1, None
    return groups["key"] - 1, groups["value"] - 1, groups["unit"] - 1 if "unit" in groups else None


def _check_side_signature(sig: Signature, key: str) -> None:
    """Side-fact signatures must name groups and fields the scanner can fill (a KB typo fails loudly)."""
    where = f"signatures.yaml: {sig.id}"
    if key == "env":
        if sig.regex is None or not {"name", "value"} <= set(sig.regex.groupindex):
            raise KnowledgeError(f"{where}: an env-export regex needs the groups 'name' and 'value'")
        return
    if key not in ("report", "footprint"):
        return
    if sig.pair_item is None or sig.regex is None or "pairs" not in sig.regex.groupindex:
        raise KnowledgeError(f"{where}: needs a 'pairs' group and a pairs.item regex")
    if not {"key", "value"} <= set(sig.pair_item.groupindex):
        raise KnowledgeError(f"{where}: pairs.item needs the groups 'key' and 'value'")
    for printed, spec in sig.pair_keys.items():
        if key == "report" and spec["field"] not in _REPORT_FIELDS:
            raise KnowledgeError(f"{where}: pairs key {printed!r}: {spec['field']!r} is not a MemoryReport field")
    for unit in [sig.number_unit, *(s.get("unit") for s in sig.pair_keys.values()), *sig.pair_units.values()]:
        try:
            unit_factor(unit) if unit else None
        except ValueError:
            raise KnowledgeError(f"{where}: unknown unit {unit!r}") from None


def _phase_rule(entry: dict[str, Any], rx: Any) -> PhaseRule:
    pid = entry["id"]

    def opt(marker: dict[str, str], key: str) -> Regex | None:
        return rx(marker[key], f"phases {pid}.{key}") if key in marker else None

    markers = tuple((opt(m, "function"), opt(m, "path"), opt(m, "code")) for m in entry["frames"])
    return PhaseRule(
        id=pid,
        markers=markers,
        log_start=rx(entry["log_start"], f"phases {pid}.log_start") if "log_start" in entry else None,
        log_end=rx(entry["log_end"], f"phases {pid}.log_end") if "log_end" in entry else None,
        triggers=tuple(entry.get("triggers", ())),
    )


def _combined_prefix(entries: list[dict[str, Any]], rx: Any) -> tuple[re.Pattern[str], tuple[str, ...]]:
    """One alternation of every launcher prefix, so stripping costs one match per layer."""
    parts, groups = [], []
    for i, entry in enumerate(entries):
        body = rx(entry["regex"], f"prefixes {entry['id']}").pattern.removeprefix("^")
        if "(?P<rank>" in body:
            body = body.replace("(?P<rank>", f"(?P<rank{i}>")
            groups.append(f"rank{i}")
        parts.append(f"(?:{body})")
    return re.compile("^(?:" + "|".join(parts) + ")"), tuple(groups)


_REGEX_META = set(".^$*+?{}[]()|\\")
_QUANTIFIERS = set("?*{")


def _required_literals(pattern: str) -> frozenset[str] | None:
    """Literals of which any matching text must contain at least one, or None if unsure.

    Each top-level alternative contributes its longest run of plain characters outside groups
    and classes; a character made optional by a quantifier ends the run without joining it.
    Lets constraint patterns join the str.find pre-filter instead of a regex scan of every chunk.
    """
    if pattern.startswith("(?") and not pattern.startswith("(?:"):
        return None  # inline flags such as (?i) change what a literal means
    branches, run, runs, depth, i = [], "", [], 0, 0
    while i < len(pattern):
        ch = pattern[i]
        literal = None
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            literal = nxt if not nxt.isalnum() else None
            i += 2
        elif ch == "[":
            end = pattern.find("]", i + 2)
            i = len(pattern) if end < 0 else end + 1
        else:
            depth += ch == "("
            depth -= ch == ")"
            if ch == "|" and depth == 0:
                branches.append(max((r.strip() for r in [*runs, run]), key=len))
                run, runs = "", []
            literal = ch if ch not in _REGEX_META and depth == 0 else None
            i += 1
        if literal is not None and not (i < len(pattern) and pattern[i] in _QUANTIFIERS):
            run += literal
        else:
            runs.append(run)
            run = ""
    branches.append(max((r.strip() for r in [*runs, run]), key=len))
    return frozenset(branches) if all(len(b) >= 6 for b in branches) else None


def _constraint_regex(entry: dict[str, Any]) -> re.Pattern[str]:
    try:
        return re.compile(entry["error_pattern"])
    except re.error as exc:
        where = f"constraints.yaml: {entry.get('id')}: error_pattern"
        raise KnowledgeError(f"{where} is not a valid regex ({exc})") from None
