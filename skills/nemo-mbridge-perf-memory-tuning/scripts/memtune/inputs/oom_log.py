"""Read a training log, streamed, and reduce its memory failures, crashes and timeouts to LogFacts.

The same single pass also keeps what the log says besides failures: each rank's latest
memory report, the theoretical footprint line and the memory-relevant variables the
launch echoed, so no other module reads the log again.

Why streamed: real logs reach several GB.  The reader keeps only bounded state: the
frames of tracebacks still open (per rank), one wrapped allocator message being joined,
a few counters and at most ``parser.max_events`` events.  Files are read in chunks and a
C-level pre-filter (every trigger literal of knowledge/signatures.yaml) skips the
ordinary lines, so Python only looks at lines that can matter.

Every text recognised here comes from knowledge/signatures.yaml (compiled once per
Knowledge object by ``compile_signatures``), constraint errors from
knowledge/constraints.yaml ``error_pattern`` and the variable names worth keeping from
knowledge/vocabulary.yaml ``env``; this module holds no message text.
"""

from __future__ import annotations

import heapq
import re
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache, partial
from pathlib import Path
from typing import IO, Any

from ..errors import UserError
from ..facts import LogFacts, MemoryReport, OomEvent
from ..knowledge import Knowledge, KnowledgeError
from . import limits
from .units import MAX_FIGURE, OutOfRange, checked, parse_size, unit_factor

# Named regex groups that carry a size; the group name plus "_bytes" is the OomEvent field.
SIZE_GROUPS = frozenset(
    ["requested", "capacity", "free", "allocated", "reserved", "reserved_unallocated", "private_pool",
     "process", "allowed"]
)
_REPORT_FIELDS = frozenset(f.name for f in fields(MemoryReport)) - {"rank", "line", "iteration"}
_SIDE_KINDS = {"memory-report": "report", "memory-footprint": "footprint", "env-export": "env"}
_CHUNK_CHARS = 1 << 20
_FINDER_WINDOW = 1 << 16  # chars of a chunk a trigger literal is searched ahead at a time


# --------------------------------------------------------------------------- compiled table


_PairHow = tuple[str, str | None, int | None] | tuple[()]


@dataclass(frozen=True)
class Signature:
    """One compiled entry of signatures.yaml."""

    id: str
    kind: str
    context: str
    regex: re.Pattern[str] | None
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
    fields: tuple[tuple[str, re.Pattern[str]], ...] = ()
    pair_item: re.Pattern[str] | None = None
    pair_keys: dict[str, dict[str, str]] = field(default_factory=dict)
    pair_units: dict[str, str] = field(default_factory=dict)  # printed unit -> units.py unit
    pair_counts: bool = False  # some key gives a count (an int field), not bytes
    pair_groups: tuple[int, int, int | None] = (0, 1, None)  # findall positions of pair_item's key, value, unit
    # printed key (, printed unit) -> (field, unit, bytes per unit) or () to skip: resolved once, not per item
    pair_memo: dict[Any, _PairHow] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class PhaseRule:
    id: str
    markers: tuple[tuple[re.Pattern[str] | None, re.Pattern[str] | None, re.Pattern[str] | None], ...]
    log_start: re.Pattern[str] | None
    log_end: re.Pattern[str] | None
    triggers: tuple[str, ...]


@dataclass(frozen=True)
class Patterns:
    """signatures.yaml (plus constraint error patterns) compiled for the scanner."""

    params: dict[str, int]
    memory_kinds: frozenset[str]
    noise: re.Pattern[str]
    prefix: re.Pattern[str]
    prefix_ranks: tuple[str, ...]
    rank_hints: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...]
    tb_start: re.Pattern[str]
    tb_frame: re.Pattern[str]
    tb_ignore: re.Pattern[str]
    tb_exception: re.Pattern[str]
    phases: tuple[PhaseRule, ...]
    alloc_triggers: tuple[str, ...]
    alloc_start: re.Pattern[str]
    alloc_end: re.Pattern[str]
    alloc_stop: re.Pattern[str]
    proc_other: re.Pattern[str]
    proc_self: re.Pattern[str]
    block: tuple[Signature, ...]
    block_fallback: tuple[Signature, ...]
    line: tuple[Signature, ...]
    reports: tuple[Signature, ...]
    footprints: tuple[Signature, ...]
    env: tuple[Signature, ...]
    env_triggers: tuple[str, ...]  # vocabulary.yaml env.process_prefixes: the names worth keeping
    env_never: tuple[str, ...]  # vocabulary.yaml env.never_read, upper-cased
    exception: tuple[Signature, ...]
    constraint_signature: str | None
    constraints: tuple[tuple[str, re.Pattern[str], frozenset[str] | None], ...]  # id, regex, required literals
    triggers: tuple[str, ...]  # every literal that can make a line matter (the pre-filter)
    by_id: dict[str, Signature]


_COMPILED: dict[int, tuple[Knowledge, Patterns]] = {}


def compile_signatures(kb: Knowledge) -> Patterns:
    """Compile signatures.yaml once per Knowledge object (the KB is immutable once loaded)."""
    cached = _COMPILED.get(id(kb))
    if cached is not None and cached[0] is kb:
        return cached[1]
    patterns = _compile(kb)
    _COMPILED[id(kb)] = (kb, patterns)
    return patterns


def _compile(kb: Knowledge) -> Patterns:
    table = kb.tables.get("signatures")
    if not isinstance(table, dict) or "signatures" not in table:
        raise KnowledgeError("signatures.yaml: missing or has no 'signatures' list")
    frags: dict[str, str] = table.get("fragments", {})

    def rx(text: str, where: str) -> re.Pattern[str]:
        for _ in range(4):  # fragments may use fragments
            expanded = text
            for name, value in frags.items():
                expanded = expanded.replace("{" + name + "}", value)
            if expanded == text:
                break
            text = expanded
        try:
            return re.compile(text)
        except re.error as exc:
            raise KnowledgeError(f"signatures.yaml: {where}: invalid regex ({exc})") from None

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


