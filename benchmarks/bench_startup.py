#!/usr/bin/env python3
"""Start-up cost of ``memtune diagnose``: cold processes, measured beside a bare interpreter.

    python3 benchmarks/bench_startup.py                     # 15 rounds, Markdown table
    python3 benchmarks/bench_startup.py --runs 30 --format json
    python3 benchmarks/bench_startup.py --max-ratio 2.5     # exit 1 when a case is slower than that

Each round runs, one after the other, ``python3 -c pass`` and every case below as a fresh process
(so each pays interpreter start, imports, knowledge-base load and the diagnosis itself), and times
it from spawn to exit.  Runs alternate within a round so drifting machine load hits every command
alike; the medians are compared, and ``ratio`` is a case's median over the bare interpreter's.

Cases (``--config`` / ``--log`` change the inputs):

* config - ``diagnose --config <config> --gpu H100-80GB --format json``
* log    - ``diagnose --log <log> --gpu H100-80GB --format json``

Before timing, every command runs once untimed (and memtune's output is checked to be JSON): that
warms the OS file cache and, unless PYTHONDONTWRITEBYTECODE is set, writes ``__pycache__``, as any
earlier run of an installed skill would have.  The report says whether bytecode writing was off
and whether the knowledge cache (``$HOME/.cache/memtune``) is current (the warm-up run fills it; a
stale one means a run parses the YAML and refreshes it).

``--python`` (default ``python3``, looked up on PATH) is timed for both sides.  Under pyenv or asdf,
a shell's ``python3`` is a shim script that adds ~45 ms to every start, bare or not, which makes
the ratio look better; started through a shim, this script sees the real interpreter first on
PATH and times that.  Pass the shim's path (``--python ~/.pyenv/shims/python3``) to include it.

Not a test: the numbers depend on the machine.  Exit codes: 0 ok, 1 ``--max-ratio`` exceeded,
2 a command failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SKILL = ROOT / "skills" / "nemo-mbridge-perf-memory-tuning"  # the folder users install
LAUNCHER = SKILL / "scripts" / "memtune.py"
DEFAULT_CONFIG = SKILL / "examples" / "llama3-70b-sft-config.yaml"  # over capacity: every fix is simulated
DEFAULT_LOG = SKILL / "examples" / "llama3-70b-fragmentation.log"


def commands(python: str, config: Path, log: Path) -> dict[str, list[str]]:
    diagnose = [python, str(LAUNCHER), "diagnose"]
    tail = ["--gpu", "H100-80GB", "--format", "json"]
    return {
        "python -c pass": [python, "-c", "pass"],
        "config": [*diagnose, "--config", str(config), *tail],
        "log": [*diagnose, "--log", str(log), *tail],
    }


def _run(cmd: list[str], check_json: bool = False) -> float:
    start = time.perf_counter()
    out = subprocess.PIPE if check_json else subprocess.DEVNULL
    proc = subprocess.run(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=out, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip() if proc.stderr else ""
        raise RuntimeError(f"exit {proc.returncode}: {' '.join(cmd)}\n{err}")
    if check_json and cmd[1:2] != ["-c"]:
        json.loads(proc.stdout)
    return elapsed


def _is_script(path: str) -> bool:
    """True for a pyenv/asdf-style shell shim: it adds its own start-up time to every command alike."""
    with open(path, "rb") as fh:
        return fh.read(2) == b"#!"


def compiled_state() -> str:
    sys.path.insert(0, str(SKILL / "scripts"))
    from memtune import knowledge

    status = getattr(knowledge, "compiled_status", None)  # absent before the compiled KB existed
    return status(knowledge.knowledge_dir()) if status else "not supported"


def measure(cmds: dict[str, list[str]], runs: int) -> dict[str, list[float]]:
    for cmd in cmds.values():  # warm-up: file cache, __pycache__, and a check that it works
        _run(cmd, check_json=True)
    times: dict[str, list[float]] = {name: [] for name in cmds}
    for _ in range(runs):
        for name, cmd in cmds.items():
            times[name].append(_run(cmd))
    return times


def summarize(times: dict[str, list[float]]) -> dict[str, Any]:
    bare_name = next(iter(times))
    bare = statistics.median(times[bare_name])
    cases = {}
    for name, samples in times.items():
        med = statistics.median(samples)
        cases[name] = {"median_s": round(med, 4), "min_s": round(min(samples), 4),
                       "max_s": round(max(samples), 4), "ratio": round(med / bare, 3),
                       "samples_s": [round(t, 4) for t in samples]}
    return {"baseline": bare_name, "cases": cases,
            "max_ratio": max(c["ratio"] for n, c in cases.items() if n != bare_name)}


def to_markdown(result: dict[str, Any]) -> str:
    shim = " (a shell shim)" if result["python_is_shim"] else ""
    lines = [f"runs: {result['runs']}  python: {result['python']}{shim}  bytecode writing: "
             f"{'off (PYTHONDONTWRITEBYTECODE)' if result['dont_write_bytecode'] else 'on'}  "
             f"compiled KB: {result['compiled_kb']}", "",
             "| command | median s | min s | max s | ratio |", "|---|---:|---:|---:|---:|"]
    for name, c in result["cases"].items():
        lines.append(f"| {name} | {c['median_s']:.3f} | {c['min_s']:.3f} | {c['max_s']:.3f} | {c['ratio']:.2f}x |")
    lines.append("")
    lines.append(f"worst ratio: {result['max_ratio']:.2f}x"
                 + (f" (limit {result['limit']:.2f}x)" if result.get("limit") is not None else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="rounds of alternating cold runs (default 15)")
    parser.add_argument("--python", default="python3",
                        help="interpreter to time, looked up on PATH (default: python3); give a pyenv/asdf shim's "
                        "path to include the shim's own start-up, as a shell's 'python3' does")
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="config for the 'config' case")
    parser.add_argument("--log", type=Path, default=DEFAULT_LOG, help="log for the 'log' case")
    parser.add_argument("--max-ratio", type=float, help="exit 1 when any case's median ratio exceeds this")
    parser.add_argument("--format", choices=["markdown", "json"], default="markdown")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    python = shutil.which(args.python)
    if python is None:
        parser.error(f"--python {args.python}: not found on PATH")
    cmds = commands(python, args.config.resolve(), args.log.resolve())
    try:
        times = measure(cmds, args.runs)
    except RuntimeError as exc:
        print(f"bench_startup: error: {exc}", file=sys.stderr)
        return 2
    result = {"runs": args.runs, "python": python, "python_is_shim": _is_script(python),
              "dont_write_bytecode": bool(os.environ.get("PYTHONDONTWRITEBYTECODE")),
              "compiled_kb": compiled_state(), **summarize(times), "limit": args.max_ratio}
    if args.format == "json":
        print(json.dumps(result, indent=2))
    else:
        print(to_markdown(result))
    return 1 if args.max_ratio is not None and result["max_ratio"] > args.max_ratio else 0


if __name__ == "__main__":
    sys.exit(main())
