"""One presentation layer (issue 11, item 4): every command's output is laid out in memtune/render/, with
labels from the one table knowledge/ui.yaml, in English and Chinese.

The source checks read the code's syntax tree, so they hold for code added later: a module outside
render/ that prints, writes to stdout/stderr, or lays out JSON fails here.
"""

from __future__ import annotations

import ast
import json
import re

import pytest
from conftest import SKILL, parsed
from memtune import cli, knowledge

PACKAGE = SKILL / "scripts" / "memtune"
RENDER = PACKAGE / "render"
# json.dumps outside render/ that encode files, never output, each with why.
FILE_ENCODERS = {
    "knowledge.py": "the cache of the parsed tables every command loads ($HOME/.cache/memtune)",
    "actions/journal.py": "the private record of the backups apply made",
    "actions/apply.py": "a value written into a launch script or YAML config",
}
EXAMPLES = SKILL / "examples"


def modules_outside_render():
    for path in sorted(PACKAGE.rglob("*.py")):
        if RENDER not in path.parents:
            yield path.relative_to(PACKAGE).as_posix(), parsed(path)


def _calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node


def test_no_module_outside_render_prints_or_writes_output():
    found = []
    for name, tree in modules_outside_render():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                found.append(f"{name}:{node.lineno} print()")
            if (isinstance(node, ast.Attribute) and node.attr in ("stdout", "stderr")
                    and isinstance(node.value, ast.Name) and node.value.id == "sys"):
                found.append(f"{name}:{node.lineno} sys.{node.attr}")
    assert not found, f"output outside memtune/render/ (use render.out): {found}"


def test_json_is_laid_out_only_in_render_or_for_files():
    found = []
    for name, tree in modules_outside_render():
        for node in _calls(tree):
            func = node.func
            if (isinstance(func, ast.Attribute) and func.attr in ("dump", "dumps")
                    and isinstance(func.value, ast.Name) and func.value.id == "json" and name not in FILE_ENCODERS):
                found.append(f"{name}:{node.lineno} json.{func.attr}")
    assert not found, f"JSON output laid out outside memtune/render/ (use render.out.json_text): {found}"
    for name in FILE_ENCODERS:  # the exceptions stay true: each still encodes something
        assert "json.dump" in (PACKAGE / name).read_text(encoding="utf-8"), f"{name}: drop it from FILE_ENCODERS"


def test_labels_are_read_only_in_render():
    """Only render/ looks labels up; no other table carries a label list."""
    found = []
    for name, tree in modules_outside_render():
        for node in _calls(tree):
            args = [a.value for a in node.args if isinstance(a, ast.Constant)]
            if isinstance(node.func, ast.Attribute) and node.func.attr in ("entries", "get") and "ui" in args:
                found.append(f"{name}:{node.lineno}")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("labels"):
                found.append(f"{name}:{node.lineno} imports labels")
    assert not found, f"labels read outside memtune/render/: {found}"
    kb = knowledge.load()
    holders = [t for t, doc in kb.tables.items() if t != "ui" and isinstance(doc, dict) and "labels" in doc]
    assert not holders, f"label lists outside ui.yaml: {holders}"


def _literal_label_ids() -> set[str]:
    """Label ids the renderers and templates look up by a literal: t["id"], t['id'], t.get("id")."""
    pattern = re.compile(r"""\bt\[\s*["']([a-z0-9-]+)["']\s*\]""")
    ids: set[str] = set()
    for path in [*RENDER.glob("*.py"), *(RENDER / "templates").glob("*.j2")]:
        ids |= set(pattern.findall(path.read_text(encoding="utf-8")))
    return ids


def test_every_label_looked_up_exists_in_both_languages():
    kb = knowledge.load()
    table = {row["id"]: row["text"] for row in kb.entries("ui")}
    prefixed = {"plan.py": "plan-"}  # render/plan.py looks its labels up without the prefix
    missing = []
    for ident in _literal_label_ids():
        if ident not in table and not any(f"{p}{ident}" in table for p in prefixed.values()):
            missing.append(ident)
    assert not missing, f"labels looked up but not in knowledge/ui.yaml: {sorted(missing)}"
    assert all(text["en"].strip() and text["zh"].strip() for text in table.values())
    placeholders = re.compile(r"{(\w+)}")
    for ident, text in table.items():  # a translation fills the same blanks
        assert set(placeholders.findall(text["en"])) == set(placeholders.findall(text["zh"])), ident


def test_every_command_takes_lang():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    lacking = []
    for name, command in sub.choices.items():
        nested = [a for a in command._actions if getattr(a, "choices", None) and a.dest == "kb_command"]
        parsers = list(nested[0].choices.values()) if nested else [command]
        for p in parsers:
            lang = [a for a in p._actions if "--lang" in a.option_strings]
            if not lang or set(lang[0].choices) != {"en", "zh"}:
                lacking.append(f"{name} {p.prog}")
    assert not lacking, f"commands without --lang en|zh: {lacking}"


def _run(argv, capsys) -> str:
    code = cli.main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    return captured.out


CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def snapshot_file(snapshot_files):
    return next(iter(snapshot_files.values()))


COMMANDS = {
    "diagnose": ["diagnose", "--log", EXAMPLES / "llama3-70b-fragmentation.log", "--gpu", "H100-80GB"],
    "estimate": ["estimate", "--config", EXAMPLES / "llama3-70b-sft-config.yaml", "--gpu", "H100"],
    "plan": ["plan", "--model", "llama3-8b", "--gpu", "H100", "--gpus", "8", "--seq-length", "4096",
             "--global-batch-size", "32", "--top", "1"],
    "check": ["check", "--config", EXAMPLES / "llama3-70b-sft-config.yaml"],
    "verify": ["verify", "--list"],
    "kb": ["kb", "validate"],
    "explain": ["explain", "expandable-segments"],
    "compare": ["compare", EXAMPLES / "llama3-70b-sft-config.yaml", "--set", "model.seq_length=8192"],
}


@pytest.mark.parametrize("name", [*COMMANDS, "snapshot"])
def test_text_answers_follow_lang(name, capsys, snapshot_file):
    argv = COMMANDS.get(name) or ["snapshot", snapshot_file]
    en = _run([*argv, "--lang", "en"], capsys)
    zh = _run([*argv, "--lang", "zh"], capsys)
    assert en and zh and en != zh
    assert CJK.search(zh), f"{name} --lang zh has no Chinese label"
    if name != "explain":  # explain prints the entry itself, whose zh texts are part of it
        assert not CJK.search(en), f"{name} --lang en shows Chinese text"


def test_check_rows_carry_title_and_where_upstream_raises(capsys):
    doc = json.loads(_run([*COMMANDS["check"], "--format", "json"], capsys))
    kb = knowledge.load()
    for row in doc["violations"]:
        con = kb.get("constraints", row["id"])
        assert row["title"] == con["title"]["en"] and row["raised_at"] == con.get("raised_at")


def test_verify_list_follows_format(capsys):
    doc = json.loads(_run(["verify", "--list", "--format", "json"], capsys))
    kb = knowledge.load()
    assert doc["mode"] == "list" and [c["id"] for c in doc["checks"]] == [s["id"] for s in kb.entries("validations")]
    assert all((c["run"] is not None) == (c["kind"] == "command") for c in doc["checks"])