def _pair_groups(item: re.Pattern[str] | None) -> tuple[int, int, int | None]:
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

    def opt(marker: dict[str, str], key: str) -> re.Pattern[str] | None:
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


# --------------------------------------------------------------------------- public entry point


def report_pairs(sig: Signature, text: str | None) -> dict[str, float]:
    """``key: value`` items of a report or footprint line -> {field: bytes or count}; see signatures.yaml sec. 7.

    One ``findall`` per line and each key's field and unit resolved once per signature: a report-dense log
    has 360k such lines, and the per-item match objects and unit look-ups were a third of its scan."""
    values: dict[str, float] = {}
    if sig.pair_item is None or not text:
        return values
    key_at, value_at, unit_at = sig.pair_groups
    memo = sig.pair_memo
    for item in sig.pair_item.findall(text):
        printed = item[unit_at] if unit_at is not None else None
        ident = item[key_at] if unit_at is None else (item[key_at], printed)
        how = memo.get(ident)
        if how is None:
            how = _pair_how(sig, item[key_at], printed)
            if len(memo) < _PAIR_MEMO_KEPT:
                memo[ident] = how
        if not how:
            continue
        field_name, unit, factor = how
        raw = item[value_at]
        try:
            value = float(raw) * factor if factor else -1.0
        except ValueError:
            value = -1.0
        try:
            if not (0 <= value < MAX_FIGURE and "_" not in raw and raw.strip() == raw):  # else the usual case, inline
                value = _figure(raw, unit) if unit else checked(float(raw), raw)
        except OutOfRange:
            raise  # a corrupt figure: refused with its line (parse_log / read_memory_steps), never a wrong number
        except ValueError:
            continue
        values[field_name] = values.get(field_name, 0.0) + value
    return values


_PAIR_MEMO_KEPT = 256  # printed keys a signature remembers (a log could print any words as keys)


def _pair_how(sig: Signature, key: str, printed: str | None) -> _PairHow:
    """The field and unit of one printed key (and unit), or () when the table does not read it."""
    spec = sig.pair_keys.get(key.strip())
    if not spec:
        return ()
    unit = spec.get("unit") or (sig.pair_units.get(printed) if printed else None) or sig.number_unit
    if printed and unit is None:
        return ()  # a unit the table does not map: better no number than a wrong one
    return spec["field"], unit, unit_factor(unit) if unit else None


def _figure(raw: str, unit: str) -> float:
    """``parse_size(raw, unit)`` with a fast path for the plain numbers report lines print (360k a big log)."""
    try:
        number = float(raw)
    except ValueError:
        return parse_size(raw, unit)
    if number != number or "_" in raw or raw.strip() != raw:  # NaN, or what float() takes and a size may not
        return parse_size(raw, unit)
    return checked(number * unit_factor(unit), raw)


def parse_log(source: str | Path | Iterable[str], kb: Knowledge,
              on_report: Callable[[MemoryReport], None] | None = None, name: str | None = None) -> LogFacts:
    """Read a whole training log and return what it says about memory failures.

    ``source`` is a path (``str`` without a newline or ``Path``; ``.gz`` is decompressed,
    ``"-"`` is stdin), log text (a ``str`` containing newlines) or an iterable of lines.
    ``on_report`` receives every memory report line as it is read (the facts keep the latest per rank);
    ``name`` is what error messages call an iterable source (default ``<lines>``).
    """
    scanner = _Scanner(compile_signatures(kb), on_report)
    if isinstance(source, (str, Path)) and not (isinstance(source, str) and "\n" in source):
        name = str(source)
        with _open_log(Path(source) if str(source) != "-" else None) as fh:
            _scan_chunks(iter(partial(fh.read, _CHUNK_CHARS), ""), scanner, name)
    elif isinstance(source, str):
        name = "<text>"
        _scan_chunks((source[i : i + _CHUNK_CHARS] for i in range(0, len(source), _CHUNK_CHARS)), scanner, name)
    else:
        name = name or "<lines>"
        _scan_chunks(_batched_lines(source), scanner, name)
    try:
        return scanner.finish()  # the last block's message is read here
    except ValueError as exc:
        raise _unreadable(name, scanner.lineno, exc) from None


def _unreadable(name: str, lineno: int, exc: ValueError) -> UserError:
    """A line no real log has: int() of a digit run past Python's 4300-digit limit, or a figure past any size
    (units.OutOfRange, which knows the first line of the message it was read from)."""
    line = getattr(exc, "line", None) or lineno
    return UserError(f"{name}:{line}: cannot read this line ({str(exc).split(';')[0]})")


def _batched_lines(lines: Iterable[str]) -> Iterator[str]:
    """Lines (with or without their newline) glued into chunks, so they share the chunked scan."""
    batch: list[str] = []
    size = 0
    for item in lines:
        batch.append(item if item.endswith("\n") else item + "\n")
        size += len(item) + 1
        if size >= _CHUNK_CHARS:
            yield "".join(batch)
            batch, size = [], 0
    if batch:
        yield "".join(batch)


@contextmanager
def _open_log(path: Path | None) -> Iterator[IO[str]]:
    if path is None:
        yield sys.stdin
        return
    try:
        if path.suffix == ".gz":  # bounded: a small .gz must not expand into minutes of reading
            fh: IO[str] = limits.gzip_text(path, "a training log", newline="")
        else:
            fh = open(path, encoding="utf-8", errors="replace", newline="")  # noqa: SIM115
    except FileNotFoundError:
        raise UserError(f"{path}: log file not found") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read log ({exc.strerror or exc})") from None
    with fh:
        yield fh


@lru_cache(maxsize=8)
def _shortest_triggers(triggers: tuple[str, ...]) -> tuple[str, ...]:
    """The triggers the pre-filter searches: one that contains another adds nothing (worked out once per
    knowledge base, not on every log: ~10,000 substring tests)."""
    return tuple(t for t in triggers if not any(o != t and o in t for o in triggers))


