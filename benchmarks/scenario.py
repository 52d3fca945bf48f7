"""Load and validate benchmark scenarios (one YAML file each) against the KB's ids.

The schema file keeps ``cause_id`` / ``fix_id`` open; ``scenario_schema`` closes them
with enums built from the knowledge base at load time, so an unknown id is a schema
error and the benchmark never keeps its own copy of the id list.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from memtune import knowledge
from memtune.errors import UserError

from . import yamlio

SCHEMA_FILE = Path(__file__).resolve().parent / "scenario.schema.json"
DEFAULT_DIR = Path(__file__).resolve().parent / "scenarios"


@dataclass(frozen=True)
class KnownIds:
    causes: frozenset[str]
    fixes: frozenset[str]


@dataclass(frozen=True)
class Scenario:
    id: str
    path: Path
    category: str
    language: str
    question: str
    source: str
    ground_truth: str
    inputs: dict[str, Any] = field(default_factory=dict)
    expect: dict[str, Any] = field(default_factory=dict)
    url: str | None = None
    notes: str | None = None
    set: str = "dev"  # the batch it was written in; the benchmark reports each batch separately


def kb_entries(table: str, root: Path | None = None) -> list[dict[str, Any]]:
    """Entries of one KB table; reads the file alone while other tables are still being written."""
    try:
        return knowledge.load(str(root) if root else None).entries(table)
    except knowledge.KnowledgeError:
        path = (root or knowledge.knowledge_dir()) / f"{table}.yaml"
        if not path.is_file():
            return []
        data = _read_yaml(path)
        rows = data.get(table) if isinstance(data, dict) else None
        return [r for r in rows or [] if isinstance(r, dict)]


def known_ids(root: Path | None = None) -> KnownIds:
    """Stable ids from index.yaml ``required_ids`` plus whatever causes.yaml / fixes.yaml define."""
    base = root or knowledge.knowledge_dir()
    index = _read_yaml(base / "index.yaml") or {}
    required = index.get("required_ids") or {}
    causes = set(required.get("causes") or []) | {e["id"] for e in kb_entries("causes", root) if "id" in e}
    fixes = set(required.get("fixes") or []) | {e["id"] for e in kb_entries("fixes", root) if "id" in e}
    return KnownIds(frozenset(causes), frozenset(fixes))


def scenario_schema(ids: KnownIds) -> dict[str, Any]:
    schema = copy.deepcopy(json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))
    schema["$defs"]["cause_id"]["enum"] = sorted(ids.causes)
    schema["$defs"]["fix_id"]["enum"] = sorted(ids.fixes)
    return schema


@lru_cache(maxsize=4)
def _validator(ids: KnownIds) -> Any:
    """One validator per set of known ids: building it (schema read, copied, checked) costs more than a scenario's
    validation, and the suite validates 1,700 scenarios."""
    import jsonschema  # heavy import only where scenarios are validated

    return jsonschema.Draft202012Validator(scenario_schema(ids))


def validate(data: Any, ids: KnownIds, where: str) -> list[str]:
    """Schema problems of one scenario document, one line each naming file and key."""
    validator = _validator(ids)
    problems = []
    for err in sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path)):
        key = "/".join(str(p) for p in err.absolute_path) or "(top)"
        problems.append(f"{where}: {key}: {err.message}")
    return problems


_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def infer_language(question: str) -> str:
    """``zh`` when the question has Chinese characters (users mix in English settings), else ``en``."""
    return "zh" if _CJK.search(question or "") else "en"


def load_scenario(path: Path, ids: KnownIds) -> Scenario:
    data = _read_yaml(path)
    problems = validate(data, ids, str(path))
    if problems:
        raise UserError(problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    if data["id"] != path.stem:
        raise UserError(f"{path}: id: {data['id']!r} must equal the file name {path.stem!r}")
    return Scenario(
        id=data["id"],
        path=path,
        category=data["category"],
        language=data.get("language") or infer_language(data["question"]),
        question=data["question"],
        source=data["source"],
        ground_truth=data.get("ground_truth") or "",
        inputs=dict(data.get("inputs") or {}),
        expect=dict(data["expect"]),
        url=data.get("url"),
        notes=data.get("notes"),
        set=data.get("set") or "dev",
    )


def load_scenarios(directory: Path | None = None, ids: KnownIds | None = None) -> list[Scenario]:
    """Every ``*.yaml`` in ``directory`` (default: the committed set), sorted by id.  A directory read before with
    the same ids and unchanged files is not parsed and validated again (the test suite reads the 1,500 scenarios
    several times; each read costs seconds)."""
    folder = Path(directory) if directory else DEFAULT_DIR
    if not folder.is_dir():
        raise UserError(f"{folder}: scenario directory not found")
    paths = sorted(p for p in folder.glob("*.yaml") if p.is_file())
    if not paths:
        raise UserError(f"{folder}: no *.yaml scenarios")
    ids = ids or known_ids()
    stamp = (str(folder.resolve()), ids, tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in paths))
    if stamp not in _LOADED:
        if len(_LOADED) >= _LOADED_KEPT:  # an edited file makes a new stamp: the oldest reads go
            _LOADED.pop(next(iter(_LOADED)))
        _LOADED[stamp] = tuple(load_scenario(p, ids) for p in paths)
    return list(_LOADED[stamp])


_LOADED: dict[tuple[Any, ...], tuple[Scenario, ...]] = {}  # a directory's stamp -> its scenarios
_LOADED_KEPT = 4


def env_items(inputs: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Environment as strings, YAML booleans spelled the way shells and PyTorch expect."""
    items = []
    for key, value in (inputs.get("env") or {}).items():
        text = ("True" if value else "False") if isinstance(value, bool) else str(value)
        items.append((key, text))
    return items


def _read_yaml(path: Path) -> Any:
    try:
        return yamlio.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{mark.line + 1}:" if mark else ""
        raise UserError(f"{path}:{where} invalid YAML: {getattr(exc, 'problem', exc)}") from None
