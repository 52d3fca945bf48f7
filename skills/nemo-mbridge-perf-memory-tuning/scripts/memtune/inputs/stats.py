"""Allocator statistics as ``stats.<key>`` facts, from a ``torch.cuda.memory_stats()`` dump or the log.

Both reduce to the same keys so a rule need not care which one the user had.  The log
side is not read here: ``inputs/oom_log.parse_log`` already keeps each rank's latest
memory report and the theoretical footprint line (recognised by knowledge/signatures.yaml,
converted to bytes there), and ``summarize_reports`` only compares them.

Per-rank comparison is reported as ratios only; what counts as "much higher" is
for the rules in knowledge/rules.yaml to decide.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..facts import MemoryReport
from . import limits
from .jsontext import parse_json

# memory_stats() key -> stats fact name
_STATS_KEYS = {
    "reserved_bytes.all.peak": "reserved_peak_bytes",
    "reserved_bytes.all.current": "reserved_current_bytes",
    "allocated_bytes.all.peak": "allocated_peak_bytes",
    "allocated_bytes.all.current": "allocated_current_bytes",
    "active_bytes.all.peak": "active_peak_bytes",
    "active_bytes.all.current": "active_current_bytes",
    "inactive_split_bytes.all.current": "inactive_split_current_bytes",
    "inactive_split_bytes.all.peak": "inactive_split_peak_bytes",
    "requested_bytes.all.peak": "requested_peak_bytes",
    "reserved_bytes.large_pool.current": "reserved_large_current_bytes",
    "reserved_bytes.small_pool.current": "reserved_small_current_bytes",
    "oversize_allocations.current": "oversize_allocations_current",
    "num_alloc_retries": "num_alloc_retries",
    "num_ooms": "num_ooms",
    "num_sync_all_streams": "num_sync_all_streams",
    "num_device_alloc": "num_device_alloc",
    "num_device_free": "num_device_free",
    "max_split_size": "max_split_size",
}

# MemoryReport field -> stats fact name (the same numbers memory_stats() gives under _STATS_KEYS)
_REPORT_KEYS = {
    "max_reserved_bytes": "reserved_peak_bytes",
    "max_allocated_bytes": "allocated_peak_bytes",
    "reserved_bytes": "reserved_current_bytes",
    "allocated_bytes": "allocated_current_bytes",
    "max_active_bytes": "active_peak_bytes",
    "active_bytes": "active_current_bytes",
    "inactive_bytes": "inactive_split_current_bytes",
    "max_inactive_bytes": "inactive_split_peak_bytes",
    "device_used_bytes": "device_used_bytes",
}

# LogFacts.theoretical_bytes key (signatures.yaml theoretical-memory-footprint fields) -> stats fact name
_THEORY_KEYS = {
    "weight_and_optimizer": "theoretical_weight_and_optimizer_bytes",
    "activation": "theoretical_activation_bytes",
    "total": "theoretical_total_bytes",
}


# --------------------------------------------------------------------------- memory_stats() JSON


def read_memory_stats(path: str | Path) -> dict[str, Any]:
    """Summary of a ``torch.cuda.memory_stats()`` dump (flat dotted keys or the nested form)."""
    path = Path(path)
    text = limits.read_text(path, "memory_stats() JSON", errors="strict")
    data = parse_json(text, path)
    return summarize_memory_stats(data, str(path))


def summarize_memory_stats(data: Any, source: str = "<memory_stats>") -> dict[str, Any]:
    """Pure: memory_stats mapping -> stats facts."""
    if not isinstance(data, dict):
        raise UserError(f"{source}: expected a JSON object of memory_stats() keys, found {type(data).__name__}")
    flat = _flatten(data)
    known = {name: flat[key] for key, name in _STATS_KEYS.items() if key in flat}
    if not known:
        raise UserError(f"{source}: no torch.cuda.memory_stats() keys found (e.g. 'reserved_bytes.all.peak')")
    for name, value in known.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 2**63:
            shown = type(value).__name__ if isinstance(value, (dict, list)) else repr(value)[:60]
            raise UserError(f"{source}: {name}: expected a byte count or counter (0 to 2**63), found {shown}")
    out: dict[str, Any] = {"provided": True, "source": "memory_stats", "file": Path(source).name, **known}
    out.update(_derived(out))
    return out


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def _derived(s: dict[str, Any]) -> dict[str, Any]:
    """Ratios over whichever numbers are present (None when a side is missing)."""
    res_peak, alloc_peak = s.get("reserved_peak_bytes"), s.get("allocated_peak_bytes")
    res_cur, inactive = s.get("reserved_current_bytes"), s.get("inactive_split_current_bytes")
    return {
        # share of the reserved peak that was never allocated at the allocated peak
        "fragmentation_ratio": 1 - alloc_peak / res_peak if res_peak and alloc_peak is not None else None,
        # non-releasable (split, free) bytes against reserved: what empty_cache() cannot return
        "inactive_split_ratio": inactive / res_cur if res_cur and inactive is not None else None,
    }


# --------------------------------------------------------------------------- log memory reports


def summarize_reports(reports: Iterable[MemoryReport], theoretical: Mapping[str, float] | None = None,
                      failing_rank: int | None = None) -> dict[str, Any]:
    """Pure: LogFacts.memory_reports / theoretical_bytes -> stats facts ({} when the log had neither).

    ``failing_rank`` (the rank of the OOM message) adds its ratio against its peers.
    """
    by_rank = {r.rank: _report_stats(r) for r in reports}
    out: dict[str, Any] = {}
    for key, name in _THEORY_KEYS.items():
        if theoretical and theoretical.get(key) is not None:
            out[name] = theoretical[key]
    if by_rank:
        out.update(_compare_ranks(by_rank, failing_rank))
    if not out:
        return {}
    return finish({"provided": True, "source": "log", **out})


def _report_stats(report: MemoryReport) -> dict[str, Any]:
    stats = {name: vars(report)[key] for key, name in _REPORT_KEYS.items() if vars(report)[key] is not None}
    if report.alloc_retries is not None:
        stats["num_alloc_retries"] = report.alloc_retries
    return stats


def _ratio_to_peers(ranks: dict[Any, dict[str, Any]], rank: Any, key: str) -> float | None:
    value = ranks[rank].get(key)
    peers = [r[key] for k, r in ranks.items() if k != rank and r.get(key)]
    if value is None or not peers:
        return None
    # their median, as statistics.median computes it (importing statistics costs ~2 ms of every log's start-up)
    peers.sort()
    mid = len(peers) // 2
    return value / (peers[mid] if len(peers) % 2 else (peers[mid - 1] + peers[mid]) / 2)


def _compare_ranks(ranks: dict[Any, dict[str, Any]], failing_rank: int | None) -> dict[str, Any]:
    """Run-wide maxima plus where the peak sits relative to the other ranks."""
    def peak_of(r: dict[str, Any]) -> float:
        return r.get("reserved_peak_bytes") or r.get("allocated_peak_bytes") or 0

    peak_rank = max(ranks, key=lambda k: (peak_of(ranks[k]), -(k if k is not None else -1)))
    peak = ranks[peak_rank]
    numbered = sorted(k for k in ranks if k is not None)
    out: dict[str, Any] = {
        "rank_count": len(ranks),
        "ranks_reported": numbered,
        "peak_rank": peak_rank,
        "peak_on_lowest_rank": bool(numbered) and peak_rank == numbered[0] and len(numbered) > 1,
        "peak_rank_ratio": _ratio_to_peers(ranks, peak_rank, "reserved_peak_bytes"),
        "peak_rank_allocated_ratio": _ratio_to_peers(ranks, peak_rank, "allocated_peak_bytes"),
    }
    for name in _REPORT_KEYS.values():
        if peak.get(name) is not None:
            out[name] = peak[name]
    retries = [r["num_alloc_retries"] for r in ranks.values() if r.get("num_alloc_retries") is not None]
    if retries:
        out["num_alloc_retries"] = max(retries)
    if failing_rank is not None and failing_rank in ranks:
        out["failing_rank"] = failing_rank
        out["failing_rank_ratio"] = _ratio_to_peers(ranks, failing_rank, "reserved_peak_bytes")
        out["failing_rank_allocated_ratio"] = _ratio_to_peers(ranks, failing_rank, "allocated_peak_bytes")
    out.update(_derived(out))
    return out


def finish(summary: dict[str, Any]) -> dict[str, Any]:
    """Add the observed-vs-theoretical ratio once both a report and a footprint line are known."""
    theory, observed = summary.get("theoretical_total_bytes"), summary.get("allocated_peak_bytes")
    if theory is None:
        theory = summary.get("theoretical_weight_and_optimizer_bytes")
    if theory and observed:
        summary["observed_vs_theoretical_ratio"] = observed / theory
    return summary


def merge(*summaries: dict[str, Any]) -> dict[str, Any]:
    """One stats summary from several sources; the first that states a key wins."""
    out: dict[str, Any] = {}
    sources = []
    for summary in summaries:
        if not summary:
            continue
        sources.append(summary.get("source"))
        for key, value in summary.items():
            if out.get(key) is None and value is not None:
                out[key] = value
    if sources:
        out["source"] = "+".join(s for s in sources if s)
    return finish(out) if out else out
