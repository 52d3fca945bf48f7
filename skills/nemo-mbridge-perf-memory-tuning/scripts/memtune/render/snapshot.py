"""``memtune snapshot`` as text: the allocator's books per segment type and pool, fragmentation, the failed
request, the timeline's peaks and the top allocation sites.  Sentences from knowledge/ui.yaml (``snapshot-*``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..knowledge import Knowledge
from ..textfmt import human
from .grid import table
from .labels import labels

COLUMNS = ("reserved_bytes", "allocated_bytes", "active_bytes", "inactive_split_bytes", "releasable_bytes")


def _gib(value: Any) -> str:
    """GiB for large numbers, MiB below 1 GiB, so small snapshots do not read as zeros."""
    if value is None:
        return "?"
    return human(value, "gib" if abs(value) >= 2**30 else "mib")


def render_text(s: Mapping[str, Any], kb: Knowledge, lang: str = "en") -> str:
    t = labels(kb, lang)
    out = [t["snapshot-head"].format(file=s["file"], layout=s["layout"], device=s["device"],
                                     devices=", ".join(map(str, s["devices"])) or "-",
                                     segments=s["segments"]), ""]
    heads = [h.strip() for h in t["snapshot-columns"].split("|")]
    rows = [(t["snapshot-row-all"], {c: s[c] for c in COLUMNS})]
    rows += [(t["snapshot-row-segments"].format(name=name), v) for name, v in s["segment_types"].items()]
    rows += [(t["snapshot-row-default-pool"] if name == "default"
              else t["snapshot-row-graph-pools"].format(count=s["graph_pool_count"]), v)
             for name, v in s["pools"].items()]
    out += table([["", *heads], *([label, *(_gib(vals.get(c)) for c in COLUMNS)] for label, vals in rows)])
    out.append("")
    out.append(t["snapshot-fragmentation"].format(ratio=human(s["fragmentation_ratio"], "pct"),
                                                  inactive=human(s["inactive_split_ratio"], "pct")))
    out.append(t["snapshot-largest-free"].format(size=human(s["largest_free_block_bytes"], "mib"),
                                                 blocks=s["free_blocks"], pending=_gib(s["pending_free_bytes"])))
    out.append(t["snapshot-graph-pools"].format(size=_gib(s["graph_pool_bytes"]),
                                                share=human(s["graph_pool_share"], "pct")))
    out.append(t["snapshot-allocator"].format(expandable=human(s["expandable_segments"], None),
                                              conf=repr(s["alloc_conf"])))
    if s.get("oom"):
        out.append(t["snapshot-oom"].format(requested=human(s["oom_requested_bytes"], "mib"),
                                            free=human(s.get("oom_device_free_bytes"), "mib"),
                                            largest=human(s["largest_free_for_request_bytes"], "mib"),
                                            kind=s["oom_kind"]))
    if "trace_events" in s:
        out.append(t["snapshot-timeline"].format(events=s["trace_events"], allocated=_gib(s["timeline_peak_bytes"]),
                                                 reserved=_gib(s["timeline_reserved_peak_bytes"])))
    else:
        out.append(t["snapshot-no-timeline"])
    if s["top_sites"]:
        out.append("\n" + t["snapshot-top-sites"].format(share=human(s["sited_share"], "pct")))
        for site in s["top_sites"]:
            out.append(f"  {_gib(site['bytes']):>12}  {site['blocks']:>6} {t['snapshot-blocks']}  {site['site']}")
    elif not s["stacks_recorded"]:
        out.append("\n" + t["snapshot-no-stacks"])
    return "\n".join(out) + "\n"
