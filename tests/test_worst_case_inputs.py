"""Crafted worst cases: every log pattern and reader stays near-linear, and the bombs end fast and small.

Issue 10 found log patterns that backtracked (7 s to > 60 s on 20-90 KB), a 10-byte pickle that
took 4 GB, a 456-byte YAML that took 6.5 GB, and quadratic layout and typo-hint code.  The cases
here are built the way ReDoS checkers build them, a prefix the pattern needs and then one short
"pump" repeated to 1 MB, so a pattern that retries from every repetition is caught whatever it is.
The two sweeps over every pattern and every signature line run in full as CI's own step
(MEMTUNE_FULL_SWEEPS=1, see conftest.sweep); the suite takes an even sample of each.
"""

from __future__ import annotations

import dataclasses
import pickle
import re
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import read_kb, sweep
from memtune import knowledge
from memtune.errors import UserError
from memtune.inputs import oom_log
from memtune.inputs.config import read_config
from memtune.inputs.megatron_args import layout_stages

ROOT = Path(__file__).resolve().parents[1]
SKILL = ROOT / "skills" / "nemo-mbridge-perf-memory-tuning"  # the folder users install
MB = 1 << 20
KB = knowledge.load()
PUMPS = ["a", "1", " ", "a.", "1.", "a ", "a: ", "aB", "a-", "(a", "=1", "|a"]
LIMIT_S = 1.0


def _patterns() -> dict[str, re.Pattern[str]]:
    """Every compiled pattern the log scanner runs, by the first place it sits in oom_log.Patterns (one pattern is
    often reachable from several: ``by_id.<signature>.regex`` and ``line[i].regex``; it is checked once)."""
    found: dict[str, re.Pattern[str]] = {}

    def walk(obj: object, where: str) -> None:
        if isinstance(obj, oom_log.LazyPattern):  # compiled on first use; checked compiled
            found.setdefault(where, obj.compile())
        elif isinstance(obj, re.Pattern):
            found.setdefault(where, obj)
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            for f in dataclasses.fields(obj):
                walk(getattr(obj, f.name), f"{where}.{f.name}")
        elif isinstance(obj, (tuple, list)):
            for i, item in enumerate(obj):
                walk(item, f"{where}[{i}]")
        elif isinstance(obj, dict):
            for key, item in obj.items():
                walk(item, f"{where}.{key}")

    walk(oom_log.compile_signatures(KB, eager=True), "patterns")
    first: dict[tuple[str, int], str] = {}
    for where in sorted(found):
        first.setdefault((found[where].pattern, found[where].flags), where)
    return {where: found[where] for where in first.values()}


PATTERNS = _patterns()


def _literal(pattern: str) -> str:
    """The longest literal run in a pattern: the prefix that gets a search into the pattern's body."""
    runs = [re.sub(r"\\(.)", r"\1", r) for r in re.findall(r"(?:\\.|[^\\()\[\]{}?*+|^$.])+", pattern)]
    return max(runs, key=len, default="")


def _timed(call) -> float:
    """CPU seconds of this process: the work a pattern does, whatever else the machine is running (CI shares it)."""
    started = time.process_time()
    call()
    return time.process_time() - started


def test_there_are_patterns_to_check():
    assert len(PATTERNS) > 80
    assert len({(p.pattern, p.flags) for p in PATTERNS.values()}) == len(PATTERNS)


