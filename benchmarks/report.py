"""Render benchmark metrics as a short Markdown report (the README table comes from here)."""

from __future__ import annotations

from typing import Any

_LABELS = {
    "first_fix_accuracy": "First fix accuracy",
    "cause_accuracy": "Cause accuracy",
    "include_recall": "Fixes-include recall",
    "avoid_recall": "Avoid recall",
    "violations": "never_recommend violations",
    "mentions_recall": "Mentions recall",
}


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.0%}" if value in (0.0, 1.0) else f"{value:.1%}"
    return str(value)


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(metrics: dict[str, Any], title: str = "OOM benchmark") -> str:
    lines = [f"# {title}", ""]
    lines.append(
        f"{metrics['scenarios']} scenarios, {metrics['passed']} passed every check, {metrics['errors']} runner errors."
    )
    lines += ["", "| Metric | Value |", "|---|---|"]
    lines += [f"| {label} | {_fmt(metrics[key])} |" for key, label in _LABELS.items()]
    if len(metrics.get("per_set") or {}) > 1:
        lines += ["", "## Per scenario set", "", "| Set | Scenarios | Passed | First fix | Cause | Violations |",
                  "|---|---:|---:|---:|---:|---:|"]
        for name, part in metrics["per_set"].items():
            lines.append(f"| {name} | {part['scenarios']} | {part['passed']} | {_fmt(part['first_fix_accuracy'])} "
                         f"| {_fmt(part['cause_accuracy'])} | {part['violations']} |")
    lines += ["", "## Per category", "", "| Category | Scenarios | First fix | Cause | Include | Avoid | Violations |"]
    lines.append("|---|---:|---:|---:|---:|---:|---:|")
    for name, cat in metrics["per_category"].items():
        lines.append(
            f"| {name} | {cat['scenarios']} | {_fmt(cat['first_fix_accuracy'])} | {_fmt(cat['cause_accuracy'])} "
            f"| {_fmt(cat['include_recall'])} | {_fmt(cat['avoid_recall'])} | {cat['violations']} |"
        )
    if metrics.get("judge"):
        lines += _judge_lines(metrics["judge"])
    misses = [s for s in metrics["per_scenario"] if not s["passed"]]
    if misses:
        lines += ["", "## Scenarios with misses", "", "| Scenario | What was wrong |", "|---|---|"]
        lines += [f"| {s['id']} | {_cell('; '.join(_problems(s)))} |" for s in misses]
    return "\n".join(lines) + "\n"


def _problems(s: dict[str, Any]) -> list[str]:
    out = []
    if s["error"]:
        out.append(f"error: {s['error']}")
    for key in ("first_fix", "cause"):
        check = s[key]
        if check and not check["ok"]:
            out.append(f"{key}: got {check['got'] or 'nothing'}, expected one of {', '.join(check['expected'])}")
    for key in ("fixes_include", "avoid_include", "mentions"):
        recall = s[key]
        if recall and recall["missing"]:
            out.append(f"{key} missing: {', '.join(recall['missing'])}")
    if s["violations"]:
        out.append(f"recommended although never_recommend: {', '.join(s['violations'])}")
    out += [f"why {ident}: {text}" for ident, text in (s.get("why") or {}).items()]
    return out


def _judge_lines(part: dict[str, Any]) -> list[str]:
    lines = ["", f"## Judge beside the rule scorer ({part['judged']} answers judged, {len(part['errors'])} errors)", "",
             "| Measure | Rule scorer | Judge |", "|---|---|---|"]
    for key in ("first_fix_accuracy", "cause_accuracy", "violations"):
        lines.append(f"| {_LABELS[key]} | {_fmt(part['rules'][key])} | {_fmt(part['judge'][key])} |")
    if part["disagreements"]:
        lines += ["", "| Scenario | Measure | Rule scorer | Judge |", "|---|---|---|---|"]
        lines += [f"| {d['scenario']} | {d['measure']} | {_cell(d['rules'])} | {_cell(d['judge'])} |"
                  for d in part["disagreements"]]
    lines += [f"- judge error on {sid}: {_cell(err)}" for sid, err in part["errors"].items()]
    return lines
