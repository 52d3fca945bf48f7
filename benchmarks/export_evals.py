#!/usr/bin/env python3
"""Write evals/evals.json in NVIDIA's skill-eval format from the benchmark scenarios.

    python3 benchmarks/export_evals.py            # regenerate evals/evals.json
    python3 benchmarks/export_evals.py --check    # exit 1 if the committed file is stale

Each scenario becomes a positive case (``expected_skill`` = this skill, the prompt an agent would
get, the scenario's ground truth, and one checkable behaviour per expectation); the questions in
``activation_negatives.yaml`` become negative cases with ``expected_skill: null``.  The output
depends only on the scenario files, so it is reproducible byte for byte.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SKILL = ROOT / "skills" / "nemo-mbridge-perf-memory-tuning"  # the folder users install
for _path in (SKILL / "scripts", ROOT):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import yaml  # noqa: E402
from memtune.errors import UserError  # noqa: E402
from memtune.knowledge import KnowledgeError  # noqa: E402

from benchmarks.producers import agent_prompt  # noqa: E402
from benchmarks.scenario import Scenario, known_ids, load_scenarios  # noqa: E402

SCRIPT = "scripts/memtune.py"
NEGATIVES = Path(__file__).resolve().parent / "activation_negatives.yaml"
OUTPUT = ROOT / "evals" / "evals.json"


def skill_name(root: Path = SKILL) -> str:
    """The ``name`` in SKILL.md's front matter: the id agents activate the skill by."""
    path = root / "SKILL.md"
    try:
        match = re.match(r"^---\n(.*?)\n---", path.read_text(encoding="utf-8"), re.DOTALL)
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror})") from None
    name = (yaml.safe_load(match.group(1)) or {}).get("name") if match else None
    if not name:
        raise UserError(f"{path}: front matter has no 'name'")
    return str(name)


def _ids(items: list[str]) -> str:
    quoted = [f"`{i}`" for i in items]
    return quoted[0] if len(quoted) == 1 else "one of " + ", ".join(quoted)


def behaviours(scenario: Scenario) -> list[str]:
    """One checkable statement per expectation, in the order a grader reads an answer."""
    expect, inputs = scenario.expect, scenario.inputs
    given = [k for k in ("log", "config", "overrides", "env", "gpu") if inputs.get(k)]
    evidence = ", ".join(given) if given else "the question"
    out = [f"Runs `python3 {SCRIPT} diagnose` (or `check`) on the evidence in the prompt ({evidence})"]
    if "cause" in expect:
        out.append(f"Names {_ids(expect['cause'])} as the most likely cause")
    if "first_fix" in expect:
        out.append(f"Recommends {_ids(expect['first_fix'])} as the first fix")
    out += [f"Also recommends `{f}`" for f in expect.get("fixes_include", [])]
    out += [f"Flags `{f}` as something not to do (or not first)" for f in expect.get("avoid_include", [])]
    out += [f"Does NOT recommend `{f}`" for f in expect.get("never_recommend", [])]
    out += [f"Mentions `{m}`" for m in expect.get("mentions", [])]
    if scenario.language == "zh":
        out.append("Answers in Chinese, keeping config keys and env vars verbatim")
    return out


def positive(scenario: Scenario, skill: str) -> dict[str, Any]:
    return {
        "id": scenario.id,
        "question": agent_prompt(scenario),
        "expected_skill": skill,
        "expected_script": SCRIPT,
        "ground_truth": scenario.ground_truth,
        "expected_behavior": behaviours(scenario),
    }


def negatives(skill: str, path: Path = NEGATIVES) -> list[dict[str, Any]]:
    try:
        rows = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("negatives") or []
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"{path}: cannot read ({exc})") from None
    out = []
    for i, row in enumerate(rows):
        missing = [k for k in ("id", "question", "ground_truth") if not row.get(k)]
        if missing:
            raise UserError(f"{path}: negatives[{i}]: missing {', '.join(missing)}")
        out.append(
            {
                "id": row["id"],
                "question": row["question"],
                "expected_skill": None,
                "expected_script": None,
                "ground_truth": row["ground_truth"],
                "expected_behavior": [f"Does not activate the {skill} skill", f"Does not run {SCRIPT}"],
            }
        )
    return out


def build(scenarios: list[Scenario], skill: str) -> list[dict[str, Any]]:
    cases = [positive(s, skill) for s in scenarios] + negatives(skill)
    seen: set[str] = set()
    for case in cases:
        if case["id"] in seen:
            raise UserError(f"evals: duplicate id {case['id']!r}")
        seen.add(case["id"])
    return cases


def render(cases: list[dict[str, Any]]) -> str:
    return json.dumps(cases, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/export_evals.py", description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=Path, help="scenario directory (default: benchmarks/scenarios)")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="default: evals/evals.json")
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if the file is out of date")
    args = parser.parse_args(argv)
    try:
        cases = build(load_scenarios(args.scenarios, known_ids()), skill_name())
    except (UserError, KnowledgeError) as exc:
        print(f"export_evals: error: {exc}", file=sys.stderr)
        return 2
    text = render(cases)
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.is_file() else ""
        if current != text:
            print(
                f"export_evals: {args.output} is out of date; run python3 benchmarks/export_evals.py", file=sys.stderr
            )
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output} ({len(cases)} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
