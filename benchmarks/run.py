#!/usr/bin/env python3
"""Score OOM advice on the benchmark scenarios.

    python3 benchmarks/run.py                         # our own `memtune diagnose` (JSON)
    python3 benchmarks/run.py --answers DIR           # DIR/<id>.md from any agent (or <id>.json)
    python3 benchmarks/run.py --agent-cmd "CMD"       # CMD reads the prompt on stdin, prints Markdown

Exit codes: 0 scored; 1 a runner error (an answer could not be produced) or a gate
(--min-first-fix, --max-violations) failed; 2 bad input (invalid scenario, bad option).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKILL = ROOT / "skills" / "nemo-mbridge-perf-memory-tuning"  # the folder users install
for _path in (SKILL / "scripts", ROOT):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from memtune.errors import UserError  # noqa: E402
from memtune.knowledge import KnowledgeError  # noqa: E402

from benchmarks import judge, producers, report  # noqa: E402
from benchmarks.scenario import Scenario, known_ids, load_scenarios  # noqa: E402
from benchmarks.score import ScenarioScore, Scorer, failed, metrics, score, summarize  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="benchmarks/run.py", description="Score OOM recommendations (ours or any agent's) on the scenarios."
    )
    parser.add_argument("--scenarios", type=Path, help="scenario directory (default: benchmarks/scenarios)")
    parser.add_argument("--knowledge", type=Path, metavar="DIR", help="knowledge base for ids and fix patterns")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--answers", type=Path, metavar="DIR", help="score saved answers DIR/<id>.md (or .json)")
    source.add_argument(
        "--agent-cmd", metavar="CMD", help="command, run without a shell: prompt on stdin, Markdown answer on stdout"
    )
    parser.add_argument("--format", choices=["markdown", "json"], default="markdown")
    parser.add_argument("--output", type=Path, help="write the report here instead of stdout")
    parser.add_argument("--only", action="append", default=[], metavar="TEXT", help="scenarios whose id contains TEXT")
    parser.add_argument("--save-answers", type=Path, metavar="DIR", help="keep every answer as DIR/<id>.md/.json")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per --agent-cmd run (default 600)")
    parser.add_argument("--agent-env", action="append", default=[], metavar="NAME",
                        help="also pass this environment variable to --agent-cmd (repeatable; e.g. its API key)")
    parser.add_argument("--min-first-fix", type=float, metavar="X", help="fail (exit 1) if first-fix accuracy < X")
    parser.add_argument("--ranking", choices=["rules", "ledger"],
                        help="our diagnose only: cause ranking to use (default: knowledge/ledger.yaml)")
    parser.add_argument("--gate-set", metavar="NAME",
                        help="apply --min-first-fix to this scenario set only (e.g. dev); violations gate every set")
    parser.add_argument("--max-violations", type=int, metavar="N", help="fail (exit 1) if violations > N")
    parser.add_argument("--jobs", type=int, default=min(os.cpu_count() or 1, 4), metavar="N",
                        help="our diagnose only: processes that diagnose the scenarios in parallel "
                             "(default: the CPUs, at most 4; 1 runs them in this process)")
    parser.add_argument("--judge-cmd", metavar="CMD",
                        help="also have CMD judge each Markdown answer (JSON in, JSON verdict out; see "
                             "benchmarks/judge.py); its verdicts and the disagreements are reported beside ours")
    return parser


def run(args: argparse.Namespace, scenarios: list[Scenario]) -> list[ScenarioScore]:
    return [rules for rules, _ in run_judged(args, scenarios)]


def run_judged(args: argparse.Namespace,
               scenarios: list[Scenario]) -> list[tuple[ScenarioScore, ScenarioScore | str | None]]:
    """Each scenario's score, and with --judge-cmd the judge's score of the same answer (or its error)."""
    producers.RANKING = getattr(args, "ranking", None)
    judge_cmd = getattr(args, "judge_cmd", None)
    ids = known_ids(args.knowledge) if judge_cmd else None
    scorer = Scorer.from_kb(args.knowledge) if args.answers or args.agent_cmd else None
    if args.answers and not args.answers.is_dir():
        raise UserError(f"{args.answers}: answers directory not found")
    if not (args.answers or args.agent_cmd or judge_cmd or args.save_answers) and args.jobs > 1 and len(scenarios) > 1:
        return _diagnosed_in_parallel(scenarios, args.jobs)
    results = []
    for scenario in scenarios:
        if args.answers:
            produced = producers.from_directory(scenario, args.answers, scorer)
        elif args.agent_cmd:
            produced = producers.from_agent(scenario, args.agent_cmd, scorer, args.timeout, tuple(args.agent_env))
        else:
            produced = producers.from_diagnose(scenario)
        if args.save_answers:
            args.save_answers.mkdir(parents=True, exist_ok=True)
            for suffix, text in produced.raw.items():
                (args.save_answers / f"{scenario.id}{suffix}").write_text(text, encoding="utf-8")
        rules = score(scenario, produced.answer) if produced.answer else failed(scenario, produced.error)
        judged: ScenarioScore | str | None = None
        markdown = produced.raw.get(".md")
        if judge_cmd and markdown:
            verdict = judge.judge(scenario, markdown, judge_cmd, ids, args.timeout)
            judged = judge.score_judged(scenario, verdict) or verdict
        results.append((rules, judged))
    return results


def _diagnosed(scenario: Scenario) -> tuple[ScenarioScore, None]:
    produced = producers.from_diagnose(scenario)
    return (score(scenario, produced.answer) if produced.answer else failed(scenario, produced.error)), None


def _diagnosed_in_parallel(scenarios: list[Scenario], jobs: int) -> list[tuple[ScenarioScore, None]]:
    """Our diagnose over the scenarios in ``jobs`` forked processes, results in scenario order: each diagnosis is
    independent and CPU-bound (the 1,800 scenarios took 49 s in one process on 2 cores, 27 s in two), and each
    worker loads the knowledge base once, from its cache."""
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
    with context.Pool(min(jobs, len(scenarios))) as pool:
        return pool.map(_diagnosed, scenarios, chunksize=max(1, len(scenarios) // (jobs * 8)))


def judge_report(pairs: list[tuple[ScenarioScore, ScenarioScore | str | None]]) -> dict:
    """The judge's headline numbers beside ours, its errors, and every disagreement."""
    judged = [(r, j) for r, j in pairs if isinstance(j, ScenarioScore)]
    return {
        "judged": len(judged),
        "errors": {r.id: j for r, j in pairs if isinstance(j, str)},
        "rules": summarize(r for r, _ in judged),
        "judge": summarize(j for _, j in judged),
        "disagreements": [d.__dict__ for r, j in judged for d in judge.disagreements(r, j)],
    }


