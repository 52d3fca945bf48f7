"""Turn a Diagnosis into the answer's data: the JSON agents read and the Markdown template renders.

All words come from the knowledge base, resolved to one language here, so the
template only lays them out and the JSON carries the same sentences.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .conditions import evaluate, referenced_facts
from .engine import Diagnosis, RuledOut, join_reasons
from .knowledge import Knowledge
from .names import known_names
from .textfmt import code_span, fill

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
            "evidence": [_evidence(r, rules, kb, cause, diag, flat, lang) for r in finding.rules],
            "rules": finding.rules,
            "confirm": cause["confirm"][lang],
            "check": ((cause.get("situation") or {}).get("check") or {}).get(lang),
        })
    fixes = []
    for advice in diag.fixes:
        fix = kb.get("fixes", advice.id)
        sim = diag.simulations.get(advice.id)
        apply = {iface: [fill(line, flat) for line in lines] for iface, lines in fix["apply"].items()}
        if sim is not None and sim.overrides:
            from .fixlines import apply_lines

            apply = apply_lines(apply, sim.overrides)  # exactly what was simulated on this layout
        own = _framework_lines(fix, flat, _pass(advice, diag, rules))
        if own:  # the framework's own key for this setting leads (situation.framework / situation.phase)
            apply = {"framework": own, **apply}
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
        "reason": fill(item.reason[lang], flat, quote=True),
        "source": item.source,
        "source_kind": item.source_kind,
    } for item in diag.avoid]
    violations = []
    for v in diag.violations:
        con = kb.get("constraints", v.id)
        violations.append({
            "id": v.id,
            "title": con["title"][lang],
            "message": fill(con["message"][lang], flat, quote=True),
            "upstream_error": con.get("upstream_error"),
            "raised_at": con.get("raised_at"),
        })
    return {
        "kb_version": diag.kb_version,
        "lang": lang,
        "situation": situation_report(diag, kb, lang),
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
    """A rule's explanation; a cause the ledger or the situation alone concluded (engine._ledger_rules,
    engine._situation_rules) says so."""
    entry = rules.get(rule_id) or {}
    if entry.get("explain"):
        return entry["explain"]
    if rule_id.startswith("situation-"):
        return (kb.tables.get("ledger") or {})["situation_explain"]
    if rule_id == "thin-evidence":
        return (kb.tables.get("ledger") or {})["thin_explain"]
    return (kb.tables.get("ledger") or {})["owned_explain"]


def _pass(advice: Any, diag: Diagnosis, rules: Mapping[str, Any]) -> str | None:
    """The pass a rule that gave this fix says its evidence is about (rules.yaml ``pass``), where the situation names
    no phase: the log-prob micro-batch a stated log-prob batch overfills, not the training one."""
    if diag.facts.get("situation.phase"):
        return None
    gave = [rules.get(r) or {} for c in diag.causes for r in c.rules]
    return next((r["pass"] for r in gave if r.get("pass") and advice.id in (r.get("fixes") or ())), None)


def _framework_lines(fix: Mapping[str, Any], flat: Mapping[str, Any], about: str | None = None) -> list[str]:
    """The lines of the first fixes.yaml ``frameworks`` entry for the framework and phase the situation names (or the
    pass the fix's rule is ``about``); with no framework named, the entry of the trainer the run uses ("deepspeed":
    its ds_config key)."""
    phase = flat.get("situation.phase") or about
    for name in (flat.get("situation.framework"), flat.get("situation.trainer")):
        for entry in fix.get("frameworks") or []:
            if name and entry["framework"] == name and (not entry.get("phases") or phase in entry["phases"]):
                return list(entry["lines"])
    return []


def _evidence(rule_id: str, rules: Mapping[str, Any], kb: Knowledge, cause: Mapping[str, Any], diag: Diagnosis,
              flat: Mapping[str, Any], lang: str) -> str:
    """One rule's evidence sentence; a cause the situation alone supports quotes the clues it rests on."""
    text = fill(_explain(rules, rule_id, kb)[lang], flat, quote=True)
    if not rule_id.startswith("situation-") or diag.situation is None:
        return text
    cond = (cause.get("situation") or {}).get("supports") or {}
    names = {f.removeprefix("situation.").removesuffix("_bytes").removesuffix("_share")
             for f in referenced_facts(cond) if f.startswith("situation.")}
    readings = diag.situation.readings()
    clues = [c.text for name in ("failed", "phase", "step", "where", "trend", "process") if name in names
             and readings[name] is not None and flat.get(f"situation.{name}") is not None
             for c in readings[name].clues[:1]]
    sit = diag.situation
    if "waste" in names and sit.waste_bytes is not None:
        share = f", {sit.waste_share:.0%}" if sit.waste_share is not None else ""
        clues.append(f"{sit.waste_bytes / 2**30:.1f} GiB reserved, not allocated{share}")
    return f"{text} ({'; '.join(clues)})" if clues else text


