"""Turn a Diagnosis into the answer's data: the JSON agents read and the Markdown template renders.

All words come from the knowledge base, resolved to one language here, so the
template only lays them out and the JSON carries the same sentences.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .conditions import evaluate, referenced_facts
from .engine import Diagnosis
from .knowledge import Knowledge
from .textfmt import fill

# Facts printed in the "facts used" list: only the ones some evidence rests on.
_FACT_PREFIXES = ("log.", "env.", "config.", "gpu.", "question.", "estimate.", "snapshot.", "stats.", "derived.")
# (section, field): raw material other facts are read from, or lists too long to print.
_HIDDEN_FACTS = {f"{section}.{name}" for section, name in (
    ("log", "events"), ("log", "env"), ("log", "theoretical_bytes"), ("question", "text"), ("question", "layout"),
    ("question", "env"), ("question", "memory_figures"), ("config", "warnings"), ("config", "env_vars"),
    ("env", "variables"), ("snapshot", "top_sites"), ("snapshot", "segment_types"), ("snapshot", "pools"))}


def _sources(entry: Mapping[str, Any]) -> list[str]:
    out = []
    for ev in entry.get("evidence", []):
        text = ev["source"]
        if ev.get("url"):
            text += f" <{ev['url']}>"
        out.append(text)
    return out


def build(diag: Diagnosis, flat: Mapping[str, Any], kb: Knowledge, lang: str = "en",
          estimate: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The diagnosis as plain data in one language (the JSON output)."""
    flat = diag.facts or flat  # what the rules saw, violations included
    rules = kb.by_id.get("rules", {})
    causes = []
    for finding in diag.causes:
        cause = kb.get("causes", finding.id)
        causes.append({
            "id": finding.id,
            "title": cause["title"][lang],
            "confidence": round(finding.confidence, 2),
            "share_of_deficit": None if finding.share is None else round(finding.share, 3),
            "evidence_reliability": round(finding.reliability, 2),
            "evidence_source": finding.evidence_source,
            "evidence": [fill(_explain(rules, r, kb)[lang], flat) for r in finding.rules],
            "rules": finding.rules,
            "confirm": cause["confirm"][lang],
        })
    fixes = []
    for advice in diag.fixes:
        fix = kb.get("fixes", advice.id)
        sim = diag.simulations.get(advice.id)
        apply = {iface: [fill(line, flat) for line in lines] for iface, lines in fix["apply"].items()}
        if sim is not None and sim.overrides:
            from .fixlines import apply_lines

            apply = apply_lines(apply, sim.overrides)  # exactly what was simulated on this layout
        gate = next((v for v in fix.get("versions") or [] if evaluate(v["when"], flat)), None)
        if gate is not None:  # the evidence shows a version the setting does not exist in: say so, lines for it first
            apply = {**{k: list(v) for k, v in gate["apply"].items()}, **{k: v for k, v in apply.items()
                                                                        if k not in gate["apply"]}}
        fixes.append({
            "id": advice.id,
            "rank": advice.rank,
            "title": fix["title"][lang],
            "summary": fix["summary"][lang],
            "apply": apply,
            "simulation": _simulation(sim),
            "version_note": gate["note"][lang] if gate is not None else None,
            "memory_effect": fix["memory_effect"][lang],
            "throughput_cost": fix["throughput_cost"][lang],
            "constraints": [kb.get("constraints", c)["title"][lang] for c in fix.get("requires", [])
                            + fix.get("conflicts", []) if c in kb.by_id.get("constraints", {})],
            "undo": fix["undo"][lang],
            "evidence": _sources(fix),
            "measurements": fix.get("measurements", []),
            "because": advice.rules,
        })
    avoid = [{
        "id": item.id,
        "title": kb.get("fixes", item.id)["title"][lang],
        "reason": fill(item.reason[lang], flat),
        "source": item.source,
        "source_kind": item.source_kind,
    } for item in diag.avoid]
    violations = []
    for v in diag.violations:
        con = kb.get("constraints", v.id)
        violations.append({
            "id": v.id,
            "title": con["title"][lang],
            "message": fill(con["message"][lang], flat),
            "upstream_error": con.get("upstream_error"),
            "raised_at": con.get("raised_at"),
        })
    return {
        "kb_version": diag.kb_version,
        "lang": lang,
        "ledger": _ledger(diag.ledger, kb, lang),
        "assumed": _assumed(flat),
        "preset_conflicts": list(flat.get("derived.preset_conflicts") or []),
        "causes": causes,
        "fixes": fixes,
        "avoid": avoid,
        "already_applied": [_applied(f, flat, kb, lang) for f in diag.already_applied],
        "violations": violations,
        "fired_rules": diag.fired_rules,
        "estimate": dict(estimate) if estimate else None,
        "facts": used_facts(flat),
    }


def _explain(rules: Mapping[str, Any], rule_id: str, kb: Knowledge) -> Mapping[str, str]:
    """A rule's explanation; a cause the ledger alone concluded (engine._ledger_rules) says so."""
    entry = rules.get(rule_id) or {}
    return entry.get("explain") or (kb.tables.get("ledger") or {})["owned_explain"]


def _simulation(sim: Any) -> dict[str, Any] | None:
    """The predicted effect of a fix on the failing stage (None when it was not simulated)."""
    if sim is None:
        return None
    keep = ("basis", "stage", "predicted_peak_bytes", "predicted_saving_bytes", "fits", "relative_throughput",
            "changes")
    data = {k: v for k, v in sim.to_dict().items() if k in keep}
    if data.get("relative_throughput") is not None:
        data["relative_throughput"] = round(data["relative_throughput"], 4)
    return data


def _ledger(led: Any, kb: Knowledge, lang: str) -> dict[str, Any] | None:
    """The ledger as data, with each component's title and what to collect to quantify it."""
    if led is None:
        return None
    pol = kb.tables.get("ledger") or {}
    titles = {c["id"]: c["title"][lang] for c in pol.get("components") or []}
    collect = {c["needs"]: c["text"][lang] for c in pol.get("collect") or []}
    data = led.to_dict()
    for entry in data["entries"]:
        entry["title"] = titles.get(entry["id"], entry["id"])
    data["collect"] = [collect[n] for n in data.pop("missing") if n in collect]
    return data


def _assumed(flat: Mapping[str, Any]) -> list[str]:
    """What the tool assumed because the user did not say (listed in the answer): recipe defaults by field, and
    the preset whose shape stands in for a model the presets lack."""
    shape = flat.get("config.approximate_shape")
    return [*([f"model shape ~ {shape}"] if shape else []), *(flat.get("config.assumed") or [])]


def _applied(fix_id: str, flat: Mapping[str, Any], kb: Knowledge, lang: str) -> dict[str, Any]:
    """An already-applied fix; ``assumed`` when that rests on a recipe default rather than the user's config."""
    fix = kb.get("fixes", fix_id)
    assumed = {f"config.{name}" for name in flat.get("config.assumed") or []}
    refs = set(referenced_facts(fix["already_applied_when"]))
    return {"id": fix_id, "title": fix["title"][lang], "assumed": bool(refs & assumed)}


def used_facts(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Known (non-empty) facts, for the evidence trail; long or internal values are left out."""
    return {
        k: v for k, v in sorted(flat.items())
        if k.startswith(_FACT_PREFIXES) and k not in _HIDDEN_FACTS and v not in (None, [], {}, "", False)
        and not (k.endswith(".provided"))
    }
