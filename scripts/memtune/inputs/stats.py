"""Read allocator statistics: a ``torch.cuda.memory_stats()`` JSON dump and Megatron/Bridge memory log lines.

Both reduce to the same ``stats.<key>`` facts so a rule need not care which one the
user had.  Units as printed upstream (research/megatron-bridge.md §1, §2.7, and the
``report_memory`` functions of Megatron-LM ``megatron/training/utils.py`` and Bridge
``training/utils/train_utils.py``):

* Megatron-LM ``[Rank N] (after K iterations) memory (MB) | allocated: … | max reserved: …``
  divides bytes by 1024*1024 (MiB).
* Bridge ``[Rank N] (after K iterations) memory (GB) | mem-allocated-gigabytes: … |
  mem-alloc-retires: …`` divides by 1e9 and renames ``-bytes`` keys to ``-gigabytes``.
* ``Theoretical memory footprints: weight and optimizer=X MB, activation=Y MB, total=Z MB``
  uses MiB (Bridge may also print GiB with ``GB``).

Per-rank comparison is reported as ratios only; what counts as "much higher" is
for the rules in knowledge/rules.yaml to decide.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import UserError

MIB = 1024 * 1024
UNIT_BYTES = {"B": 1, "KB": 1024, "MB": MIB, "GB": 1024**3}  # memory-report / footprint units (binary)

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

# log field -> per-rank key.  Megatron-LM names first, then Bridge's mem-* names (after unit suffix removal).
_LOG_FIELDS = {
    "allocated": "allocated_current_bytes",
    "max allocated": "allocated_peak_bytes",
    "reserved": "reserved_current_bytes",
    "max reserved": "reserved_peak_bytes",
    "device usage": "device_used_bytes",
    "mem-allocated": "allocated_current_bytes",
    "mem-active": "active_current_bytes",
    "mem-inactive": "inactive_split_current_bytes",
    "mem-reserved": "reserved_current_bytes",
    "mem-max-allocated": "allocated_peak_bytes",
    "mem-max-active": "active_peak_bytes",
    "mem-max-inactive": "inactive_split_peak_bytes",
    "mem-max-reserved": "reserved_peak_bytes",
    "mem-alloc-retires": "num_alloc_retries",  # sic: Bridge's spelling
    "mem-alloc-retries": "num_alloc_retries",
    "mem-allocated-count": "allocation_count",
}

_REPORT = re.compile(r"(?:\[Rank (?P<rank>\d+)\]\s*)?\(?after (?P<iter>\d+) iterations\)? memory \((?P<unit>[KMG]?B)\)"
                     r"(?P<fields>(?:\s*\|\s*[^|:]+:\s*[^|]+)+)")
_FIELD = re.compile(r"\|\s*([^|:]+?)\s*:\s*([-+0-9.eE]+)")
_THEORY = re.compile(r"Theoretical memory footprints:\s*(?P<body>.+)")
_COMPONENT = re.compile(r"([A-Za-z][A-Za-z ]*?)\s*=\s*([0-9.]+)\s*([KMG]?B)\b")


# --------------------------------------------------------------------------- memory_stats() JSON


def read_memory_stats(path: str | Path) -> dict[str, Any]:
    """Summary of a ``torch.cuda.memory_stats()`` dump (flat dotted keys or the nested form)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file (expected memory_stats() JSON)") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
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
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise UserError(f"{source}: {name}: expected a number, found {value!r}")
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


# --------------------------------------------------------------------------- log lines