def gate_failures(result: dict, args: argparse.Namespace) -> list[str]:
    problems = []
    if result["errors"]:
        problems.append(f"{result['errors']} scenario(s) could not be answered (runner errors)")
    accuracy = result["first_fix_accuracy"]
    if args.gate_set:
        part = (result.get("per_set") or {}).get(args.gate_set)
        if part is None:
            return [*problems, f"--gate-set {args.gate_set}: no scenario of that set"]
        accuracy = part["first_fix_accuracy"]
    if args.min_first_fix is not None and (accuracy is None or accuracy < args.min_first_fix):
        problems.append(f"first-fix accuracy {accuracy} is below --min-first-fix {args.min_first_fix}")
    if args.max_violations is not None and result["violations"] > args.max_violations:
        count = result["violations"]
        problems.append(f"{count} never_recommend violations exceed --max-violations {args.max_violations}")
    return problems


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        scenarios = load_scenarios(args.scenarios, known_ids(args.knowledge))
        if args.only:
            scenarios = [s for s in scenarios if any(text in s.id for text in args.only)]
            if not scenarios:
                raise UserError(f"--only {' '.join(args.only)}: no scenario id matches")
        pairs = run_judged(args, scenarios)
        result = metrics([rules for rules, _ in pairs])
        if args.judge_cmd:
            result["judge"] = judge_report(pairs)
    except (UserError, KnowledgeError) as exc:
        print(f"benchmarks/run.py: error: {exc}", file=sys.stderr)
        return 2
    mode = f"answers {args.answers}" if args.answers else f"agent {args.agent_cmd}" if args.agent_cmd else "diagnose"
    text = (
        json.dumps(result, indent=2, ensure_ascii=False) + "\n"
        if args.format == "json"
        else report.render(result, title=f"OOM benchmark ({mode})")
    )
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    problems = gate_failures(result, args)
    for problem in problems:
        print(f"benchmarks/run.py: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