def situation_report(diag: Diagnosis, kb: Knowledge, lang: str) -> dict[str, Any] | None:
    """What was read, field by field with its clues, one line that says it, what it rules out, and - when the
    evidence is thin - the causes that remain with the one check that tells each apart."""
    from .situation import STATED_FIELDS  # field -> the situation.yaml list naming its values

    sit = diag.situation
    if sit is None:
        return None
    lists = {"failed": "kinds", **STATED_FIELDS}  # a failed request's kinds are request_shapes'
    table = kb.tables.get("situation") or {}
    say = {key: text[lang] for key, text in (table.get("wording") or {}).items()}

    def title(key: str, value: str) -> str:
        rows = (table.get("request_shapes") or {}).get("kinds") if key == "kinds" else table.get(key)
        row = next((r for r in rows or [] if r["id"] == value), None)
        return (row or {}).get("title", {}).get(lang, value)

    fields: dict[str, Any] = {}
    for name, reading in sit.readings().items():
        if reading is not None:
            shown = title(lists[name], reading.value)
            if reading.source == "asked":  # "is it a leak?" is the user's suspicion: the line says so
                shown = f"{shown} ({say['suspected']})"
            fields[name] = {"value": reading.value, "title": shown,
                            "source": reading.source, "clues": [c.text for c in reading.clues]}
    if "failed" in fields:
        fields["failed"]["bytes"] = sit.failed_bytes
    parts = [fields[n]["title"] for n in ("phase", "step", "where", "trend", "process") if n in fields]
    short = ([fields["failed"]["title"]] if "failed" in fields else []) + parts[:3]
    if "failed" in fields:
        f = fields["failed"]
        parts.insert(0, f"{say['request']}: {f['clues'][0]}" if f["value"] != "impossible" else
                     f"{say['request']} {f['title']} ({f['clues'][0]})")
    if sit.after_phase and "phase" not in fields:  # "died right after the rollout phase": no phase of its own
        parts.insert(0, f"{say['after_phase']}: {title('phases', sit.after_phase)}")
    if sit.error:
        parts.insert(0, f"{say['error']}: {code_span(sit.error)}")
    elif diag.facts.get("log.oom_kind") == "host":
        # a host kill's own line ("...| 19/28 [00:48<00:23, 2.59s/it]Killed", Ray's "Task was killed ..."): what
        # the user saw, quoted, so the answer says which kill it read
        kill = diag.facts.get("log.first_error")
        if kill:
            parts.insert(0, f"{say['killed']}: {code_span(kill[-_KILL_CHARS:])}")
    if sit.call_path:
        parts.append(f"{say['call_path']} " + " <- ".join(code_span(name) for name in sit.call_path[:3]))
    if "framework" in fields:
        parts.append(f"{say['framework']} {fields['framework']['title']}")
    def named(value: str) -> str:
        """A change or try as the answer names it: the software stack, an unnamed setting, or a fix's title."""
        return say[value] if value in ("stack", "setting") else kb.get("fixes", value)["title"][lang]

    kinds = (("changed", sit.changed), ("tried", sit.tried), ("no_effect", sit.no_effect),
             ("worked_with", sit.worked_with), ("removed", sit.removed), ("absent", sit.absent))
    said = [{"kind": kind, "label": say.get(kind, kind), "value": r.value, "title": named(r.value),
             "clues": [c.text for c in r.clues]} for kind, readings in kinds for r in readings]
    for kind in ("changed", "tried", "worked_with", "no_effect", "absent"):  # the situation line, in this order
        titles = [s["title"] for s in said if s["kind"] == kind]
        if titles:
            parts.append(f"{say[kind]}: {', '.join(titles)}")
    ruled = ruled_out_report(diag.ruled_out, kb, lang)
    return {
        "line": "; ".join(parts) if parts else None,
        "short": "; ".join(short) if short else None,
        "fields": fields,
        "components": [r.value for r in sit.components],
        "figures": [{"text": text, "role": role} for text, role in sit.figures],
        "named": known_names(diag.facts.get("question.named") or [], kb),
        "message": message_figures(diag.facts),
        "changed": [r.value for r in sit.changed],
        "tried": [r.value for r in sit.tried],
        "no_effect": [r.value for r in sit.no_effect],
        "removed": [r.value for r in sit.removed],
        "absent": [r.value for r in sit.absent],
        "worked_with": [r.value for r in sit.worked_with],
        "said": said,
        "call_path": list(sit.call_path),
        "error": sit.error,
        "ruled_out": ruled,
        "candidates": _candidates(diag, kb, lang),
    }