def read_memory_log_lines(lines: Iterable[str], failing_rank: int | None = None) -> dict[str, Any]:
    """Per-rank memory reports and theoretical footprints found in log lines (streamed once).

    The latest report of each rank wins (Bridge reports through the second iteration
    after a (re)start; peaks only grow).  Lines without a ``[Rank N]`` prefix count as
    rank None.  ``failing_rank`` (from the OOM message) adds its ratio against peers.
    """
    ranks: dict[int | None, dict[str, Any]] = {}
    theory: dict[str, Any] = {}
    for lineno, line in enumerate(lines, 1):
        if "memory (" in line and "iterations" in line:
            report = _parse_report(line, lineno)
            if report is not None:
                prev = ranks.get(report["rank"])
                if prev is None or report["iteration"] >= prev["iteration"]:
                    ranks[report["rank"]] = report
        elif "Theoretical memory footprints" in line:
            m = _THEORY.search(line)
            if m:
                theory = _parse_theory(m.group("body"), lineno)
    if not ranks and not theory:
        return {}
    out: dict[str, Any] = {"provided": True, "source": "log"}
    out.update(theory)
    if ranks:
        out.update(_compare_ranks(ranks, failing_rank))
    return finish(out)


def _parse_report(line: str, lineno: int) -> dict[str, Any] | None:
    m = _REPORT.search(line)
    if not m:
        return None
    unit = m.group("unit")
    scale = 1e9 if unit == "GB" else UNIT_BYTES[unit]  # Bridge's memory (GB) report is decimal (/1e9)
    report: dict[str, Any] = {
        "rank": int(m.group("rank")) if m.group("rank") else None,
        "iteration": int(m.group("iter")),
        "line": lineno,
    }
    for name, raw in _FIELD.findall(m.group("fields")):
        name = name.strip()
        key_scale = scale
        for suffix, factor in (("-gigabytes", 1e9), ("-bytes", 1)):
            if name.endswith(suffix):
                name, key_scale = name[: -len(suffix)], factor
        target = _LOG_FIELDS.get(name)
        if target is None:
            continue
        try:
            value = float(raw)
        except ValueError:
            continue
        if not math.isfinite(value):
            continue
        is_bytes = target.endswith("_bytes")
        report[target] = round(value * key_scale) if is_bytes else int(value)
    return report


def _parse_theory(body: str, lineno: int) -> dict[str, Any]:
    components = {}
    for name, val, unit in _COMPONENT.findall(body):
        try:
            value = float(val)
        except ValueError:
            continue
        if math.isfinite(value):
            components[name.strip()] = value * UNIT_BYTES[unit]
    out: dict[str, Any] = {"theoretical_line": lineno, "theoretical_components": components}
    if "weight and optimizer" in components:
        out["theoretical_weight_and_optimizer_bytes"] = components["weight and optimizer"]
    else:  # Bridge's structured format names dense and routed-expert parts separately
        parts = [v for k, v in components.items() if k.endswith("parameters and optimizer")]
        if parts:
            out["theoretical_weight_and_optimizer_bytes"] = sum(parts)
    if "activation" in components:
        out["theoretical_activation_bytes"] = components["activation"]
    if "total" in components:
        out["theoretical_total_bytes"] = components["total"]
    return out


def _ratio_to_peers(ranks: dict[Any, dict[str, Any]], rank: Any, key: str) -> float | None:
    value = ranks[rank].get(key)
    peers = [r[key] for k, r in ranks.items() if k != rank and r.get(key)]
    if value is None or not peers:
        return None
    return value / statistics.median(peers)


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
        "ranks": {("?" if k is None else str(k)): v for k, v in sorted(ranks.items(), key=lambda kv: str(kv[0]))},
        "peak_rank": peak_rank,
        "peak_on_lowest_rank": bool(numbered) and peak_rank == numbered[0] and len(numbered) > 1,
        "peak_rank_ratio": _ratio_to_peers(ranks, peak_rank, "reserved_peak_bytes"),
        "peak_rank_allocated_ratio": _ratio_to_peers(ranks, peak_rank, "allocated_peak_bytes"),
    }
    for key in ("reserved_peak_bytes", "allocated_peak_bytes", "reserved_current_bytes", "allocated_current_bytes",
                "active_peak_bytes", "inactive_split_current_bytes", "inactive_split_peak_bytes", "device_used_bytes"):
        if peak.get(key) is not None:
            out[key] = peak[key]
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
