"""``--output`` and ``--html`` write a new file whole or not at all (adversarial review, issue 28 item 3).

A full disk used to leave a truncated answer that then blocked the path ("file exists"); a non-UTF-8 file name
or a lone surrogate (a snapshot frame, a YAML "\\ud800" escape) ended in exit 3 with a 0-byte page.  Each attack
is replayed here with real inputs; only the full disk is simulated, by an ``os.write`` that fails midway.
"""

from __future__ import annotations

import copy
import errno
import os
import pickle
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SKILL
from memtune import atomicfile
from memtune.cli import main

EXAMPLES = SKILL / "examples"
CONFIG = EXAMPLES / "llama3-70b-sft-config.yaml"
LOG = EXAMPLES / "llama3-70b-fragmentation.log"


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("memtune: error: ") and "\n" not in err, err
    return err


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(atomicfile.TEMP_PREFIX))


@pytest.fixture
def full_disk(monkeypatch):
    """os.write that writes half of what it is given, then fails with ENOSPC: a disk that fills up midway."""
    real = os.write
    calls = {"n": 0}

    def write(fd, data):
        calls["n"] += 1
        if calls["n"] == 1:
            return real(fd, bytes(data[: max(1, len(data) // 2)]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", write)
    return monkeypatch


@pytest.mark.parametrize("argv, option", [
    (["diagnose", "--log", str(LOG), "--output"], "--output"),
    (["diagnose", "--log", str(LOG), "--format", "json", "--output"], "--output"),
    (["estimate", "--config", str(CONFIG), "--html"], "--html"),
])
def test_a_full_disk_leaves_no_file_and_the_rerun_succeeds(argv, option, full_disk, tmp_path, capsys):
    target = tmp_path / "answer.out"
    assert main([*argv, str(target)]) == 2
    err = _one_line_error(capsys)
    assert option in err and "No space left on device" in err
    assert not os.path.lexists(target), "no truncated answer at the final name"
    assert _leftovers(tmp_path) == []
    full_disk.undo()
    assert main([*argv, str(target)]) == 0, "the path is not blocked by the failed attempt"
    capsys.readouterr()
    assert target.stat().st_size > 0


def test_a_plan_written_in_chunks_is_whole_or_absent(full_disk, tmp_path, capsys, monkeypatch):
    from memtune.render import plan as render_plan

    monkeypatch.setattr(render_plan, "ROWS_PER_CHUNK", 7)
    monkeypatch.setattr(atomicfile, "_FLUSH_BYTES", 64)  # many writes: the failure lands after some went out
    target = tmp_path / "plan.json"
    argv = ["plan", "--model", "llama3-8b", "--gpu", "H100", "--gpus", "4", "--seq-length", "4096",
            "--global-batch-size", "16", "--all", "--format", "json", "--output", str(target)]
    assert main(argv) == 2
    assert "No space left on device" in _one_line_error(capsys)
    assert not os.path.lexists(target) and _leftovers(tmp_path) == []


def test_existing_paths_of_every_kind_are_still_refused(tmp_path, capsys):
    kept = tmp_path / "kept.html"
    kept.write_text("keep", encoding="utf-8")
    dangling = tmp_path / "dangling.html"
    dangling.symlink_to(tmp_path / "nowhere")
    fifo = tmp_path / "fifo.html"
    os.mkfifo(fifo)
    for target in (kept, dangling, fifo, tmp_path):
        assert main(["estimate", "--config", str(CONFIG), "--html", str(target)]) == 2
        assert "file exists" in _one_line_error(capsys)
    assert kept.read_text(encoding="utf-8") == "keep" and not (tmp_path / "nowhere").exists()
    assert _leftovers(tmp_path) == []


def test_a_race_for_the_name_is_lost_without_overwriting(tmp_path, capsys, monkeypatch):
    """The name appears between the early check and the link: link() refuses it, the other file is kept."""
    target = tmp_path / "page.html"
    real = atomicfile._link

    def racing(tmp, path):
        path.write_text("theirs", encoding="utf-8")
        real(tmp, path)

    monkeypatch.setattr(atomicfile, "_link", racing)
    assert main(["estimate", "--config", str(CONFIG), "--html", str(target)]) == 2
    assert "file exists" in _one_line_error(capsys)
    assert target.read_text(encoding="utf-8") == "theirs" and _leftovers(tmp_path) == []


def test_without_hard_links_the_name_is_reserved_then_replaced(tmp_path, capsys, monkeypatch):
    def no_links(src, dst, **_):
        raise OSError(errno.EPERM, os.strerror(errno.EPERM))

    monkeypatch.setattr(os, "link", no_links)
    target = tmp_path / "page.html"
    assert main(["estimate", "--config", str(CONFIG), "--html", str(target)]) == 0
    capsys.readouterr()
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>") and _leftovers(tmp_path) == []


# --------------------------------------------------------------------------- text UTF-8 cannot hold


def _surrogate_error(capsys, option: str) -> None:
    err = _one_line_error(capsys)
    assert option in err and "UTF-8" in err and "internal error" not in err


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS file systems refuse non-UTF-8 names")
def test_a_non_utf8_log_name_is_bad_input_and_leaves_no_page(tmp_path, capsys):
    odd = Path(os.fsdecode(bytes(tmp_path / "run") + b"\xff.log"))  # a real file named with byte 0xFF
    odd.write_bytes(LOG.read_bytes())
    page = tmp_path / "page.html"
    assert main(["compare", str(odd), str(LOG), "--html", str(page)]) == 2
    _surrogate_error(capsys, "--html")
    assert not os.path.lexists(page) and _leftovers(tmp_path) == []


def test_a_lone_surrogate_in_a_snapshot_frame_leaves_no_page(tmp_path, capsys):
    sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "snapshots"))
    import make_snapshots

    snap = copy.deepcopy(make_snapshots.dict_snapshot())  # its frame lists are shared module constants

    def walk(node):
        if isinstance(node, dict):
            if node.get("filename") == "/workspace/train.py":
                node["filename"] = "/workspace/tr\ud800ain.py"
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(snap)
    source = tmp_path / "surrogate.pickle"
    source.write_bytes(pickle.dumps(snap))
    page = tmp_path / "snap.html"
    assert main(["snapshot", str(source), "--html", str(page)]) == 2
    _surrogate_error(capsys, "--html")
    assert not os.path.lexists(page) and _leftovers(tmp_path) == []


def test_a_yaml_surrogate_escape_leaves_no_page(tmp_path, capsys):
    """The unknown section's name reaches the page as a warning; YAML decodes "\\ud800" to a lone surrogate."""
    config = tmp_path / "surrogate.yaml"
    config.write_text('model:\n  model_name: llama3-70b\n  seq_length: 4096\n"sec\\ud800": 1\n', encoding="utf-8")
    page = tmp_path / "est.html"
    assert main(["estimate", "--config", str(config), "--html", str(page)]) == 2
    _surrogate_error(capsys, "--html")
    assert not os.path.lexists(page) and _leftovers(tmp_path) == []


def test_stdout_that_cannot_encode_the_answer_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    """Under a strict UTF-8 locale (PYTHONIOENCODING=utf-8:strict, or en_US.UTF-8) a surrogate on stdout."""
    import io

    config = tmp_path / "surrogate.yaml"
    config.write_text('model:\n  model_name: llama3-70b\n  seq_length: 4096\n"sec\\ud800": 1\n', encoding="utf-8")
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="utf-8", errors="strict"))
    assert main(["estimate", "--config", str(config)]) == 2
    sys.stdout.flush()
    assert raw.getvalue() == b"", "nothing of the refused answer went out"
    _surrogate_error(capsys, "stdout")
