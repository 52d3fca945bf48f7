#!/usr/bin/env python3
"""Volume fuzzing: thousands of damaged inputs per reader, each a result or one UserError line.

    python3 benchmarks/fuzz_volume.py [--cases 10000] [--seed 0] [--reader NAME] [--format json]

A seeded random mutator, cheap per case, over every reader, including the classes that escaped
before (deep nesting, 5000-digit integers, negative and NaN numbers, control bytes). Exit 1 when
any input escapes (a traceback, a refusal on several lines, a wrong result type); the report gives
each reader's cases, refusals, escapes and time, and the first escapes with the case that made them
(``--seed S --reader R`` replays it). CI runs the full 10,000 per reader as its own step; the test
suite runs a sample of the same mutators (tests/test_fuzz_volume.py). Hypothesis explores the same
readers with few, shrinkable cases in tests/test_fuzz_parsers.py.
"""

from __future__ import annotations

import argparse
import json
import pickle
import random
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "skills" / "nemo-mbridge-perf-memory-tuning" / "scripts"))

from memtune import knowledge  # noqa: E402
from memtune.errors import UserError  # noqa: E402
from memtune.facts import EnvFacts, LogFacts, QuestionFacts, TrainingConfig  # noqa: E402
from memtune.inputs.config import apply_overrides, read_config  # noqa: E402
from memtune.inputs.hf_config import read_hf_config  # noqa: E402
from memtune.inputs.launch_env import read_env  # noqa: E402
from memtune.inputs.megatron_args import read_megatron_args  # noqa: E402
from memtune.inputs.oom_log import parse_log  # noqa: E402
from memtune.inputs.question import parse_question  # noqa: E402
from memtune.inputs.snapshot import analyze_snapshot  # noqa: E402
from memtune.inputs.stats import read_memory_stats  # noqa: E402

FIX = ROOT / "tests" / "fixtures"
KB = knowledge.load()

# Tokens that broke a reader once: deep nesting, huge and unphysical numbers, control bytes, YAML tags.
HOSTILE = ["[" * 3000, "{" * 3000, "(" * 3000, "9" * 5000, "-1", "0", "-0", "nan", "inf", "1e999", "-9" * 30,
           "\x00", "\x1b[31m", "\ufeff", "\r", "!!python/object:os.system", "&a [*a, *a]", "*a", "%", "${X}",
           "'", '"', "\\", "|", ">", "- ", ": ", "\t", "GiB", "Tried to allocate ", "--", "=", ",", "\n"]


def _mutate(rnd: random.Random, data: str) -> str:
    for _ in range(rnd.randint(1, 3)):
        i = rnd.randint(0, len(data))
        j = min(len(data), i + rnd.randint(0, 40))
        op = rnd.randrange(6)
        if op == 0:
            data = data[:i] + rnd.choice(HOSTILE) + data[i:]
        elif op == 1:
            data = data[:i] + data[j:]
        elif op == 2:
            data = data[:i] + data[i:j] * rnd.randint(2, 5) + data[j:]
        elif op == 3:
            data = data[:i] + "".join(chr(rnd.randint(0, 0x2FFF)) for _ in range(rnd.randint(1, 8))) + data[i:]
        elif op == 4:
            data = data[:i]
        else:
            data = "".join(rnd.choice(HOSTILE) if c.isdigit() and rnd.random() < 0.1 else c for c in data)
    return data


def _hostile_value(rnd: random.Random) -> Any:
    deep: Any = []
    for _ in range(rnd.choice([10, 3000])):
        deep = [deep]
    return rnd.choice([10**5000, -(2**70), -1, 0, float("nan"), float("inf"), "x" * 10_000, None, deep, {}, [],
                       True, "active_allocated", 2**63])


def _mutate_tree(rnd: random.Random, tree: Any) -> Any:
    if isinstance(tree, dict) and tree:
        key = rnd.choice(list(tree))
        out = dict(tree)
        out[key] = _hostile_value(rnd) if rnd.random() < 0.3 else _mutate_tree(rnd, tree[key])
        return out
    if isinstance(tree, list) and tree:
        i = rnd.randrange(len(tree))
        out = list(tree)
        out[i] = _hostile_value(rnd) if rnd.random() < 0.3 else _mutate_tree(rnd, tree[i])
        if rnd.random() < 0.2:
            out = out * rnd.randint(2, 4)
        return out
    return _hostile_value(rnd)