def assert_fast_or_linear(seconds_at, size: int, what: str) -> None:
    """Input of ``size`` handled in LIMIT_S, or else growing linearly: a bounded scan per position (such as
    ``[A-Za-z ]{0,80}?``) is linear with a large constant and crosses a fixed bound on a slow day, while a
    backtracking one grows with the square (x16 from a quarter of the input) and soon takes minutes."""
    spent = seconds_at(size)
    if spent > LIMIT_S:
        quarter = seconds_at(size // 4)
        assert spent < 8 * quarter, f"{what}: {spent:.2f} s, a quarter of it {quarter:.2f} s (x16 is quadratic)"
        assert spent <= 4 * LIMIT_S, f"{what}: {spent:.2f} s"


SCREEN = 8  # the screen runs an eighth of the input: growing as the square, it would take 64x as long at full size


def screened(seconds_at, size: int) -> bool:
    """True when an eighth of the input ends so fast that even growth with the square keeps the whole input
    inside LIMIT_S: the full-size run (the slow part of this file) is then known to pass and is skipped.
    Whatever is slower at an eighth, linear with a large constant or backtracking, gets the full check."""
    return seconds_at(size // SCREEN) * SCREEN**2 <= LIMIT_S


def assert_screened_fast_or_linear(seconds_at, size: int, what: str) -> None:
    if not screened(seconds_at, size):
        assert_fast_or_linear(seconds_at, size, what)


def test_the_bound_tells_a_slow_linear_scan_from_a_quadratic_one():
    assert_fast_or_linear(lambda n: 0.5 * n / MB, MB, "fast")
    assert_fast_or_linear(lambda n: 1.5 * n / MB, MB, "linear, slow day")
    with pytest.raises(AssertionError, match="quadratic"):
        assert_fast_or_linear(lambda n: 2.0 * (n / MB) ** 2, MB, "quadratic")
    with pytest.raises(AssertionError):
        assert_fast_or_linear(lambda n: 6.0 * n / MB, MB, "linear but minutes on 10 MB")


def test_the_screen_skips_only_what_cannot_cross_the_bound():
    sizes: list[int] = []

    def linear(n: int) -> float:
        sizes.append(n)
        return 0.1 * n / MB

    assert screened(linear, MB) and sizes == [MB // SCREEN]  # 12.5 ms at an eighth: no full-size run
    assert not screened(lambda n: 1.5 * (n / MB) ** 2, MB)  # 23 ms at an eighth, but 1.5 s at full size
    with pytest.raises(AssertionError, match="quadratic"):
        assert_screened_fast_or_linear(lambda n: 2.0 * (n / MB) ** 2, MB, "quadratic")
    assert_screened_fast_or_linear(lambda n: 1.5 * n / MB, MB, "linear, slow day: screened out, then checked")


def _scan_seconds(regex: re.Pattern[str], prefix: str, pump: str, size: int) -> float:
    text = prefix + pump * (size // len(pump))
    return _timed(lambda: (regex.search(text), regex.match(text)))


@pytest.mark.parametrize("where", sweep(sorted(PATTERNS), 5))
def test_every_log_pattern_is_linear_on_pumped_input(where):
    regex = PATTERNS[where]
    cases = [(prefix, pump) for prefix in {"", _literal(regex.pattern)} for pump in PUMPS]
    for prefix, pump in cases:
        assert_screened_fast_or_linear(lambda size: _scan_seconds(regex, prefix, pump, size), MB,  # noqa: B023
                                       f"{where} on {prefix[:30]!r} + {pump!r} * n: {regex.pattern[:120]}")


def _examples() -> list[str]:
    texts: list[str] = []

    def walk(obj: object) -> None:
        if isinstance(obj, dict):
            for key, value in obj.items():
                if key == "text" and isinstance(value, str) and value.strip():
                    texts.append(value.splitlines()[0])
                else:
                    walk(value)
        elif isinstance(obj, list):
            for item in obj:
                walk(item)

    walk(read_kb("signatures"))
    return texts


def _repeated_lines() -> list[tuple[str, str]]:
    """Each signature example's text cut short three ways, as the line ``head + tail * n``: its first half
    repeated, its first two words repeated, and, when it has a digit, its text up to that digit then digits.
    Examples that share a start give the same line; each line is checked once."""
    lines: dict[tuple[str, str], None] = {}
    for example in _examples():
        lines.setdefault(("", example[: max(1, len(example) // 2)] + " "))
        lines.setdefault(("", " ".join(example.split()[:2]) + " "))
        digit = re.search(r"\d", example)
        if digit:
            lines.setdefault((example[: digit.start()], "9"))
    return list(lines)


def _line(head: str, tail: str, size: int) -> str:
    return head + tail * (size // len(tail))


@pytest.mark.parametrize("head, tail", [pytest.param(*line, id=_line(*line, 40))
                                        for line in sweep(_repeated_lines(), 5)])
def test_whole_scanner_is_fast_on_a_repeated_signature_line(head, tail):
    """One 1 MB line of a signature's own text cut short and repeated: no match completes, all retry."""
    assert_screened_fast_or_linear(lambda n: _timed(lambda: oom_log.parse_log([_line(head, tail, n) + "\n"], KB)),
                                   MB, _line(head, tail, 80)[:80])


# --------------------------------------------------------------------------- config readers


def _config_cases(scale: float = 1.0) -> dict[str, str]:
    """The crafted files; ``scale`` < 1 shrinks every repeated part (the bound's linear-growth check)."""
    n = int((512 * 1024 - 64) * scale)  # at 1: just under the text-input cap, the largest file the readers accept
    deep = int(100_000 * scale)
    return {
        "long-scalar.yaml": "model:\n  tensor_model_parallel_size: 2\n  x: '" + "a" * n + "'\n",
        "flow-list.yaml": "model:\n  x: [" + "1," * (n // 2) + "1]\n",
        "near-miss-keys.yaml": "model:\n" + "".join(f"  tensor_model_paralel_siz{i}: 1\n" for i in range(n // 34)),
        "nested-flow.yaml": "model:\n  x: " + "[" * (n // 2) + "]" * (n // 2) + "\n",
        "comment.yaml": "# " + "a" * n + "\nmodel:\n  seq_length: 4\n",
        "oversized.yaml": "model:\n  x: 1\n" + "#" * (4 * n),
        "launch.sh": "#!/bin/bash\ntorchrun pretrain_gpt.py " + "--num-layers 4 " * (n // 32),
        "layout.sh": "#!/bin/bash\ntorchrun pretrain_gpt.py --pipeline-model-parallel-layout '"
                     + "(" * deep + "t" + ")" * deep + "'\n",
        "hf.json": '{"model_type": "llama", "x": ' + "[" * deep + "]" * deep + "}",
    }


@pytest.mark.parametrize("name", sorted(_config_cases()))
def test_config_readers_are_fast_on_crafted_files(name, tmp_path):
    def seconds_at(size: int) -> float:
        path = tmp_path / f"{size}-{name}"
        path.write_text(_config_cases(size / MB)[name])

        def read() -> None:
            try:
                read_config(path, kb=KB)
            except UserError as exc:
                assert "\n" not in str(exc)

        read()  # once untimed: first-use costs (lazy imports, pattern compilation) are not what this bounds
        return _timed(read)

    assert_fast_or_linear(seconds_at, MB, name)


def test_layout_with_deep_parentheses_is_linear():
    text = "(" * 200_000 + "t|" + ")" * 200_000
    assert _timed(lambda: layout_stages(text)) <= 0.2


# --------------------------------------------------------------------------- bombs, end to end


def _bombs(tmp_path: Path) -> dict[str, list[str]]:
    memo = tmp_path / "memo.pickle"  # LONG_BINPUT with index 2**30: the C unpickler would size its memo 16 GB
    memo.write_bytes(b"\x80\x02]r" + struct.pack("<I", 2**30) + b".")
    frames = [{"filename": "/x/megatron/core/a.py", "line": 1, "name": "f"}] * 4000
    block = {"size": 1, "state": "active_allocated", "frames": frames}
    shared = tmp_path / "shared.pickle"  # 4000 refs to one segment of 4000 refs to one block of 4000 frames
    shared.write_bytes(pickle.dumps({"segments": [{"total_size": 1, "blocks": [block] * 4000}] * 4000,
                                     "device_traces": []}, protocol=4))
    laughs = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        laughs.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    yaml_bomb = tmp_path / "laughs.yaml"
    yaml_bomb.write_text("model:\n  tensor_model_parallel_size: 1\n" + "\n".join(laughs) + "\n")
    return {"pickle memo index": ["snapshot", str(memo)], "pickle shared references": ["snapshot", str(shared)],
            "yaml billion laughs (estimate)": ["estimate", "--config", str(yaml_bomb)],
            "yaml billion laughs (apply dry run)": ["apply", "selective-recompute", "--to", str(yaml_bomb)]}


# Runs memtune in this process image and reports its own peak (VmHWM belongs to the address space
# made at exec; ru_maxrss would also count the pytest pages a forked child starts with).
_MEASURED = """
import runpy, sys
out, sys.argv = sys.argv[1], sys.argv[2:]
code = 0
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as exc:
    code = exc.code
peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
open(out, "w").write(peak.split()[1])
sys.exit(code)
"""


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="peak memory read from /proc (Linux)")
def test_bombs_end_in_two_seconds_and_200_mb_with_one_line(tmp_path):
    peak_file = tmp_path / "peak-kib"
    for what, argv in _bombs(tmp_path).items():
        started = _children_cpu()
        done = subprocess.run([sys.executable, "-c", _MEASURED, str(peak_file), str(SKILL / "scripts" / "memtune.py"),
                               *argv], capture_output=True, text=True, timeout=60)
        spent = _children_cpu() - started  # CPU seconds, start-up included: a loaded CI machine does not flake it
        assert done.returncode == 2, (what, done.stderr[-300:])
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, what
        assert spent <= 2.0, f"{what}: {spent:.1f} s"
        peak_mb = int(peak_file.read_text()) / 1024
        assert peak_mb <= 200, f"{what}: {peak_mb:.0f} MB"