@lru_cache(maxsize=8)
def _longer_triggers(triggers: tuple[str, ...]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each trigger that contains others, with the shortest triggers it contains: it can occur in a line only
    where all of those do."""
    shortest = _shortest_triggers(triggers)
    return tuple((t, tuple(s for s in shortest if s in t)) for t in triggers if t not in shortest)


class _Finder:
    """Next pre-filter hit in a chunk, at C speed.

    Each trigger literal is searched with str.find and each constraint pattern with its regex; the next
    position of each is kept in a heap, so a call re-searches only the needles the scan has moved past
    (a report-dense log hits one trigger a line) and every needle scans a chunk about once however many
    hits there are (one alternation regex over all triggers is ~10x slower).  A literal is searched a window
    at a time, each window twice the last: one not in its window waits in the heap at the window's end and is
    searched on only when every other needle lies further, so a chunk that is one long line is not scanned to
    its end for every trigger before the line is read.
    """

    def __init__(self, patterns: Patterns) -> None:
        self.literals = _shortest_triggers(patterns.triggers)
        self.regexes = tuple(rx for _, rx, literals in patterns.constraints if literals is None)
        # (position, searched on from there, needle, next window): a hit, or where no hit starts before
        self._heap: list[tuple[int, bool, int, int]] | None = None

    def reset(self) -> None:
        self._heap = None

    def _search(self, i: int, buf: str, pos: int, end: int, window: int = 0) -> tuple[int, bool, int, int]:
        if i < len(self.literals):
            needle = self.literals[i]
            window = window or _FINDER_WINDOW
            stop = min(end, pos + window)
            at = buf.find(needle, pos, stop)
            if at < 0 and stop < end:
                return (stop - len(needle) + 1, True, i, 2 * window)
            return (end if at < 0 else at, False, i, 0)
        m = self.regexes[i - len(self.literals)].search(buf, pos, end)
        return (m.start() if m else end, False, i, 0)

    def first(self, buf: str, pos: int, end: int) -> int:
        heap = self._heap
        if heap is None:
            heap = [self._search(i, buf, pos, end) for i in range(len(self.literals) + len(self.regexes))]
            heapq.heapify(heap)
            self._heap = heap
        while heap and heap[0][0] < end and (heap[0][1] or heap[0][0] < pos):
            at, _, i, window = heap[0]
            heapq.heapreplace(heap, self._search(i, buf, max(at, pos), end, window))
        best = heap[0][0] if heap else end
        return best if best < end else -1


def _scan_chunks(chunks: Iterator[str], scanner: _Scanner, name: str) -> None:
    """Feed complete lines; while the scanner is idle, jump straight to the next pre-filter hit."""
    finder = _Finder(scanner.p)
    max_line = scanner.p.params["max_line_chars"]
    buf = ""
    try:
        for chunk in chunks:
            buf += chunk
            end = buf.rfind("\n") + 1
            pos = 0
            finder.reset()
            while pos < end:
                if scanner.idle:
                    hit = finder.first(buf, pos, end)
                    if hit < 0:
                        scanner.skip(buf.count("\n", pos, end))
                        pos = end
                        break
                    start = buf.rfind("\n", pos, hit) + 1 or pos
                    scanner.skip(buf.count("\n", pos, start))
                    pos = start
                    after = scanner.report_run(buf, pos, end)
                    if after > pos:  # a run of plain report lines, read in one go
                        pos = after
                        continue
                nl = buf.index("\n", pos, end)
                scanner.feed(buf[pos:nl])
                pos = nl + 1
            buf = buf[end:]
            while len(buf) > max_line:
                scanner.feed(buf[:max_line], complete=False)
                buf = buf[max_line:]
        if buf:
            scanner.feed(buf)
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise UserError(f"{name}: cannot read log ({exc})") from None
    except ValueError as exc:
        raise _unreadable(name, scanner.lineno, exc) from None


# --------------------------------------------------------------------------- scanner state


@dataclass
class _Traceback:
    start: int
    frames: list[list[str | None]] = field(default_factory=list)  # [function, path, code]
    expect_code: bool = False


@dataclass(frozen=True)
class _Plan:
    """What a line holding exactly these triggers can match: every group filtered once per trigger set, since a
    log repeats a few kinds of line (a report-dense log: one set for 360k lines)."""

    alloc: bool
    line: tuple[Signature, ...]
    reports: tuple[Signature, ...]
    footprints: tuple[Signature, ...]
    env: bool
    phases: tuple[Any, ...]
    rank_hints: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...]
    constraints: tuple[tuple[str, re.Pattern[str], Any], ...]
    reports_only: bool = False  # a memory report line and nothing else: _process reads it without the rest


def _plan(p: Patterns, present: frozenset[str]) -> _Plan:
    def hit(triggers: Iterable[str]) -> bool:
        return not present.isdisjoint(triggers)

    plan = _Plan(
        alloc=hit(p.alloc_triggers),
        line=tuple(sig for sig in p.line if hit(sig.triggers)),
        reports=tuple(sig for sig in p.reports if hit(sig.triggers) and sig.regex is not None),
        footprints=tuple(sig for sig in p.footprints if hit(sig.triggers) and sig.regex is not None),
        env=hit(p.env_triggers),
        phases=tuple(rule for rule in p.phases if rule.log_start is not None and hit(rule.triggers)),
        rank_hints=tuple(h for h in p.rank_hints if hit(h[0])),
        constraints=tuple(c for c in p.constraints if c[2] is None or hit(c[2])),
    )
    others = (plan.alloc, plan.line, plan.footprints, plan.env, plan.phases, plan.rank_hints, plan.constraints)
    alone = bool(plan.reports) and not any(others) and "Error: " not in present
    return replace(plan, reports_only=True) if alone else plan


_PLANS_KEPT = 4096  # distinct trigger sets remembered per scan
_SHAPES_KEPT = 4096  # line shapes remembered per scan (each at most _SHAPE_MAX_CHARS)
_SHAPE_MAX_CHARS = 512
_NUMBER_RUNS = re.compile(r"[0-9][0-9.]*")  # a line's shape: each run of these becomes "0"
_NUMBER_CHARS = frozenset("0123456789.")


def _entry(tb: _Traceback) -> str | None:
    """The file of the traceback's outermost frame when it is a program's top level ('<module>')."""
    if tb.frames and tb.frames[0][0] == "<module>":
        return tb.frames[0][1]
    return None


@dataclass
class _Block:
    """An allocator message being joined from the lines a logger wrapped it over."""

    line: int
    rank: int | None
    prefix_rank: int | None
    phase: str | None
    parts: list[str]
    skipped: int = 0
    frames: list[str] = field(default_factory=list)
    entry: str | None = None

    def variants(self) -> list[str]:
        joined = ["".join(self.parts)]
        if len(self.parts) > 1:
            joined.append(" ".join(part.strip() for part in self.parts))
        return [" ".join(text.split()) for text in joined]


_UNSET = object()
# An exception line that names memory exhaustion (its own text did not match an allocator signature): not a crash.
_MEMORY_WORDS = re.compile(r"OutOfMemory|out of memory|\bOOM\b", re.I)


class _Scanner:
    """Line-at-a-time state machine; ``finish`` turns what it saw into LogFacts."""

    def __init__(self, patterns: Patterns, on_report: Callable[[MemoryReport], None] | None = None) -> None:
        self.p = patterns
        self.prm = patterns.params
        self.on_report = on_report
        self._plans: dict[frozenset[str], _Plan] = {}
        self._shapes: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {}
        self._long: tuple[str, frozenset[str]] = ("", frozenset())  # the last line too long to keep a shape of
        self._plain_triggers = tuple(t for t in patterns.triggers if _NUMBER_CHARS.isdisjoint(t))
        self._digit_triggers = tuple((t, tuple(filter(None, _NUMBER_RUNS.split(t.replace(".", "0")))))
                                     for t in patterns.triggers if not _NUMBER_CHARS.isdisjoint(t))
        self.lineno = 0
        self._piece_open = False
        self.pending: _Block | None = None
        self.tracebacks: dict[int | None, _Traceback] = {}
        self.open_traceback_phase: str | None = None  # phase of a traceback the log ends inside
        self._oldest_traceback = 0
        self.window_until = 0
        self.rank_hint: tuple[int, int] | None = None
        self.log_phase: str | None = None
        self.events: list[OomEvent] = []
        self._seen: dict[tuple[Any, ...], set[int | None]] = {}
        self._overflow_ranks: set[int] = set()
        self._overflow_kinds: dict[str, None] = {}
        self._overflow_sigs: dict[str, None] = {}
        self.reports: dict[int | None, MemoryReport] = {}
        self.theoretical: dict[str, float] = {}
        self.exports: dict[str, str] = {}  # variables the log shows set
        self.constraint_ids: dict[str, None] = {}
        self.snapshot_path: str | None = None
        self.series: list[tuple[int, float]] = []
        self.series_rank: Any = _UNSET
        self.loose: list[tuple[str, int | None, str | None]] = []  # exception lines seen outside a traceback

    # -- feeding -------------------------------------------------------------

    @property
    def idle(self) -> bool:
        """True when a line without a pre-filter hit cannot change anything."""
        return self.pending is None and not self.tracebacks and self.lineno >= self.window_until

    def report_run(self, buf: str, pos: int, end: int) -> int:
        """Read consecutive plain memory-report lines from ``pos`` exactly as ``feed`` would (the scanner is idle:
        no block pending, no traceback open), without its per-line machinery; where the run stops.

        A line qualifies when it has no carriage return, colour code or launcher prefix and holds a report's
        triggers and nothing else (its plan is ``reports_only``): ``_process`` would only read its reports.
        A report-dense log (64 ranks a step) is then read a step at a time instead of a line at a time."""
        if self._piece_open:
            return pos
        find, prefix_match, present_of, plan_for, reports = (
            buf.find, self.p.prefix.match, self._present, self._plan_for, self._reports)  # 360k lines a log
        while pos < end:
            nl = find("\n", pos, end)
            if nl < 0:
                break
            line = buf[pos:nl]
            if "\r" in line or "\x1b" in line:
                break
            prefix = prefix_match(line)
            if prefix is not None and prefix.end():
                break
            present = present_of(line)
            plan = plan_for(present) if present else None
            if plan is None or not plan.reports_only:
                break
            self.lineno += 1
            reports(plan, line, None)
            pos = nl + 1
        return pos

    def skip(self, lines: int) -> None:
        if lines and self._piece_open:
            lines -= 1
            self._piece_open = False
        self.lineno += lines

    def feed(self, text: str, complete: bool = True) -> None:
        """Process one line (or one piece of an over-long line); the caller did the pre-filtering."""
        if not self._piece_open:
            self.lineno += 1
        self._piece_open = not complete
        if self.tracebacks and self.lineno - self._oldest_traceback > self.prm["traceback_max_lines"]:
            self._expire_tracebacks()
        text = text.rstrip("\r\n")
        if "\r" in text:  # progress bars rewrite the line; every segment was printed
            for segment in text.split("\r"):
                if segment.strip():
                    self._process(segment)
        else:
            self._process(text)

    # -- one line ------------------------------------------------------------

    def _strip(self, line: str) -> tuple[str, int | None]:
        rank = None
        for _ in range(6):
            m = self.p.prefix.match(line)
            if not m or not m.end():
                break
            for group in self.p.prefix_ranks:
                if m.group(group) is not None:
                    rank = int(m.group(group))
                    break
            line = line[m.end():]
        return line, rank

    def _process(self, raw: str) -> None:
        p = self.p
        if "\x1b" in raw:
            raw = p.noise.sub("", raw)
        text, rank = self._strip(raw)
        if self.pending is not None:
            verdict = self._offer(self.pending, text, rank)
            if verdict == "take":
                tail = self.pending.parts[-2:]
                if p.alloc_end.search("".join(tail)) or p.alloc_end.search(" ".join(t.strip() for t in tail)):
                    self._finish_block()
                return
            if verdict == "stop":
                self._finish_block()
        if p.tb_start.match(text):
            if not self.tracebacks:
                self._oldest_traceback = self.lineno
            self.tracebacks[rank] = _Traceback(start=self.lineno)
            return
        tb = self.tracebacks.get(rank)
        if tb is None and p.tb_frame.match(text):  # an excerpt that starts mid-traceback
            if not self.tracebacks:
                self._oldest_traceback = self.lineno
            tb = self.tracebacks[rank] = _Traceback(start=self.lineno)
        if tb is not None:
            if self.lineno - tb.start > self.prm["traceback_max_lines"]:
                del self.tracebacks[rank]
                tb = None
            elif self._traceback_line(tb, text):
                return
        present = self._present(text)
        plan = self._plan_for(present) if present else None
        if tb is None and plan is not None and plan.reports_only:
            self._reports(plan, text, rank)  # what _match_line and _side_facts would do, alone
            return
        hit = self._match_line(text, rank, present)
        if tb is None and not hit and present and "Error: " in present and len(self.loose) < 8:
            exc = p.tb_exception.match(text)
            if exc:  # an exception pasted without its traceback header (or before its frames)
                self.loose.append((exc.group("error").strip(), rank, self.log_phase))
        if tb is not None:
            exc = p.tb_exception.match(text)
            if exc:
                phase = self._frames_phase(tb)
                del self.tracebacks[rank]
                self.window_until = self.lineno + self.prm["exception_window_lines"]
                if phase:
                    self._backfill_phase(rank, phase)
                if not hit:
                    self._crash(exc.group("error").strip(), rank, phase or self.log_phase)
                self._attach_frames(rank, tb)
        self._side_facts(text, rank, present)

    def _expire_tracebacks(self) -> None:
        """Drop tracebacks that never ended (cut logs), so the scanner can go back to skipping lines."""
        limit = self.lineno - self.prm["traceback_max_lines"]
        self.tracebacks = {r: tb for r, tb in self.tracebacks.items() if tb.start >= limit}
        self._oldest_traceback = min((tb.start for tb in self.tracebacks.values()), default=self.lineno)

    def _traceback_line(self, tb: _Traceback, text: str) -> bool:
        """Consume frame / source / caret lines of an open traceback; False for anything else."""
        frame = self.p.tb_frame.match(text)
        if frame:
            if len(tb.frames) >= 128:
                del tb.frames[1:65]  # keep the outermost frame and the innermost ones
            tb.frames.append([frame.group("function"), frame.group("path"), None])
            tb.expect_code = True
            return True
        if tb.expect_code and text[:1].isspace() and text.strip():
            tb.frames[-1][2] = text.strip()
            tb.expect_code = False
            return True
        tb.expect_code = False
        return not text.strip() or bool(self.p.tb_ignore.match(text))

    def _present(self, text: str) -> frozenset[str]:
        """The pre-filter triggers ``text`` holds, remembered per line shape (each run of digits and dots as "0").

        A trigger without a digit or dot occurs in a line exactly when it occurs in its shape, so the lines of
        one kind (360k report lines in a report-dense log) test the 98 triggers once; the few triggers with a
        digit or dot are tested on the line itself when the shape holds each of their other parts.  A line too long
        for a shape is tested whole, once: report_run and then _process ask about the same line."""
        if len(text) > _SHAPE_MAX_CHARS:
            if text != self._long[0]:
                self._long = (text, self._triggers_in(text))
            return self._long[1]
        shape = _NUMBER_RUNS.sub("0", text)
        known = self._shapes.get(shape)
        if known is None:
            if len(self._shapes) >= _SHAPES_KEPT:
                self._shapes.clear()
            known = self._shapes[shape] = (
                frozenset(t for t in self._plain_triggers if t in shape),
                tuple(t for t, parts in self._digit_triggers if all(part in shape for part in parts)))
        found, maybe = known
        if maybe:
            extra = [t for t in maybe if t in text]
            if extra:
                return found.union(extra)
        return found

    def _triggers_in(self, text: str) -> frozenset[str]:
        """The triggers a long line holds: the shortest searched for, a longer one only where all it contains are
        there (a quarter fewer scans of a line up to 1 MB)."""
        found = {t for t in _shortest_triggers(self.p.triggers) if t in text}
        found.update(t for t, parts in _longer_triggers(self.p.triggers) if found.issuperset(parts) and t in text)
        return frozenset(found)

    def _plan_for(self, present: frozenset[str]) -> _Plan:
        plan = self._plans.get(present)
        if plan is None:
            if len(self._plans) >= _PLANS_KEPT:
                self._plans.clear()
            plan = self._plans[present] = _plan(self.p, present)
        return plan

    def _match_line(self, text: str, rank: int | None, present: frozenset[str]) -> bool:
        """Run the line signatures; True when a memory failure or timeout starts on this line."""
        p = self.p
        if not present:
            return False
        plan = self._plan_for(present)
        if plan.alloc and p.alloc_start.search(text):
            effective = rank if rank is not None else self._hint()
            self.pending = _Block(self.lineno, effective, rank, self._phase_for(rank), [text],
                                  frames=self._open_frames(rank), entry=self._open_entry(rank))
            if p.alloc_end.search(text):
                self._finish_block()
            return True
        hit = False
        for sig in plan.line:
            m = sig.regex.search(text) if sig.regex else None
            if m:
                event = self._event(sig, m, text, rank, self.lineno, self._phase_for(rank))
                event.frames = self._open_frames(rank)
                event.entry = self._open_entry(rank)
                self._add(event)
                hit = hit or sig.kind in p.memory_kinds or sig.kind == "timeout"
        return hit

    def _offer(self, block: _Block, text: str, rank: int | None) -> str:
        if rank is not None and block.prefix_rank is not None and rank != block.prefix_rank:
            block.skipped += 1
            return "stop" if block.skipped > self.prm["block_max_skipped"] else "skip"
        if len(block.parts) >= self.prm["block_max_lines"] or not text.strip():
            return "stop"
        if self.p.alloc_stop.match(text) or self.p.alloc_start.search(text):
            return "stop"
        block.parts.append(text)
        return "take"

    def _finish_block(self) -> None:
        block, self.pending = self.pending, None
        if block is None:
            return
        variants = block.variants()
        for group in (self.p.block, self.p.block_fallback):
            for sig in group:
                for text in variants:
                    m = sig.regex.search(text) if sig.regex else None
                    if m:
                        end = self.p.alloc_end.search(text, m.end())
                        shown = text[: end.end()] if end else text[: m.end()] if not sig.fallback else text
                        event = self._event(sig, m, shown, block.rank, block.line, block.phase, text)
                        event.frames, event.entry = block.frames, block.entry
                        self._add(event)
                        return

    def _side_facts(self, text: str, rank: int | None, present: frozenset[str]) -> None:
        """Memory reports, footprints, exported variables, checkpoint progress, rank hints, constraint errors."""
        p = self.p
        plan = self._plan_for(present)
        self._reports(plan, text, rank)
        for sig in plan.footprints:
            m = sig.regex.search(text)
            if m:
                self.theoretical = report_pairs(sig, m.group("pairs")) or self.theoretical
        if plan.env:
            self._env_line(text)
        for rule in plan.phases:
            if rule.log_end is not None and rule.log_end.search(text):
                if self.log_phase == rule.id:
                    self.log_phase = None
            elif rule.log_start.search(text):
                self.log_phase = rule.id
        for _, regex in plan.rank_hints:
            m = regex.search(text)
            if m:
                self.rank_hint = (int(m.group("rank")), self.lineno + self.prm["rank_hint_lines"])
        for cid, regex, _ in plan.constraints:
            if regex.search(text):
                self.constraint_ids.setdefault(cid, None)
                if p.constraint_signature:
                    ev = OomEvent(signature=p.constraint_signature, kind="config-error", line=self.lineno,
                                  text=self._clip(text), rank=rank if rank is not None else self._hint(),
                                  constraint=cid)
                    self._add(ev)

    # -- events --------------------------------------------------------------

    def _hint(self) -> int | None:
        if self.rank_hint and self.lineno <= self.rank_hint[1]:
            return self.rank_hint[0]
        return None

    def _clip(self, text: str) -> str:
        limit = self.prm["max_text_chars"]
        return text if len(text) <= limit else text[: limit - 3] + "..."

    def _event(self, sig: Signature, m: re.Match[str], shown: str, rank: int | None, line: int,
               phase: str | None, full: str | None = None) -> OomEvent:
        try:
            numbers, msg_rank = self._numbers(sig, m, full if full is not None else shown)
        except OutOfRange as exc:
            exc.line = line  # a message block is read after its last line: name the line it starts on
            raise
        if rank is None:
            rank = msg_rank if msg_rank is not None else self._hint()
        return OomEvent(signature=sig.id, kind=sig.kind, line=line, text=self._clip(shown.strip()), rank=rank,
                        format=sig.format, truncated=sig.truncated, weak=sig.weak, phase=phase, **numbers)

    def _numbers(self, sig: Signature, m: re.Match[str], text: str) -> tuple[dict[str, Any], int | None]:
        out: dict[str, Any] = {}
        msg_rank = None
        others: list[float] | None = None  # None: the message has no NVML process section
        for name, value in m.groupdict().items():
            if value is None:
                continue
            if name in SIZE_GROUPS:
                out[f"{name}_bytes"] = parse_size(value, sig.number_unit)
            elif name == "processes":
                others = [parse_size(o.group("size")) for o in self.p.proc_other.finditer(value)]
                own = self.p.proc_self.search(value)
                if own and "process_bytes" not in out:
                    out["process_bytes"] = parse_size(own.group("size"))
            elif name == "rank":
                msg_rank = int(value)
            elif name == "snapshot" and self.snapshot_path is None:
                self.snapshot_path = value
        for name, regex in sig.fields:
            found = regex.search(text)
            if found and f"{name}_bytes" not in out:
                out[f"{name}_bytes"] = parse_size(found.group(1))
        return _derive_event_numbers(out, others), msg_rank

    def _reports(self, plan: _Plan, text: str, prefix_rank: int | None) -> None:
        """Every memory report on the line (loggers sometimes glue two ranks' reports together)."""
        for sig in plan.reports:
            for m in sig.regex.finditer(text):
                self._report(sig, m, prefix_rank)

    def _report(self, sig: Signature, m: re.Match[str], prefix_rank: int | None) -> None:
        """Keep the latest report of the rank the line names (else its prefix's), for a bounded set of ranks;
        every report goes to ``on_report`` when a caller wants them all (compare's per-step reader)."""
        groups = m.groupdict()
        rank = int(groups["rank"]) if groups.get("rank") else prefix_rank
        kept = rank in self.reports or len(self.reports) < self.prm["max_report_ranks"]
        if not kept and self.on_report is None:
            return
        values = report_pairs(sig, m.group("pairs"))
        if not values:
            return
        iteration = int(groups["iteration"]) if groups.get("iteration") else None
        if sig.pair_counts:
            values.update({k: int(v) for k, v in values.items() if not k.endswith("_bytes")})
        report = MemoryReport(rank, self.lineno, iteration, **values)
        if self.on_report is not None:
            self.on_report(report)
        if kept:
            self.reports[rank] = report
            self._track(rank, iteration, values.get("allocated_bytes"))

    def _track(self, rank: int | None, iteration: int | None, allocated: float | None) -> None:
        """Allocated memory over iterations of the first rank that reports it: whether memory grows per step.

        Bounded: past ``series_max_points`` every other point is dropped, so a long run keeps an even sample."""
        if allocated is None:
            return
        if self.series_rank is _UNSET:
            self.series_rank = rank
        if rank != self.series_rank:
            return
        step = iteration if iteration is not None else len(self.series)
        self.series.append((step, allocated))
        if len(self.series) > self.prm["series_max_points"]:
            self.series = self.series[::2]


    def _env_line(self, text: str) -> None:
        """A variable the log shows set; only names the vocabulary reads, never secret-looking ones."""
        for sig in self.p.env:
            m = sig.regex.search(text) if sig.regex else None
            if not m:
                continue
            name, value = m.group("name"), m.group("value") or ""
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            upper = name.upper()
            if (not name.startswith(self.p.env_triggers) or any(n in upper for n in self.p.env_never)
                    or len(value) > self.prm["max_text_chars"]):
                return
            if name in self.exports or len(self.exports) < self.prm["max_env_vars"]:
                self.exports[name] = value
            return

    def _crash(self, error: str, rank: int | None, phase: str | None) -> None:
        for sig in self.p.exception:
            m = sig.regex.search(error) if sig.regex else None
            if m:
                self._add(self._event(sig, m, error, rank, self.lineno, phase))
                return

    def _add(self, ev: OomEvent) -> None:
        numbers = (ev.requested_bytes, ev.capacity_bytes, ev.free_bytes, ev.allocated_bytes,
                   ev.reserved_unallocated_bytes, ev.process_bytes)
        key = (ev.signature, numbers, ev.constraint, ev.text[:160] if ev.kind == "crash" else None)
        ranks = self._seen.get(key)
        if ranks is not None and (ev.rank in ranks or ev.rank is None):
            return
        if len(self.events) >= self.prm["max_events"]:
            if ev.kind != "crash":
                self._overflow_kinds.setdefault(ev.kind, None)
                self._overflow_sigs.setdefault(ev.signature, None)
                if ev.kind in self.p.memory_kinds and ev.rank is not None:
                    self._overflow_ranks.add(ev.rank)
            return
        self._seen.setdefault(key, set()).add(ev.rank)
        self.events.append(ev)

    # -- phase ---------------------------------------------------------------

    def _phase_for(self, rank: int | None) -> str | None:
        tb = self.tracebacks.get(rank)
        return (self._frames_phase(tb) if tb is not None else None) or self.log_phase

    def _frames_phase(self, tb: _Traceback) -> str | None:
        for phase in self.p.phases:
            for func_rx, path_rx, code_rx in phase.markers:
                for func, path, code in tb.frames:
                    if func_rx is not None and not func_rx.search(func or ""):
                        continue
                    if path_rx is not None and not path_rx.search(path or ""):
                        continue
                    if code_rx is not None and not (code and code_rx.search(code)):
                        continue
                    return phase.id
        return None

    def _backfill_phase(self, rank: int | None, phase: str) -> None:
        """NCCL / snapshot lines print before the traceback that tells where the rank was."""
        oldest = self.lineno - self.prm["phase_backfill_lines"]
        for ev in reversed(self.events):
            if ev.line < oldest:
                break
            if ev.phase is None and ev.kind in self.p.memory_kinds and (rank is None or ev.rank in (rank, None)):
                ev.phase = phase

    def _open_frames(self, rank: int | None) -> list[str]:
        tb = self.tracebacks.get(rank)
        return self._frame_texts(tb) if tb is not None else []

    def _open_entry(self, rank: int | None) -> str | None:
        tb = self.tracebacks.get(rank)
        return _entry(tb) if tb is not None else None

    def _frame_texts(self, tb: _Traceback) -> list[str]:
        return [f"{func or ''} {code or ''}".strip() for func, _, code in tb.frames][-self.prm["frames_kept"]:]

    def _attach_frames(self, rank: int | None, tb: _Traceback) -> None:
        """The traceback that printed a failure says where it failed (situation.py reads its frames)."""
        frames, entry = self._frame_texts(tb), _entry(tb)
        oldest = self.lineno - self.prm["phase_backfill_lines"]
        for ev in reversed(self.events):
            if ev.line < oldest:
                break
            if not ev.frames and (rank is None or ev.rank in (rank, None)):
                ev.frames, ev.entry = frames, entry

    # -- result --------------------------------------------------------------

    def finish(self) -> LogFacts:
        self._finish_block()
        crashes = [c for c in self.loose if not _MEMORY_WORDS.search(c[0])]  # an OOM line is no crash
        if not self.events and crashes:  # an excerpt whose only failure is an exception line pasted on its own
            error, rank, phase = crashes[0]
            self._crash(error, rank, phase)
        for rank, tb in self.tracebacks.items():  # the log ends inside a traceback (a pasted excerpt)
            phase = self._frames_phase(tb)
            if phase:
                self._backfill_phase(rank, phase)
                self.open_traceback_phase = self.open_traceback_phase or phase
            self._attach_frames(rank, tb)
        events = self._drop_explained_crashes(self._drop_echoed_weak(self.events))
        return _assemble(self, events)

    def _drop_echoed_weak(self, events: list[OomEvent]) -> list[OomEvent]:
        """A weak ``echo`` signal next to a firm one of the same kind and rank is that one's echo
        ("ncclUnhandledCudaError" then "Last error: Cuda failure 'out of memory'"): keep the firm one only.  A firm
        line that names the last error ("Cuda failure 999 'unknown error'") explains it whatever its kind."""
        ahead = self.prm["crash_lookahead_lines"]
        firm = [e for e in events if not e.weak]

        def echoed(weak: OomEvent) -> bool:
            near = (e for e in firm if (e.kind == weak.kind or self.p.by_id[e.signature].names_last_error)
                    and e.rank in (weak.rank, None))
            return self.p.by_id[weak.signature].echo and any(abs(e.line - weak.line) <= ahead for e in near)

        return [e for e in events if not e.weak or not echoed(e)]

    def _drop_explained_crashes(self, events: list[OomEvent]) -> list[OomEvent]:
        """An exception next to a memory failure of the same rank is that failure's echo.

        Timeouts never explain a crash: in an unprefixed log the other ranks' watchdog lines
        follow the real exception directly, ten minutes later but on the next lines.
        """
        back, ahead = self.prm["crash_lookback_lines"], self.prm["crash_lookahead_lines"]
        signals = [e for e in events if e.kind in self.p.memory_kinds]

        def explained(crash: OomEvent) -> bool:
            for e in signals:
                if crash.rank is not None and e.rank is not None and crash.rank != e.rank:
                    continue
                if crash.line - back <= e.line <= crash.line + ahead:
                    return True
            return False

        return [e for e in events if e.kind != "crash" or not explained(e)]


def _derive_event_numbers(out: dict[str, Any], others: list[float] | None) -> dict[str, Any]:
    """Fill reserved / reserved-unallocated from each other and place the NVML process lines."""
    alloc, ru, reserved = out.get("allocated_bytes"), out.get("reserved_unallocated_bytes"), out.get("reserved_bytes")
    if reserved is None and alloc is not None and ru is not None:
        out["reserved_bytes"] = reserved = alloc + ru
    if ru is None and alloc is not None and reserved is not None:
        out["reserved_unallocated_bytes"] = max(0.0, reserved - alloc)
    if others is not None:
        # In a container NVML may list this process under its host PID: a line at least as large
        # as PyTorch's own reservation can only be this process.
        if out.get("process_bytes") is None and reserved is not None and others and max(others) >= 0.99 * reserved:
            own = max(others)
            others = list(others)
            others.remove(own)
            out["process_bytes"] = own
        out["other_process_bytes"] = float(sum(others))
        out["other_process_count"] = len(others)
    return out


def _assemble(scanner: _Scanner, events: list[OomEvent]) -> LogFacts:
    p, prm = scanner.p, scanner.prm
    memory = [e for e in events if e.kind in p.memory_kinds]

    def aux(e: OomEvent) -> bool:
        sig = p.by_id.get(e.signature)
        return bool(sig and sig.auxiliary)

    strong = [e for e in memory if not e.weak and not aux(e)]
    weak = [e for e in memory if e.weak and not aux(e)]
    primary = (strong or weak or memory or [None])[0]
    allocator = [e for e in memory if e.kind == "allocator" and not aux(e)]
    numbers_ev = next((e for e in allocator if e.capacity_bytes is not None),
                      next((e for e in allocator if e.requested_bytes is not None), None))
    if primary is not None and primary.capacity_bytes is not None:
        numbers_ev = primary

    facts = LogFacts(provided=True, lines=scanner.lineno, events=events)
    facts.has_memory_failure = bool(memory)
    facts.memory_failure_weak = bool(memory) and all(e.weak for e in memory)
    facts.kinds = list(dict.fromkeys([e.kind for e in events] + list(scanner._overflow_kinds)))
    facts.signatures = list(dict.fromkeys([e.signature for e in events] + list(scanner._overflow_sigs)))
    facts.ranks_failed = sorted({e.rank for e in memory if e.rank is not None} | scanner._overflow_ranks)
    if primary is not None:
        facts.oom_kind = primary.kind
        facts.rank = next((e.rank for e in [primary, *memory] if e.rank is not None), None)
        facts.phase = primary.phase
    if numbers_ev is not None:
        for name in ("requested_bytes", "capacity_bytes", "free_bytes", "allocated_bytes", "reserved_bytes",
                     "reserved_unallocated_bytes", "private_pool_bytes", "process_bytes", "other_process_bytes",
                     "other_process_count"):
            setattr(facts, name, vars(numbers_ev)[name])
        facts.pytorch_format = numbers_ev.format
        facts.phase = facts.phase or numbers_ev.phase
        _derive_log_numbers(facts)
    facts.phase = facts.phase or scanner.open_traceback_phase
    facts.truncated = bool(allocator) and all(e.truncated for e in allocator)
    facts.host_oom = any(e.kind == "host" for e in events)
    facts.host_oom_confirmed = any(e.kind == "host" and not e.weak for e in events)
    facts.nccl_timeout = any(e.kind == "timeout" for e in events)
    crashes = [e for e in events if e.kind == "crash"]
    primary_crashes = [e for e in crashes if not p.by_id[e.signature].secondary]
    facts.crash = bool(primary_crashes)
    first = sorted([e for e in memory if not aux(e)] + primary_crashes, key=lambda e: e.line)
    first = first or [e for e in events if e.kind == "timeout"] or [e for e in crashes]
    if first:
        limit = prm["first_error_chars"]
        text = first[0].text
        facts.first_error = text if len(text) <= limit else text[: limit - 3] + "..."
        facts.first_error_rank = first[0].rank
    facts.constraint_errors = list(scanner.constraint_ids)
    facts.snapshot_path = scanner.snapshot_path
    facts.report_series = list(scanner.series)
    facts.frames = next((e.frames for e in [primary, *first[:1]] if e is not None and e.frames), [])
    facts.entry_script = next((e.entry for e in [primary, *first[:1]] if e is not None and e.entry), None)
    facts.memory_reports = sorted(scanner.reports.values(), key=lambda r: (r.rank is None, r.rank or 0))
    facts.theoretical_bytes = dict(scanner.theoretical)
    facts.env.update(scanner.exports)
    return facts


def _derive_log_numbers(facts: LogFacts) -> None:
    """Ratios the rules reason over; each stays None unless all its inputs are known."""
    alloc, ru = facts.allocated_bytes, facts.reserved_unallocated_bytes
    if facts.process_bytes is not None and facts.capacity_bytes and facts.process_bytes > facts.capacity_bytes:
        facts.process_bytes = None  # NVML garbage (e.g. WSL reports 17179869184.00 GiB)
    if alloc is not None and ru is not None and alloc + ru > 0:
        facts.fragmentation_ratio = ru / (alloc + ru)
    reserved = facts.reserved_bytes
    if facts.process_bytes is not None and reserved is not None:
        facts.non_pytorch_bytes = max(0.0, facts.process_bytes - reserved)
    if facts.private_pool_bytes is not None and alloc:
        facts.graph_pool_ratio = facts.private_pool_bytes / alloc
