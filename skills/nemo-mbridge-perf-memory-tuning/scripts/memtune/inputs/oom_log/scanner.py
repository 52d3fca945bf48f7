"""The line-at-a-time state machine the driver feeds: prefix stripping, traceback and allocator-block state,
and which signatures a line can match.

What it does with a match lives in events.py, side_facts.py and frames.py (its mixins); what it saw becomes
LogFacts in assemble.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ...facts import LogFacts, MemoryReport, OomEvent
from .assemble import _assemble
from .events import EventsMixin, _Block
from .frames import FramesMixin, _Traceback
from .side_facts import _UNSET, SideFactsMixin
from .signatures import Patterns
from .triggers import (
    _NUMBER_CHARS,
    _NUMBER_RUNS,
    _PLANS_KEPT,
    _SHAPE_MAX_CHARS,
    _SHAPES_KEPT,
    _longer_triggers,
    _Plan,
    _plan,
    _shortest_triggers,
)

# An exception line that names memory exhaustion (its own text did not match an allocator signature): not a crash.
_MEMORY_WORDS = re.compile(r"OutOfMemory|out of memory|\bOOM\b", re.I)


class _Scanner(EventsMixin, SideFactsMixin, FramesMixin):
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
                if p.frame and tb.expect_code:  # a frame line: where the code that ran lives
                    self._frame_signatures(text, rank)
                return
        present = self._present(text)
        plan = self._plan_for(present) if present else None
        if tb is None and plan is not None and plan.reports_only:
            self._reports(plan, text, rank)  # what _match_line and _side_facts would do, alone
            return
        if plan is not None and plan.phases:
            self._progress(plan, text)
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

    def _frame_signatures(self, text: str, rank: int | None) -> None:
        """Signatures of the code a traceback ran through ('torch/nn/parallel/_functions.py': DataParallel)."""
        for sig in self.p.frame:
            m = sig.regex.search(text) if sig.regex else None
            if m and not any(e.signature == sig.id and e.rank == rank for e in self.events):
                self._add(self._event(sig, m, text.strip(), rank, self.lineno, self._phase_for(rank)))

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