class Escape(Exception):
    """A damaged input that got past a reader: a traceback, a multi-line refusal or a wrong result type."""


def _holds(call: Callable[[], Any], result_type: type) -> None:
    try:
        result = call()
    except UserError as exc:
        message = str(exc)
        if not message.strip() or "\n" in message or "\r" in message:
            raise Escape(f"refusal is not one line: {message[:200]!r}") from None
        return
    if not isinstance(result, result_type):
        raise Escape(f"returned {type(result).__name__}, not {result_type.__name__}")


def _texts(paths: list[Path]) -> list[str]:
    return [p.read_text(encoding="utf-8", errors="replace") for p in paths]


def _snapshot_trees() -> list[Any]:
    sys.path.insert(0, str(FIX / "snapshots"))
    import make_snapshots

    return list(make_snapshots.snapshots().values())


LOGS = _texts(sorted((FIX / "logs").glob("*.log")))
CONFIGS = {p.suffix: [] for p in (FIX / "configs").iterdir()}
for _p in sorted((FIX / "configs").iterdir()):
    CONFIGS[_p.suffix].append(_p.read_text(encoding="utf-8", errors="replace"))
QUESTIONS = ["Llama3-70B SFT on 32xH100, TP4 PP4, OOMs at 58.8 GB",
             "DeepSeek-V3 pretraining on 256 H200, EP 64 PP 16, seq 4096, micro batch 1, CUDA OOM in backward",
             "Qwen3-30B-A3B LoRA 在 8 张 A100-80GB 上 OOM，TP2，序列长度 8192，怎么办？",
             "显存不足，LoRA + 序列并行 怎么省显存？ Tried to allocate 2.00 GiB, 79.2 GiB total, MBS=2 GBS=128"]
ENV = ["PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,max_split_size_mb:512", "NCCL_GRAPH_REGISTER=0",
       "CUDA_DEVICE_MAX_CONNECTIONS=1", "NCCL_NVLS_ENABLE=0"]
OVERRIDES = ["model.tensor_model_parallel_size=4", "train.micro_batch_size=2", "model.recompute_modules=[core_attn]",
             "+model.cuda_graph_scope=[attn,moe]", "~model.sequence_parallel", "model.seq_length=8192"]
LAUNCH = [t for t in CONFIGS.get(".sh", [])] or ["torchrun pretrain_gpt.py --tensor-model-parallel-size 2"]


def _log(rnd, tmp):
    text = _mutate(rnd, rnd.choice(LOGS))
    _holds(lambda: parse_log(text.splitlines(keepends=True), KB), LogFacts)


def _yaml(rnd, tmp):
    path = tmp / "run_config.yaml"
    path.write_text(_mutate(rnd, rnd.choice(CONFIGS[".yaml"])), encoding="utf-8", errors="replace")
    _holds(lambda: read_config(path, kb=KB), TrainingConfig)


def _launch(rnd, tmp):
    text = _mutate(rnd, rnd.choice(LAUNCH))
    _holds(lambda: read_megatron_args(text, "launch.sh", kb=KB), TrainingConfig)


def _hf(rnd, tmp):
    path = tmp / "config.json"
    seeds = CONFIGS[".json"]
    if rnd.random() < 0.5:
        text = _mutate(rnd, rnd.choice(seeds))
    else:
        try:
            text = json.dumps(_mutate_tree(rnd, json.loads(rnd.choice(seeds))))
        except (ValueError, RecursionError):
            text = "{}"
    path.write_text(text, encoding="utf-8", errors="replace")
    _holds(lambda: read_hf_config(path, KB), TrainingConfig)


STATS = json.dumps({"reserved_bytes.all.peak": 75161927680, "allocated_bytes.all.peak": 60129542144,
                    "inactive_split_bytes.all.current": 9663676416, "num_alloc_retries": 12, "num_ooms": 1})


