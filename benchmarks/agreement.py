#!/usr/bin/env python3
"""How often the free-text scorer reads an answer the way an expert did.

    python3 benchmarks/agreement.py [--answers DIR] [--format markdown|json] [--show-misses]

``benchmarks/answers/*.yaml`` are answers in the styles agents write, each labelled by a reader
before the scorer saw them (first fix, cause, recommended, avoided, violations; see the
README there).  For each one the scorer reads ``answer`` and the verdicts are compared:

* first-fix verdict — both say the answer's first fix is (or is not) one the scenario accepts;
* first-fix id      — both name the same fix (stricter: a wrong answer can be wrong two ways);
* violations        — both find the same never_recommend ids recommended;
* cause             — both name the same top cause.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SKILL = ROOT / "skills" / "nemo-mbridge-perf-memory-tuning"  # the folder users install
for _path in (SKILL / "scripts", ROOT):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import yaml  # noqa: E402
from memtune.errors import UserError  # noqa: E402

from benchmarks import yamlio  # noqa: E402
from benchmarks.scenario import Scenario, load_scenarios  # noqa: E402
from benchmarks.score import Scorer  # noqa: E402

DEFAULT_DIR = ROOT / "benchmarks" / "answers"
_LABELS = ("first_fix", "cause", "recommended", "conditional", "avoided", "violations")


@dataclass(frozen=True)
class Labelled:
    id: str
    scenario: str
    language: str
    answer: str
    labels: dict[str, Any]


@dataclass
class Verdicts:
    """One answer: the expert's reading beside the scorer's."""

    id: str
    scenario: str
    expert_first_fix: str | None
    scorer_first_fix: str | None
    first_fix_verdict_agrees: bool | None  # None: the scenario states no first fix
    first_fix_id_agrees: bool
    expert_violations: list[str]
    scorer_violations: list[str]
    cause_agrees: bool
    scorer_why: str = ""  # the text behind the scorer's first fix, to audit a disagreement

    @property
    def violations_agree(self) -> bool:
        return sorted(self.expert_violations) == sorted(self.scorer_violations)


def load_labelled(directory: Path = DEFAULT_DIR) -> list[Labelled]:
    if not directory.is_dir():
        raise UserError(f"{directory}: labelled answer directory not found")
    out = []
    for path in sorted(directory.glob("*.yaml")):
        try:
            data = yamlio.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise UserError(f"{path}: invalid YAML ({exc})") from None
        if not isinstance(data, dict) or not isinstance(data.get("labels"), dict):
            raise UserError(f"{path}: expected id, scenario, language, answer and labels")
        missing = [k for k in ("id", "scenario", "answer") if not data.get(k)]
        if missing:
            raise UserError(f"{path}: missing {', '.join(missing)}")
        if data["id"] != path.stem:
            raise UserError(f"{path}: id {data['id']!r} must equal the file name")
        labels = {k: data["labels"].get(k) for k in _LABELS}
        for key in ("recommended", "conditional", "avoided", "violations"):
            labels[key] = list(labels[key] or [])
        out.append(Labelled(data["id"], data["scenario"], str(data.get("language", "")), data["answer"], labels))
    return out


def compare(item: Labelled, scenario: Scenario, scorer: Scorer) -> Verdicts:
    answer = scorer.read_markdown(item.answer, scenario.inputs)
    expect = scenario.expect
    accepted = expect.get("first_fix")
    never = expect.get("never_recommend", [])
    expert_ff = item.labels["first_fix"]
    verdict = None
    if accepted:
        verdict = (expert_ff in accepted) == (answer.first_fix in accepted)
    return Verdicts(
        id=item.id,
        scenario=item.scenario,
        expert_first_fix=expert_ff,
        scorer_first_fix=answer.first_fix,
        first_fix_verdict_agrees=verdict,
        first_fix_id_agrees=expert_ff == answer.first_fix,
        expert_violations=sorted(set(item.labels["violations"])),
        scorer_violations=sorted({f for f in never if f in answer.recommended}),
        cause_agrees=item.labels["cause"] == answer.top_cause,
        scorer_why=answer.why.get(answer.first_fix or "", ""),
    )


def measure(items: list[Labelled], scenarios: dict[str, Scenario], scorer: Scorer) -> dict[str, Any]:
    unknown = sorted({i.scenario for i in items} - set(scenarios))
    if unknown:
        raise UserError(f"labelled answers refer to unknown scenarios: {', '.join(unknown)}")
    rows = [compare(i, scenarios[i.scenario], scorer) for i in items]

    def share(flags: list[bool]) -> float | None:
        return round(sum(flags) / len(flags), 4) if flags else None

    verdicts = [r.first_fix_verdict_agrees for r in rows if r.first_fix_verdict_agrees is not None]
    return {
        "answers": len(rows),
        "first_fix_verdict": share(verdicts),
        "first_fix_verdict_cases": len(verdicts),
        "first_fix_id": share([r.first_fix_id_agrees for r in rows]),
        "violations": share([r.violations_agree for r in rows]),
        "cause": share([r.cause_agrees for r in rows]),
        "per_language": {
            lang: {"answers": len(sub), "first_fix_id": share([r.first_fix_id_agrees for r in sub]),
                   "violations": share([r.violations_agree for r in sub])}
            for lang in sorted({i.language for i in items})
            for sub in [[r for r, i in zip(rows, items, strict=True) if i.language == lang]]
        },
        # per writer (the id prefix): the scorer is tuned on some writers' answers, the others stay held out
        "per_writer": {
            w: {"answers": len(sub), "first_fix_verdict": share([r.first_fix_verdict_agrees for r in sub
                                                                 if r.first_fix_verdict_agrees is not None]),
                "first_fix_id": share([r.first_fix_id_agrees for r in sub]),
                "violations": share([r.violations_agree for r in sub])}
            for w in sorted({r.id.split("-", 1)[0] for r in rows})
            for sub in [[r for r in rows if r.id.split("-", 1)[0] == w]]
        },
        "rows": [r.__dict__ | {"violations_agree": r.violations_agree} for r in rows],
    }


def render(result: dict[str, Any], show_misses: bool) -> str:
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f} %"

    lines = ["| measure | agreement |", "|---|---|",
             f"| first-fix verdict ({result['first_fix_verdict_cases']} answers) | "
             f"{pct(result['first_fix_verdict'])} |",
             f"| first-fix id ({result['answers']}) | {pct(result['first_fix_id'])} |",
             f"| violations ({result['answers']}) | {pct(result['violations'])} |",
             f"| cause ({result['answers']}) | {pct(result['cause'])} |"]
    for lang, sub in result["per_language"].items():
        lines.append(f"| {lang}: first-fix id / violations ({sub['answers']}) | "
                     f"{pct(sub['first_fix_id'])} / {pct(sub['violations'])} |")
    for writer, sub in result["per_writer"].items():
        lines.append(f"| writer {writer}: verdict / id / violations ({sub['answers']}) | "
                     f"{pct(sub['first_fix_verdict'])} / {pct(sub['first_fix_id'])} / {pct(sub['violations'])} |")
    if show_misses:
        lines += ["", "| answer | expert first fix | scorer first fix | expert violations | scorer violations "
                  "| scorer read |", "|---|---|---|---|---|---|"]
        for r in result["rows"]:
            if not (r["first_fix_id_agrees"] and r["violations_agree"]):
                why = r["scorer_why"].replace("|", "\\|")
                lines.append(f"| {r['id']} | {r['expert_first_fix']} | {r['scorer_first_fix']} | "
                             f"{', '.join(r['expert_violations'])} | {', '.join(r['scorer_violations'])} | {why} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/agreement.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--answers", type=Path, default=DEFAULT_DIR, help="labelled answers (default: %(default)s)")
    parser.add_argument("--format", choices=["markdown", "json"], default="markdown")
    parser.add_argument("--show-misses", action="store_true", help="list every answer read differently")
    args = parser.parse_args(argv)
    try:
        scenarios = {s.id: s for s in load_scenarios()}
        result = measure(load_labelled(args.answers), scenarios, Scorer.from_kb())
    except UserError as exc:
        print(f"agreement: error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(json.dumps(result, indent=1, ensure_ascii=False) + "\n" if args.format == "json"
                     else render(result, args.show_misses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
