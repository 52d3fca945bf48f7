"""``memtune estimate`` as text or Markdown: the per-stage table, the overheads beside the peak, a bar per
stage against the GPU's usable capacity (text only: a terminal's picture), and the assumptions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..knowledge import Knowledge
from .grid import BAR_WIDTH, bar

GIB = 2**30


def bars(result: Mapping[str, Any]) -> list[str]:
    """One bar per stage (peak with overheads), scaled so the GPU's usable capacity, marked |, sits inside."""
    cap = (result.get("gpu") or {}).get("capacity_bytes")
    top = max([s["peak_with_overheads_bytes"] for s in result["stages"]] + [cap or 0]) or 1.0
    mark = round(cap / top * BAR_WIDTH) if cap else None
    out = []
    for s in result["stages"]:
        drawn = bar(s["peak_with_overheads_bytes"], top, BAR_WIDTH).ljust(BAR_WIDTH)
        if mark is not None:
            drawn = drawn[:mark] + "|" + drawn[mark + 1:] if mark < BAR_WIDTH else drawn + "|"
        out.append(f"  PP {s['pp_rank']:<3} {drawn} {s['peak_with_overheads_bytes'] / GIB:.1f}")
    return out


def render(result: Mapping[str, Any], kb: Knowledge, lang: str, *, markdown: bool) -> str:
    """The per-stage table (GiB), the overheads beside the allocated peak, and the assumptions."""
    from ..estimator.constants import text
    from .labels import prefixed

    t = prefixed(kb, lang, "estimate-").__getitem__

    lines: list[str] = []
    bridge = result.get("bridge")
    heading = t("title-bridge") if result["mode"] == "bridge" else t("title")
    lines.append(f"## {heading} ({t('unit')})" if markdown else f"{heading} ({t('unit')})")
    lines.append("")
    if result["mode"] == "bridge" and bridge:
        for key, label in (("weight_and_optimizer_bytes", "bridge-weight-optimizer"),
                           ("activation_bytes", "bridge-activation"), ("total_bytes", "bridge-total")):
            lines.append(f"{'- ' if markdown else '  '}{t(label)}: {bridge[key] / GIB:.2f}")
    else:
        lines += _table(result, t("columns"), markdown)
        lines.append("")
        peak = result["breakdown"]
        lines.append(f"{t('peak')} {result['peak_stage']}: {result['peak_bytes'] / GIB:.2f} ({t('other-parts')})")
        pooled = peak.get("graph_pool_activations_bytes") or 0.0
        lines.append(f"{t('beside')}: {t('slack')} {peak['allocator_slack_bytes'] / GIB:.2f}, "
                     + (f"{t('graph-pool')} {pooled / GIB:.2f}, " if pooled else "")
                     + f"{t('context')} {peak['cuda_context_bytes'] / GIB:.2f}, "
                     f"{t('nccl')} {peak['nccl_bytes'] / GIB:.2f}"
                     f" -> {t('with-overheads')} {peak['peak_with_overheads_bytes'] / GIB:.2f}")
        ratio = result["summary"].get("capacity_ratio")
        if ratio is not None and result.get("gpu"):
            lines.append(f"{result['gpu']['name']}: {ratio * 100:.1f} % {t('capacity')}")
        if not markdown:
            lines += ["", *bars(result)]
    lines.append("")
    lines.append(f"### {t('assumptions')}" if markdown else f"{t('assumptions')}:")
    for ident in result.get("assumption_ids", []):
        lines.append(f"- {text(kb, ident, lang)}")
    for warning in result.get("warnings", []):
        lines.append(f"- {warning}")
    for s in result.get("sensitivity") or []:  # what the peak rests on that the run did not state
        state = {True: t("on"), False: t("off"), None: t("unstated")}
        lines.append("- " + t("sensitivity").format(setting=s["setting"], assumed=state[s["assumed"]],
                                                     other=state[s["other"]], delta=s["delta_bytes"] / GIB,
                                                     peak=s["peak_bytes"] / GIB))
    return "\n".join(lines) + "\n"


def _table(result: Mapping[str, Any], columns: str, markdown: bool) -> list[str]:
    heads = [c.strip() for c in columns.split("|")]
    rows = []
    for s in result["stages"]:
        rows.append([str(s["pp_rank"]), str(s["layers"]), "/".join(str(n) for n in s["in_flight_microbatches"]),
                     *(f"{s[k] / GIB:.2f}" for k in ("weights_bytes", "grads_bytes", "optimizer_bytes",
                                                      "activations_bytes", "logits_bytes")),
                     # other_bytes holds the logits too: the column shows the rest, so a row adds up
                     f"{(s['workspace_bytes'] + s['graph_pool_bytes']) / GIB:.2f}",
                     *(f"{s[k] / GIB:.2f}" for k in ("allocated_peak_bytes", "peak_with_overheads_bytes"))])
    if markdown:
        out = ["| " + " | ".join(heads) + " |", "|" + "---|" * 3 + "---:|" * (len(heads) - 3)]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        return out
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]
    out = ["  ".join(h.rjust(w) for h, w in zip(heads, widths, strict=True))]
    out += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return out
