"""The scanner's events and side facts reduced to one LogFacts: the primary failure, its numbers and the
ratios the rules reason over.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...facts import LogFacts, OomEvent

if TYPE_CHECKING:
    from .scanner import _Scanner


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
    for e in events:
        if e.kind == "host":
            facts.host_figures = {**e.figures, **facts.host_figures}  # the first line to print a figure gives it
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
    # in use on the GPU but not in this process's PyTorch cache: what the message's own totals leave over, also where
    # it lists no processes (PyTorch < 2.1 prints only capacity, free and reserved)
    if facts.capacity_bytes and facts.free_bytes is not None and reserved is not None:
        facts.outside_cache_bytes = max(0.0, facts.capacity_bytes - facts.free_bytes - reserved)
    if facts.private_pool_bytes is not None and alloc:
        facts.graph_pool_ratio = facts.private_pool_bytes / alloc
