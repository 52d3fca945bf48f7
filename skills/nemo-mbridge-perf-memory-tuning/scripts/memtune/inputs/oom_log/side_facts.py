"""What a log says besides failures: each rank's memory reports (and allocated memory over iterations),
the theoretical footprint, exported variables, phase markers, rank hints and constraint errors.

``SideFactsMixin`` holds the scanner's methods for them; the state they use is set up in
``_Scanner.__init__`` (scanner.py).
"""

from __future__ import annotations

import re

from ...facts import MemoryReport, OomEvent
from .pairs import report_pairs
from .signatures import Signature
from .triggers import _Plan

_UNSET = object()


class SideFactsMixin:
    """The ``_Scanner`` methods that keep reports, footprints, variables and hints."""

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

    def _progress(self, plan: _Plan, text: str) -> None:
        """Checkpoint progress lines open and close a phase; read before the line's own failure, which a line that
        opens a phase belongs to (FSDP's "Failed to clone() tensor ... Error: CUDA out of memory" is the save)."""
        for rule in plan.phases:
            if rule.log_end is not None and rule.log_end.search(text):
                if self.log_phase == rule.id:
                    self.log_phase = None
            elif rule.log_start.search(text):
                self.log_phase = rule.id

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
