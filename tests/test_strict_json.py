"""No answer holds NaN or Infinity (adversarial review, issue 28 item 5).

A memory-report line with ``allocated: 1e999`` (or a number thousands of digits long) used to become
``Infinity`` in ``--format json`` - which strict parsers reject - and ``-inf`` in the SVG.  The readers now
refuse such a figure with the file and line, as the --stats reader refuses one out of range: a figure no allocator
can report means the line is corrupt, and dropping it silently would let an older report stand in for the
latest one.  A question is free text, so there a figure that is not finite is no figure (as a 100-digit run
already was).  Every JSON answer is written with ``allow_nan=False`` as the last guard.
"""

from __future__ import annotations

import json

import pytest
from conftest import SKILL
from memtune.cli import main
from memtune.errors import UserError
from memtune.inputs.memory_steps import read_memory_steps
from memtune.render.out import json_text

LOG = SKILL / "examples" / "llama3-70b-fragmentation.log"
THOUSAND_DIGITS = "9" * 5000
MEGATRON = ("[Rank 0] (after {it} iterations) memory (MB) | allocated: {alloc} | max allocated: 2000.0 | "
            "reserved: 3000.0 | max reserved: 3000.0")
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {req} MiB. GPU 0 has a total capacity of "
       "79.11 GiB of which 19.44 MiB is free.")


def strict(text: str):
    """json.loads as a strict parser reads it: NaN / Infinity / -Infinity are errors."""
    def refuse(name):
        raise AssertionError(f"{name} in a JSON answer")

    return json.loads(text, parse_constant=refuse)


def _write(tmp_path, name: str, *lines: str):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("lines, bad_line", [
    ([MEGATRON.format(it=1, alloc="1000.0"), MEGATRON.format(it=2, alloc="1e999"), OOM.format(req="224.00")], 2),
    ([MEGATRON.format(it=1, alloc=THOUSAND_DIGITS), OOM.format(req="224.00")], 1),
    ([MEGATRON.format(it=1, alloc="1.5e308")], 1),  # finite, but past float range once in bytes
    ([OOM.format(req="9" * 400 + ".00")], 1),  # the OOM message itself
    (["[Rank 0] (after 2 iterations) memory (GB) | mem-allocated-gigabytes: 44.2 | mem-alloc-retires: 1e999"], 1),
])
def test_a_figure_past_any_size_is_refused_with_its_line(lines, bad_line, tmp_path, capsys):
    log = _write(tmp_path, "train.log", *lines)
    assert main(["diagnose", "--log", str(log), "--format", "json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert err.startswith(f"memtune: error: {log}:{bad_line}: cannot read this line") and "\n" not in err
    assert "64-bit counter" in err and len(err) < 300, "a 5000-digit number is not echoed whole"


def test_compare_of_logs_refuses_it_on_either_reader(tmp_path, capsys, kb):
    bad = _write(tmp_path, "bad.log", MEGATRON.format(it=1, alloc="1000.0"), MEGATRON.format(it=2, alloc="1e999"))
    assert main(["compare", str(LOG), str(bad), "--format", "json", "--html", str(tmp_path / "p.html")]) == 2
    assert f"{bad}:2: cannot read this line" in capsys.readouterr().err
    assert not (tmp_path / "p.html").exists()
    with pytest.raises(UserError, match=r"bad\.log:2: cannot read this line"):
        read_memory_steps(bad, kb)


def test_an_ordinary_log_still_reads_and_its_json_is_strict(capsys):
    assert main(["diagnose", "--log", str(LOG), "--format", "json"]) == 0
    assert strict(capsys.readouterr().out)["causes"]


def test_a_huge_figure_in_a_question_is_no_figure_and_the_answer_is_strict_json(capsys):
    digits = "9" * 99  # the longest run a question keeps as a number
    question = (f"Llama3-70B SFT on 32xH100 OOMs: tried to allocate {digits}.{digits} TiB, "
                f"peak {digits} TiB, 80GB card")
    assert main(["diagnose", "--question", question, "--format", "json"]) == 0
    strict(capsys.readouterr().out)


def test_a_tolerance_past_any_size_is_refused(tmp_path, capsys):
    assert main(["compare", str(LOG), str(LOG), "--tolerance", "1e999MiB"]) == 2
    assert "--tolerance" in capsys.readouterr().err


def test_json_text_refuses_nan_and_names_where_it_is():
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError, match=r"\$\.stages\[1\]\.peak"):
            json_text({"stages": [{"peak": 1.0}, {"peak": bad}]})
    assert strict(json_text({"x": [1.5, None, "inf"]})) == {"x": [1.5, None, "inf"]}


def test_a_plan_with_every_row_is_strict_json(capsys):
    argv = ["plan", "--model", "llama3-8b", "--gpu", "H100", "--gpus", "4", "--seq-length", "4096",
            "--global-batch-size", "16", "--all", "--format", "json"]
    assert main(argv) == 0
    assert strict(capsys.readouterr().out)["all"]["rows"]
