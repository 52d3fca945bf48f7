"""From a matched signature to an OomEvent: the allocator message joined from wrapped lines, its numbers,
the rank it belongs to and the de-duplication of repeats.

``EventsMixin`` holds the scanner's event methods; the state they use is set up in ``_Scanner.__init__``
(scanner.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ...facts import OomEvent
from ..units import OutOfRange, parse_size
from .signatures import SIZE_GROUPS, TEXT_GROUPS, Signature


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


class EventsMixin:
    """The ``_Scanner`` methods that build, join and keep events."""

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
                # NVML may list one process twice (the same PID on two lines): each PID counts once
                by_pid: dict[str, float] = {}
                for o in self.p.proc_other.finditer(value):
                    size = parse_size(o.group("size"))
                    by_pid[o.group("pid")] = max(size, by_pid.get(o.group("pid"), size))
                others = list(by_pid.values())
                own = self.p.proc_self.search(value)
                if own and "process_bytes" not in out:
                    out["process_bytes"] = parse_size(own.group("size"))
            elif name in TEXT_GROUPS:
                out.setdefault("figures", {})[name] = value.strip()
            elif name == "rank":
                msg_rank = int(value)
            elif name == "snapshot" and self.snapshot_path is None:
                self.snapshot_path = value
        for name, regex in sig.fields:
            found = regex.search(text)
            if found and f"{name}_bytes" not in out:
                out[f"{name}_bytes"] = parse_size(found.group(1))
        return _derive_event_numbers(out, others), msg_rank

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


def _derive_event_numbers(out: dict[str, Any], others: list[float] | None) -> dict[str, Any]:
    """Fill reserved / reserved-unallocated from each other and place the NVML process lines."""
    alloc, ru, reserved = out.get("allocated_bytes"), out.get("reserved_unallocated_bytes"), out.get("reserved_bytes")
    if reserved is None and alloc is not None and ru is not None:
        out["reserved_bytes"] = reserved = alloc + ru
    if ru is None and alloc is not None and reserved is not None:
        out["reserved_unallocated_bytes"] = max(0.0, reserved - alloc)
    if others is not None:
        # In a container NVML may list this process under its host PID: a line at least as large
        # as PyTorch's own reservation can only be this process - the smallest such line, as this process holds
        # its reservation plus its CUDA context, and a larger line is another process's (ZeroSearch#11: a 30.51 GiB
        # server beside this process's 1022 MiB with 600 MiB reserved)
        fits = [size for size in others or () if reserved is not None and size >= 0.99 * reserved]
        if out.get("process_bytes") is None and fits:
            own = min(fits)
            others = list(others)
            others.remove(own)
            out["process_bytes"] = own
        out["other_process_bytes"] = float(sum(others))
        out["other_process_count"] = len(others)
    return out