_KILL_CHARS = 160  # the end of a kill line: a progress bar before the shell's "Killed" is not what matters

# The OOM message's figures in the order an engineer reads them: the request against what was free, then who holds
# the GPU (this process: PyTorch's allocation, its private pools, its cache; memory outside PyTorch; other processes).
MESSAGE_FIGURES = ("requested", "free", "capacity", "process", "allocated", "private_pool", "reserved_unallocated",
                   "non_pytorch", "other_process")
HOST_FIGURES = ("killed", "node_used", "node_total", "threshold")  # ui.yaml message-host-<name>


def message_figures(flat: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The first memory failure's own numbers (``log.*_bytes`` facts), printed as PyTorch prints a size, so the
    answer quotes the message the user has in front of them (render/ labels each: ui.yaml ``message-<name>``)."""
    out = []
    for name in MESSAGE_FIGURES:
        value = flat.get(f"log.{name}_bytes")
        if value is None or (name in ("other_process", "non_pytorch") and not value):
            continue
        out.append({"name": name, "bytes": value, "text": fill("{x|gib}", {"x": value})})
    # a host kill's own line (Ray's node-memory line): quoted as it prints its figures
    host = flat.get("log.host_figures") or {}
    out += [{"name": f"host_{name}", "bytes": None, "text": host[name]} for name in HOST_FIGURES if host.get(name)]
    return out


def ruled_out_report(ruled_out: Mapping[str, RuledOut], kb: Knowledge, lang: str) -> list[dict[str, str]]:
    """Each ruled-out cause with the reasons of what held, joined (situation.yaml wording reasons_join), and the
    facts it rests on: a reason of a branch that did not hold would tell the user something the evidence never
    said."""
    causes = kb.by_id.get("causes", {})
    joiner = {lang: ((kb.tables.get("situation") or {}).get("wording") or {})["reasons_join"][lang]}
    return [{"id": cid, "title": causes[cid]["title"][lang], "why": join_reasons(r.why, joiner)[lang], "facts": r.facts}
            for cid, r in ruled_out.items()]


def _candidates(diag: Diagnosis, kb: Knowledge, lang: str) -> list[dict[str, Any]]:
    """The causes that remain when the evidence is thin, each with the check that confirms or rules it out and
    what to do if it does."""
    from .engine import candidate_fix

    causes = kb.by_id.get("causes", {})
    out = []
    for finding in diag.candidates:
        sit = causes[finding].get("situation") or {}
        then = candidate_fix(finding, kb, diag.facts)
        out.append({"id": finding, "title": causes[finding]["title"][lang],
                    "check": (sit.get("check") or {}).get(lang) or causes[finding]["confirm"][lang][0],
                    "check_fix": sit.get("check_fix"), "then_fix": then,
                    "then_title": kb.get("fixes", then)["title"][lang] if then else None})
    return out


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
    gpu = flat.get("gpu.assumption")
    return [*([f"model shape ~ {shape}"] if shape else []), *([gpu] if gpu else []),
            *(flat.get("config.assumed") or [])]


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