def _stats(rnd, tmp):
    path = tmp / "stats.json"
    text = _mutate(rnd, STATS) if rnd.random() < 0.5 else _tree_json(rnd, json.loads(STATS))
    path.write_text(text, encoding="utf-8", errors="replace")
    _holds(lambda: read_memory_stats(path), dict)


def _tree_json(rnd, tree):
    try:
        return json.dumps(_mutate_tree(rnd, tree))
    except (ValueError, RecursionError):
        return "{}"


SNAPSHOTS = _snapshot_trees()


def _snapshot(rnd, tmp):
    path = tmp / "snap.pickle"
    tree = rnd.choice(SNAPSHOTS)
    try:
        data = pickle.dumps(_mutate_tree(rnd, tree), protocol=rnd.choice([2, 4, 5]))
    except (RecursionError, ValueError):
        data = b"\x80\x04N."
    if rnd.random() < 0.3:
        i = rnd.randrange(len(data))
        data = data[:i] + bytes([rnd.randrange(256)]) + data[i + 1:]
    path.write_bytes(data)
    _holds(lambda: analyze_snapshot(path), dict)


def _question(rnd, tmp):
    text = _mutate(rnd, rnd.choice(QUESTIONS))
    _holds(lambda: parse_question(text, KB), QuestionFacts)


def _env(rnd, tmp):
    pairs = [_mutate(rnd, rnd.choice(ENV)) for _ in range(rnd.randint(1, 3))]
    _holds(lambda: read_env(pairs, kb=KB), EnvFacts)


def _overrides(rnd, tmp):
    items = [_mutate(rnd, rnd.choice(OVERRIDES)) for _ in range(rnd.randint(1, 3))]
    _holds(lambda: apply_overrides(TrainingConfig(), items, KB), TrainingConfig)


READERS = {"oom log": _log, "bridge yaml": _yaml, "launch script": _launch, "hf config": _hf,
           "memory stats": _stats, "snapshot": _snapshot, "question": _question, "env pairs": _env,
           "overrides": _overrides}


def run(name: str, cases: int, seed: int, tmp: Path, keep: int = 5) -> dict[str, Any]:
    """Feed ``cases`` damaged inputs to one reader; the counts and the first ``keep`` escapes."""
    rnd = random.Random(seed)
    refused = escaped = 0
    escapes: list[dict[str, Any]] = []
    started = time.perf_counter()
    for case in range(cases):
        try:
            READERS[name](rnd, tmp)
        except Escape as exc:
            escaped += 1
            if len(escapes) < keep:
                escapes.append({"case": case, "problem": str(exc)})
        except UserError:  # pragma: no cover - _holds catches these
            refused += 1
        except Exception as exc:  # noqa: BLE001 - every other exception is what this run looks for
            escaped += 1
            if len(escapes) < keep:
                frame = traceback.extract_tb(exc.__traceback__)[-1]
                escapes.append({"case": case, "problem": f"{type(exc).__name__}: {str(exc)[:200]} "
                                f"({Path(frame.filename).name}:{frame.lineno})"})
    return {"reader": name, "seed": seed, "cases": cases, "escaped": escaped, "escapes": escapes,
            "seconds": round(time.perf_counter() - started, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000, help="damaged inputs per reader (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="base seed; reader i uses seed + i (default 0)")
    parser.add_argument("--reader", choices=sorted(READERS), action="append", help="only this reader (repeatable)")
    parser.add_argument("--format", choices=["text", "json"], default="text")
    args = parser.parse_args(argv)
    names = sorted(READERS)
    reports = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, name in enumerate(names):
            if args.reader and name not in args.reader:
                continue
            reports.append(run(name, args.cases, args.seed + i, Path(tmp)))
    if args.format == "json":
        print(json.dumps({"readers": reports}, indent=1))
    else:
        for r in reports:
            print(f"{r['reader']:14} seed {r['seed']:<4} {r['cases']} cases  {r['escaped']} escaped  {r['seconds']} s")
            for e in r["escapes"]:
                print(f"    case {e['case']}: {e['problem']}")
    return 1 if any(r["escaped"] for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
