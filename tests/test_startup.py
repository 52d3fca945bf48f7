"""Start-up path: the cache of the parsed knowledge base ($HOME/.cache/memtune) and the lazy command imports.

Timing itself is benchmarks/bench_startup.py (not a test: it depends on the machine); these tests
check what keeps it fast stays correct: the skill ships no generated file, the first load fills the
cache, loading it gives exactly the tables the YAML gives, an edited YAML file still wins, a cache
another user could have written is ignored, and ``diagnose --format json`` imports no validation,
templating or other command's modules.
"""

import dataclasses
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, SKILL, read_yaml, write_yaml
from memtune import cli, knowledge

KB_DIR = SKILL / "knowledge"


def _same(a, b, where="") -> None:
    """Equal values of identical types, dict keys in the same order (so output order cannot change)."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, dict):
        assert list(a) == list(b), f"{where}: keys differ"
        for key in a:
            _same(a[key], b[key], f"{where}/{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), f"{where}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}/{i}")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


@pytest.fixture
def compiled_copy(tmp_path, private_home):
    """A copy of knowledge/ whose cache (in this test's own home) was just written."""
    dst = tmp_path / "knowledge"
    shutil.copytree(KB_DIR, dst)
    knowledge.store_compiled(knowledge.load(str(dst), compiled=False))
    knowledge.load.cache_clear()
    yield dst
    knowledge.load.cache_clear()


def test_the_skill_ships_no_generated_knowledge_file():
    assert not (KB_DIR / "compiled.json").exists()
    assert {p.suffix for p in KB_DIR.iterdir() if p.is_file()} == {".yaml"}


def test_the_first_load_fills_the_cache_and_the_next_uses_it(tmp_path, private_home):
    dst = tmp_path / "knowledge"
    shutil.copytree(KB_DIR, dst)
    assert knowledge.compiled_status(dst) == "missing"
    knowledge.load.cache_clear()
    slow = knowledge.load(str(dst))
    assert knowledge.compiled_status(dst) == "current"
    path = knowledge.compiled_path(dst)
    assert path.is_relative_to(private_home) and oct(path.stat().st_mode & 0o777) == oct(0o600)
    knowledge.load.cache_clear()
    _same(knowledge.load(str(dst)).tables, slow.tables)
    knowledge.load.cache_clear()


def test_compiled_load_equals_yaml_load_table_by_table(compiled_copy):
    assert knowledge.compiled_status(compiled_copy) == "current"
    fast = knowledge.load(str(compiled_copy))
    slow = knowledge.load(str(compiled_copy), compiled=False)
    assert list(fast.tables) == list(slow.tables)
    for name in fast.tables:
        _same(fast.tables[name], slow.tables[name], name)
    _same(fast.index, slow.index, "index")


def test_edited_yaml_makes_the_cache_stale_and_takes_effect(compiled_copy):
    path = compiled_copy / "ui.yaml"
    data = read_yaml(path)
    data["test_marker"] = "edited"
    write_yaml(path, data)
    assert knowledge.compiled_status(compiled_copy) == "stale"
    assert knowledge.load(str(compiled_copy)).tables["ui"]["test_marker"] == "edited"


def test_added_or_removed_source_file_makes_it_stale(compiled_copy):
    (compiled_copy / "extra.yaml").write_text("x: 1\n", encoding="utf-8")
    assert knowledge.compiled_status(compiled_copy) == "stale"
    (compiled_copy / "extra.yaml").unlink()
    assert knowledge.compiled_status(compiled_copy) == "current"
    (compiled_copy / "schema" / "ui.schema.json").unlink()
    assert knowledge.compiled_status(compiled_copy) == "stale"


def test_old_caches_are_pruned(tmp_path, private_home):
    """A knowledge folder that moved or was deleted (a test's copy, an old install) leaves no cache behind."""
    made = []
    parsed = knowledge.load(str(KB_DIR), compiled=False)  # each copy holds the same tables: parsed once
    for i in range(knowledge.CACHES_KEPT + 3):
        dst = tmp_path / f"kb{i}"
        shutil.copytree(KB_DIR, dst)
        made.append(knowledge.store_compiled(dataclasses.replace(parsed, root=dst)))
    left = sorted(knowledge.cache_dir().glob("kb-*.json"))
    assert len(left) == knowledge.CACHES_KEPT and made[-1] in left
    knowledge.load.cache_clear()


def test_corrupt_cache_is_ignored(compiled_copy):
    knowledge.compiled_path(compiled_copy).write_text('{"format": 1, "tables": ', encoding="utf-8")
    assert knowledge.compiled_status(compiled_copy) == "stale"
    assert knowledge.load(str(compiled_copy)).entries("fixes")


def test_a_cache_others_could_have_written_is_ignored(compiled_copy):
    """A planted or world-writable cache could change every answer: it is never read."""
    path = knowledge.compiled_path(compiled_copy)
    path.chmod(0o666)
    assert knowledge.compiled_status(compiled_copy) == "stale"
    path.chmod(0o600)
    path.parent.chmod(0o777)
    assert knowledge.compiled_status(compiled_copy) == "stale"
    path.parent.chmod(0o700)
    assert knowledge.compiled_status(compiled_copy) == "current"


def test_no_home_to_write_to_costs_time_not_an_answer(tmp_path, monkeypatch):
    dst = tmp_path / "knowledge"
    shutil.copytree(KB_DIR, dst)
    home = tmp_path / "readonly-home"
    home.mkdir(mode=0o500)
    monkeypatch.setenv("HOME", str(home))
    knowledge.load.cache_clear()
    assert knowledge.load(str(dst)).entries("fixes")
    assert knowledge.compiled_status(dst) == "missing" or os.geteuid() == 0  # root writes where it likes
    knowledge.load.cache_clear()


def test_values_json_would_change_are_refused(compiled_copy):
    kb = knowledge.load(str(compiled_copy), compiled=False)
    kb.tables["ui"]["when"] = __import__("datetime").date(2025, 1, 1)
    with pytest.raises(knowledge.KnowledgeError, match=r"ui\.yaml: ui/when: .*date"):
        knowledge.compile_text(kb)


def test_kb_compile_check_and_write(compiled_copy, capsys):
    target = knowledge.compiled_path(compiled_copy)
    assert cli.main(["kb", "compile", "--check", "--dir", str(compiled_copy)]) == 0
    target.unlink()
    assert cli.main(["kb", "compile", "--check", "--dir", str(compiled_copy)]) == 1
    assert "missing (the first command fills it); run: python3 scripts/memtune.py kb compile" in capsys.readouterr().out
    assert not target.exists()
    assert cli.main(["kb", "compile", "--dir", str(compiled_copy)]) == 0
    assert knowledge.compiled_status(compiled_copy) == "current"
    target.write_text(target.read_text(encoding="utf-8").replace('"format":1', '"format": 2'), encoding="utf-8")
    assert cli.main(["kb", "compile", "--check", "--dir", str(compiled_copy)]) == 1
    assert "stale" in capsys.readouterr().out


def test_kb_compile_refuses_an_invalid_knowledge_base(compiled_copy, capsys):
    path = compiled_copy / "fixes.yaml"
    data = read_yaml(path)
    data["fixes"][0].pop("undo")
    write_yaml(path, data)
    before = knowledge.compiled_path(compiled_copy).read_bytes()
    assert cli.main(["kb", "compile", "--dir", str(compiled_copy)]) == 1
    assert "'undo' is a required property" in capsys.readouterr().out
    assert knowledge.compiled_path(compiled_copy).read_bytes() == before


def test_compiled_load_imports_neither_yaml_nor_jsonschema(compiled_copy):
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from memtune import knowledge; "
            "kb = knowledge.load(sys.argv[2]); assert kb.entries('fixes'); "
            "print(sorted(m for m in ('yaml', 'jsonschema') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code, str(SKILL / "scripts"), str(compiled_copy)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_diagnose_json_imports_only_what_it_uses():
    """No schema validation, templating or Markdown code, and no other command's module, on the JSON path."""
    proc = subprocess.run([sys.executable, "-X", "importtime", str(SKILL / "scripts" / "memtune.py"), "diagnose",
                           "--log", str(SKILL / "examples" / "llama3-70b-fragmentation.log"), "--gpu", "H100-80GB",
                           "--format", "json"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    # render.out (where every answer is written) is the one render module the JSON path needs
    heavy = {"jsonschema", "referencing", "jinja2", "markdown_it", "memtune.render.render", "memtune.render.html",
             "memtune.render.labels"}
    heavy |= {f"memtune.commands.{name}" for name in cli.COMMAND_MODULES if name != "diagnose"}
    assert imported & heavy == set()


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["nope"], []])
def test_no_command_builds_the_full_parser(argv):
    assert cli._command(argv) is None


def test_every_command_parses_alike_with_the_one_command_parser(capsys):
    full = cli.build_parser()
    sub = next(a for a in full._actions if a.dest == "command")
    for name in sub.choices:
        assert cli._command([name, "--x"]) == name
        only = cli.build_parser(name)
        helps = []
        for parser in (full, only):
            with pytest.raises(SystemExit):
                parser.parse_args([name, "--help"])
            helps.append(capsys.readouterr().out)
        assert helps[0] == helps[1], name
