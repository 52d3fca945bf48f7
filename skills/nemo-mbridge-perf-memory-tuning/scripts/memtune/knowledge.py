"""Load the knowledge base once, index it by id, and validate it on request.

``load()`` is cheap and cached per process: it reads the tables parsed on an earlier run from the user's
cache (``$HOME/.cache/memtune/kb-<folder key>.json``, a private folder) when the hash of every source file
(``*.yaml``, the language catalogs ``zh/*.yaml`` and ``schema/*.json``) still matches the hashes recorded
in it, and otherwise parses the YAML sources and keeps them there for the next start, so an edited table
takes effect at once and the installed skill ships no generated file.  Either way the Knowledge is the
same.  ``validate()`` adds the JSON-Schema checks and the cross-reference checks that ``memtune kb validate``
and CI run.  The KB directory is found next to this package in a skill folder, or in the installed data path after
``pip install``; no environment variable moves it.

PyYAML and jsonschema are imported only on the paths that need them (a missing or stale cache,
validation, compiling): a command whose cache is current never loads either.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from .conditions import evaluate, referenced_facts
from .facts import Facts

COMPILED_FORMAT = 1
COMPILE_COMMAND = "python3 scripts/memtune.py kb compile"


class KnowledgeError(Exception):
    """The knowledge base is missing or malformed; message names file and key."""


def knowledge_dir() -> Path:
    candidates = [
        Path(__file__).resolve().parents[2] / "knowledge",  # the skill folder: scripts/memtune/ -> knowledge/
        Path(sys.prefix) / "share" / "memtune" / "knowledge",  # pip install .
    ]
    for cand in candidates:
        if (cand / "index.yaml").is_file():
            return cand
    raise KnowledgeError(f"knowledge/index.yaml not found in {' or '.join(map(str, candidates))} "
                         "(run scripts/memtune.py from the skill folder, or pip install the project)")


@dataclass
class Knowledge:
    """All tables, plus ``by_id`` indexes for the ones whose entries carry ids."""

    root: Path
    index: dict[str, Any]
    tables: dict[str, Any]
    by_id: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    _memo: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)  # fresh per copy

    def memo(self, key: str, build: Callable[[Knowledge], Any]) -> Any:
        """``build(self)``, computed once per loaded knowledge base (a compiled vocabulary, a recognizer): kept
        with the tables it was built from, so it can never outlive them or be served for another base."""
        if key not in self._memo:
            self._memo[key] = build(self)
        return self._memo[key]

    @property
    def version(self) -> str:
        return str(self.index["kb_version"])

    def entries(self, table: str) -> list[dict[str, Any]]:
        return self.tables.get(table, {}).get(table, [])

    def get(self, table: str, ident: str) -> dict[str, Any]:
        try:
            return self.by_id[table][ident]
        except KeyError:
            raise KnowledgeError(f"{table}.yaml: no entry with id {ident!r}") from None


def _safe_loader() -> Any:
    """libyaml's safe loader when PyYAML was built with it: 8x faster start-up and 10x faster validation, the same
    data, tokens and marks (the knowledge base is ours; user YAML goes through inputs/yamltree.py's bounded
    pure-Python loader instead)."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


_PARSED: dict[bytes, Any] = {}  # BLAKE2b of a file's bytes -> the data parsed from them (never handed out itself)
_PARSED_KEPT = 128


def _read_yaml(path: Path) -> Any:
    """The data in a knowledge YAML file, parsed once per process and content: ``kb validate`` reads each file
    twice (the tables, then the catalogs against the bare English) and a test session loads many copies of the
    knowledge folder.  Each call gets its own deep copy (~6x faster than parsing), so merging a catalog into one
    cannot change another."""
    import copy

    import yaml

    SafeLoader = _safe_loader()  # noqa: N806 - a safe loader class (libyaml's where built), named as such
    try:
        raw = path.read_bytes()
        key = _blake2b()(raw, digest_size=16).digest()
        if key in _PARSED:
            return copy.deepcopy(_PARSED[key])
        data = yaml.load(raw.decode("utf-8"), Loader=SafeLoader)
    except OSError as exc:
        raise KnowledgeError(f"{path}: cannot read ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise KnowledgeError(f"{path}:{where} invalid YAML: {getattr(exc, 'problem', exc)}") from None
    if len(_PARSED) >= _PARSED_KEPT:
        _PARSED.pop(next(iter(_PARSED)))
    _PARSED[key] = copy.deepcopy(data)
    return data


@lru_cache(maxsize=4)
def load(root: str | None = None, *, compiled: bool = True) -> Knowledge:
    """The knowledge base in ``root`` (default: ``knowledge_dir()``), from the cache when it is current.

    ``compiled=False`` always parses the YAML sources (``kb validate`` and ``kb compile`` do).
    """
    base = Path(root) if root else knowledge_dir()
    tables_in = _read_compiled(base) if compiled else None
    index, tables = tables_in if tables_in is not None else _read_sources(base)
    by_id: dict[str, dict[str, dict[str, Any]]] = {}
    for name, data in tables.items():
        rows = data.get(name) if isinstance(data, dict) else None
        if isinstance(rows, list) and rows and isinstance(rows[0], dict) and "id" in rows[0]:
            by_id[name] = {row["id"]: row for row in rows if isinstance(row, dict) and "id" in row}
    kb = Knowledge(root=base, index=index, tables=tables, by_id=by_id)
    if compiled and tables_in is None:  # parsed from YAML: keep the tables for the next start
        _store_quietly(kb)
    return kb


def _read_sources(base: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    index = _read_yaml(base / "index.yaml")
    if not isinstance(index, dict) or "tables" not in index:
        raise KnowledgeError(f"{base / 'index.yaml'}: missing key 'tables'")
    return index, {name: read_table(base, name) for name in index["tables"]}


# ---- language catalogs ---------------------------------------------------------------------------
# The English tables are pure ASCII; the Chinese text lives in knowledge/zh/<table>.yaml, laid out like the
# table.  A scanner that reads every non-ASCII file character by character then reads only the catalogs.

CATALOG_DIRS = ("zh",)


def catalog_path(base: Path, lang: str, name: str) -> Path:
    return base / lang / f"{name}.yaml"


def read_table(base: Path, name: str) -> Any:
    """Table ``name`` as the code sees it: ``<name>.yaml`` with each language catalog of it merged in."""
    data = _read_yaml(base / f"{name}.yaml")
    for lang in CATALOG_DIRS:
        path = catalog_path(base, lang, name)
        if path.is_file():
            merge_catalog(data, _read_yaml(path))
    return data


def merge_catalog(table: Any, catalog: Any) -> list[str]:
    """Merge ``catalog`` into ``table`` in place; the key paths of catalog entries with no place in it.

    A mapping merges key by key: a key the table lacks is added, one it leaves empty (``key: ~``, kept where
    the order of keys matters) is filled.  Into a list, a string key names the unit
    with that ``id``; an int key with a mapping merges into the item at that position of the table's list, an
    int key with any other value is an item inserted so that it stands at that position of the merged list.
    """
    problems: list[str] = []
    _merge(table, catalog, (), problems)
    return problems


def _merge(table: Any, catalog: Any, path: tuple[str | int, ...], problems: list[str]) -> None:
    if isinstance(table, dict) and isinstance(catalog, dict):
        for key, value in catalog.items():
            if key not in table and isinstance(value, dict):  # a subtree the table lacks: renamed or removed
                problems.append(_path_text((*path, key)))
            elif key not in table or (table[key] is None and value is not None):  # "key: ~" keeps its place
                table[key] = value
            elif isinstance(value, dict) and isinstance(table[key], (dict, list)):
                _merge(table[key], value, (*path, key), problems)
            else:
                problems.append(_path_text((*path, key)))
    elif isinstance(table, list) and isinstance(catalog, dict):
        _merge_list(table, catalog, path, problems)
    else:
        problems.append(_path_text(path))


def _merge_list(table: list[Any], catalog: dict[Any, Any], path: tuple[str | int, ...], problems: list[str]) -> None:
    """Units by id, id-less items by position, then the inserted items in ascending position (see merge_catalog)."""
    units = {row["id"]: row for row in table if isinstance(row, dict) and "id" in row}
    inserts = []
    for key, value in catalog.items():
        if isinstance(key, int) and not isinstance(value, dict):
            inserts.append((key, value))
        elif isinstance(key, int) and 0 <= key < len(table):
            _merge(table[key], value, (*path, key), problems)
        elif isinstance(key, str) and key in units:
            _merge(units[key], value, (*path, key), problems)
        else:
            problems.append(_path_text((*path, key)))
    for position, value in sorted(inserts, key=lambda item: item[0]):
        if 0 <= position <= len(table):
            table.insert(position, value)
        else:
            problems.append(_path_text((*path, position)))


def _path_text(path: tuple[str | int, ...]) -> str:
    return "/".join(map(str, path)) or "(top)"


def catalog_problems(base: Path, tables: list[str]) -> list[str]:
    """Catalog entries with no English counterpart, and English text (``en``) without its translations."""
    problems: list[str] = []
    for name in tables:
        merged = _read_yaml(base / f"{name}.yaml")
        for lang in CATALOG_DIRS:
            path = catalog_path(base, lang, name)
            if not path.is_file():
                continue
            catalog = _read_yaml(path)
            problems += [f"{lang}/{name}.yaml: {where}: no English counterpart in {name}.yaml"
                         for where in merge_catalog(merged, catalog)]
            problems += [f"{lang}/{name}.yaml: {where}: {lang} text with no English (en) beside it"
                         for where in _lone_translations(merged, lang, ())]
        problems += [f"{name}.yaml: {where}: English text without its {lang} translation "
                     f"(add it to {lang}/{name}.yaml)"
                     for lang in CATALOG_DIRS for where in _missing_translations(merged, lang, ())]
    return problems


def _text_nodes(data: Any, path: tuple[str | int, ...]) -> Any:
    """``(path, mapping)`` for every mapping in ``data``, units of a list named by id."""
    if isinstance(data, dict):
        yield path, data
        for key, value in data.items():
            yield from _text_nodes(value, (*path, key))
    elif isinstance(data, list):
        for i, item in enumerate(data):
            yield from _text_nodes(item, (*path, item["id"] if isinstance(item, dict) and "id" in item else i))


def _missing_translations(data: Any, lang: str, path: tuple[str | int, ...]) -> list[str]:
    return [_path_text(where) for where, node in _text_nodes(data, path) if "en" in node and lang not in node]


def _lone_translations(data: Any, lang: str, path: tuple[str | int, ...]) -> list[str]:
    return [_path_text(where) for where, node in _text_nodes(data, path) if lang in node and "en" not in node]


# ---- compiled knowledge base -------------------------------------------------------------------

def source_files(base: Path) -> list[Path]:
    """Every file the compiled KB is derived from or was validated against, in a stable order."""
    catalogs = [path for lang in CATALOG_DIRS for path in (base / lang).glob("*.yaml")]
    return sorted([*base.glob("*.yaml"), *catalogs, *(base / "schema").glob("*.json")])


def _blake2b() -> Callable[..., Any]:
    """BLAKE2b from the C module hashlib wraps: importing hashlib also loads OpenSSL, ~3 ms of every start-up."""
    try:
        from _blake2 import blake2b
    except ImportError:  # pragma: no cover - an interpreter without the builtin module
        from hashlib import blake2b
    return blake2b


def source_hashes(base: Path) -> dict[str, str]:
    """``relative path -> BLAKE2b-256 of its bytes`` for ``source_files(base)``."""
    blake2b = _blake2b()
    return {path.relative_to(base).as_posix(): blake2b(path.read_bytes(), digest_size=32).hexdigest()
            for path in source_files(base)}


def cache_dir() -> Path:
    """``$HOME/.cache/memtune``: where the parsed tables are kept between runs (the helper reads no environment
    variable; a home directory that cannot be found means no cache, never a failure)."""
    return Path(os.path.expanduser("~")) / ".cache" / "memtune"


def compiled_path(base: Path) -> Path:
    """The cache file of the knowledge base in ``base``: one per knowledge folder, checked against its sources."""
    key = _blake2b()(str(base.resolve()).encode("utf-8", "surrogateescape"), digest_size=12).hexdigest()
    return cache_dir() / f"kb-{key}.json"


def _private(path: Path, want_dir: bool) -> bool:
    """Only this user (or root) can have written it: a cache another user could plant is ignored."""
    try:
        info = path.lstat()
    except OSError:
        return False
    kind_ok = stat.S_ISDIR(info.st_mode) if want_dir else stat.S_ISREG(info.st_mode)
    return kind_ok and info.st_uid in (os.geteuid(), 0) and not info.st_mode & 0o022


def _read_compiled(base: Path) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """``(index, tables)`` from the cache when it matches the sources byte for byte, else None."""
    path = compiled_path(base)
    if not (_private(path.parent, want_dir=True) and _private(path, want_dir=False)):
        return None
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != COMPILED_FORMAT or data.get("hash") != "blake2b-256":
        return None
    try:
        if data.get("sources") != source_hashes(base):
            return None
    except OSError:
        return None
    index, tables = data.get("index"), data.get("tables")
    if not isinstance(index, dict) or not isinstance(tables, dict) or list(tables) != list(index.get("tables", ())):
        return None
    return index, tables


def compiled_status(base: Path) -> str:
    """``current``, ``stale`` (sources changed since the cache was written) or ``missing``."""
    if not compiled_path(base).is_file():
        return "missing"
    return "current" if _read_compiled(base) is not None else "stale"


def store_compiled(kb: Knowledge) -> Path:
    """Write the cache of ``kb`` (private folder, atomic); raises OSError or KnowledgeError when it cannot."""
    from .actions.safewrite import write_new

    path = compiled_path(kb.root)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not _private(path.parent, want_dir=True):
        raise KnowledgeError(f"{path.parent}: not a private folder of this user; the knowledge cache is not kept there")
    write_new(path, compile_text(kb).encode("utf-8"), mode=0o600)
    _prune(path)
    return path


CACHES_KEPT = 8  # knowledge folders whose tables stay cached; an older one is simply rebuilt when used again


def _prune(keep: Path) -> None:
    """Only the most recently written caches stay: a folder that moved or was deleted leaves no garbage behind."""
    try:
        others = sorted((p for p in keep.parent.glob("kb-*.json") if p != keep),
                        key=lambda p: p.stat().st_mtime, reverse=True)
        for stale in others[CACHES_KEPT - 1:]:
            stale.unlink(missing_ok=True)
    except OSError:
        pass


def _store_quietly(kb: Knowledge) -> None:
    """A cache that cannot be written (no home, read-only, full disk) costs start-up time, never an answer."""
    try:
        store_compiled(kb)
    except (OSError, KnowledgeError, RuntimeError):
        pass


def compile_text(kb: Knowledge) -> str:
    """The text of the cache file for ``kb`` (its tables as loaded from the YAML sources).

    Raises KnowledgeError for a value JSON cannot carry unchanged (a YAML date, a non-string key,
    NaN/inf): the loaded tables must equal the YAML ones exactly, types included.
    """
    for name in ["index", *kb.tables]:
        problem = _json_problem(kb.index if name == "index" else kb.tables[name], name)
        if problem:
            raise KnowledgeError(f"{name}.yaml: {problem}; quote it so the compiled knowledge base keeps it unchanged")
    doc = {
        "format": COMPILED_FORMAT,
        "generated_by": f"{COMPILE_COMMAND} (do not edit; regenerate after changing knowledge/)",
        "kb_version": kb.version,
        "hash": "blake2b-256",
        "sources": source_hashes(kb.root),
        "index": kb.index,
        "tables": kb.tables,
    }
    # Compact: 20 % less to decode than indented JSON, on every start-up; nobody reads this file.
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"


def _json_problem(value: Any, where: str) -> str | None:
    """Where ``value`` holds something a JSON round trip would not give back identically (None = nothing)."""
    if value is None or isinstance(value, (str, bool, int)):
        return None
    if isinstance(value, float):
        return None if value == value and value not in (float("inf"), float("-inf")) else f"{where}: {value!r}"
    if isinstance(value, list):
        for i, item in enumerate(value):
            problem = _json_problem(item, f"{where}/{i}")
            if problem:
                return problem
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where}: key {key!r} is a {type(key).__name__}, not a string"
            problem = _json_problem(item, f"{where}/{key}")
            if problem:
                return problem
        return None
    return f"{where}: {value!r} is a {type(value).__name__}"


def validate(kb: Knowledge) -> list[str]:
    """Schema, comment-truncation and cross-reference problems, one readable line each (empty = valid)."""
    problems = _schema_problems(kb) + catalog_problems(kb.root, list(kb.index["tables"]))
    if not problems:  # cross-references assume the shapes the schemas guarantee
        problems += _reference_problems(kb)
    return problems + _truncation_problems(kb) + _ascii_problems(kb)


def _ascii_problems(kb: Knowledge) -> list[str]:
    """A character outside ASCII in an English table: scanners that read a non-ASCII file character by character
    (NVIDIA SkillSpector) would read the whole table slowly, so Chinese goes to the catalog, the rest to escapes."""
    problems = []
    for name in ["index", *kb.index["tables"]]:
        text = (kb.root / f"{name}.yaml").read_text(encoding="utf-8")
        if text.isascii():
            continue
        line_no, char = next((i + 1, c) for i, line in enumerate(text.split("\n")) for c in line if not c.isascii())
        problems.append(f"{name}.yaml:{line_no}: {char!r} (U+{ord(char):04X}) is not ASCII; move Chinese text to "
                        f"{CATALOG_DIRS[0]}/{name}.yaml, write the rest as ASCII or a \\u escape")
    return problems


def _schema_problems(kb: Knowledge) -> list[str]:
    import jsonschema  # heavy imports only on the validation path
    from referencing import Registry, Resource

    texts = {path.name.removesuffix(".schema.json"): path.read_text(encoding="utf-8")
             for path in sorted((kb.root / "schema").glob("*.schema.json"))}
    schemas = {name: json.loads(text) for name, text in texts.items()}
    schemas_key = _digest("\0".join(f"{name}\0{text}" for name, text in texts.items()))
    registry = Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in schemas.values())
    problems: list[str] = []
    for name in ["index", *kb.index["tables"]]:
        if name not in schemas:
            problems.append(f"{kb.root / 'schema' / name}.schema.json: schema file missing")
            continue
        data = kb.index if name == "index" else kb.tables[name]

        def table_problems(name: str = name, data: Any = data) -> list[str]:
            validator = jsonschema.Draft202012Validator(schemas[name], registry=registry)
            return [f"{name}.yaml: {'/'.join(str(p) for p in err.absolute_path) or '(top)'}: {err.message}"
                    for err in sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))]

        key = ("schema", name, schemas_key, _digest(json.dumps(data, default=repr)))
        problems += _remembered(key, table_problems)
    return problems


# Validation results by the digest of what was validated.  Checking the whole knowledge base takes about a second,
# and a process that validates it again after an edit (the suite, an editor's loop) has changed one table: the
# tables and files it did not touch give the same answer, so they are not checked again.
_VALIDATED: dict[tuple[str, ...], list[str]] = {}
_VALIDATED_KEEP = 256


def _digest(text: str) -> str:
    return _blake2b()(text.encode("utf-8"), digest_size=16).hexdigest()


def _remembered(key: tuple[str, ...], compute: Callable[[], list[str]]) -> list[str]:
    """``compute()``, or what it returned for the same ``key`` before (the oldest results are forgotten)."""
    if key not in _VALIDATED:
        if len(_VALIDATED) >= _VALIDATED_KEEP:
            del _VALIDATED[next(iter(_VALIDATED))]
        _VALIDATED[key] = compute()
    return list(_VALIDATED[key])


def _truncation_problems(kb: Knowledge) -> list[str]:
    """Unquoted values cut short by YAML: in ``source: PR #3107`` everything from `` #`` is a comment.

    That silently drops PR numbers from evidence, so the KB forbids a comment right after a plain
    scalar; such values must be quoted (comments belong on lines of their own).
    """
    problems = []
    for path in _yaml_sources(kb):
        text = path.read_text(encoding="utf-8")
        shown = _shown(kb, path)
        key = ("truncation", shown, _digest(text))
        problems += _remembered(key, lambda text=text, shown=shown: _cut_values(text, shown))
    return problems


def _cut_values(text: str, shown: str) -> list[str]:
    """``_truncation_problems`` and duplicate keys for one file's ``text`` (named ``shown`` in the messages)."""
    import yaml

    problems = []
    lines = text.split("\n")
    for tok in yaml.scan(text, Loader=_safe_loader()):
        if isinstance(tok, yaml.ScalarToken) and tok.plain:
            rest = lines[tok.end_mark.line][tok.end_mark.column:]
            comment = rest.lstrip()
            # A deliberate note reads "  # text" after a one-word value; "#3107" or prose is a cut value.
            looks_cut = comment[1:2] not in (" ", "") or " " in tok.value
            if rest[:1].isspace() and comment.startswith("#") and looks_cut:
                problems.append(f"{shown}:{tok.end_mark.line + 1}: text after ' #' is a YAML comment "
                                f"and is dropped from {tok.value[:40]!r}...; quote the value")
    return problems + _duplicate_keys(yaml.compose(text, Loader=_safe_loader()), shown)


def _yaml_sources(kb: Knowledge) -> list[Path]:
    """index.yaml, each table's file, and its language catalogs."""
    names = ["index", *kb.index["tables"]]
    catalogs = [catalog_path(kb.root, lang, name) for name in names for lang in CATALOG_DIRS]
    return [kb.root / f"{name}.yaml" for name in names] + [path for path in catalogs if path.is_file()]


def _shown(kb: Knowledge, path: Path) -> str:
    return path.relative_to(kb.root).as_posix()


def _duplicate_keys(node: Any, name: str) -> list[str]:
    """Keys given twice in one mapping: YAML keeps the last silently, so the first one's entries vanish."""
    import yaml

    problems, stack = [], [node]
    while stack:
        current = stack.pop()
        if isinstance(current, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key, value in current.value:
                if key.value in seen:
                    problems.append(f"{name}:{key.start_mark.line + 1}: key {key.value!r} given twice in one "
                                    f"mapping (first at line {seen[key.value]}); YAML keeps only the last")
                seen.setdefault(key.value, key.start_mark.line + 1)
                stack.append(value)
        elif isinstance(current, yaml.SequenceNode):
            stack.extend(current.value)
    return sorted(problems)


def _ids(kb: Knowledge, table: str) -> set[str]:
    return set(kb.by_id.get(table, {}))


def _reference_problems(kb: Knowledge) -> list[str]:
    problems: list[str] = []
    for table, rows in kb.tables.items():
        entries = rows.get(table) if isinstance(rows, dict) else None
        if isinstance(entries, list):
            seen: set[str] = set()
            for row in entries:
                ident = (row.get("id") or row.get("name")) if isinstance(row, dict) else None
                if ident is not None and ident in seen:
                    problems.append(f"{table}.yaml: duplicate id {ident!r}")
                seen.add(ident)
    causes, fixes, constraints = _ids(kb, "causes"), _ids(kb, "fixes"), _ids(kb, "constraints")
    measurements = _ids(kb, "measurements")
    known_facts = set(Facts().flatten()) | {f["name"] for f in kb.entries("facts")}
    for table, names in kb.index.get("required_ids", {}).items():
        for name in names:
            if name not in _ids(kb, table):
                problems.append(f"{table}.yaml: stable id {name!r} missing")

    def check_facts(where: str, cond: Any) -> None:
        if cond is None:
            return
        for fact in referenced_facts(cond):
            if fact not in known_facts and not _is_open_fact(kb, fact):
                problems.append(f"{where}: unknown fact {fact!r} (declare it in facts.yaml)")

    for rule in kb.entries("rules"):
        where = f"rules.yaml: {rule['id']}"
        if rule["cause"] not in causes:
            problems.append(f"{where}: unknown cause {rule['cause']!r}")
        for fix in rule.get("fixes", []):
            if fix not in fixes:
                problems.append(f"{where}: unknown fix {fix!r}")
        for item in rule.get("avoid", []):
            if item["fix"] not in fixes:
                problems.append(f"{where}: avoid names unknown fix {item['fix']!r}")
        check_facts(where, rule.get("when"))
        for fact in rule.get("fixes_from", []):
            check_facts(where, {"fact": fact, "exists": True})
    for fix in kb.entries("fixes"):
        where = f"fixes.yaml: {fix['id']}"
        if not fix.get("evidence"):
            problems.append(f"{where}: no evidence")
        for key in ("requires", "conflicts"):
            for ref in fix.get(key, []):
                if ref not in constraints:
                    problems.append(f"{where}: {key} names unknown constraint {ref!r}")
        for comp in fix.get("companions", []):
            if comp["fix"] not in fixes:
                problems.append(f"{where}: companion names unknown fix {comp['fix']!r}")
            check_facts(where, comp["when"])
        for branch in (fix.get("situation") or {}).get("rules_out", []):
            check_facts(where, branch["when"])
            check_facts(where, {"all": [{"fact": name, "exists": True} for name in branch["example"]]})
        problems.extend(rules_out_example_problems(where, (fix.get("situation") or {}).get("rules_out")))
        check_facts(where, fix.get("simulated_when"))
        check_facts(where, (fix.get("shrinks_request") or {}).get("when"))
        for ref in fix.get("measurements", []):
            if ref not in measurements:
                problems.append(f"{where}: unknown measurement {ref!r}")
        check_facts(where, fix.get("already_applied_when"))
    for con in kb.entries("constraints"):
        where = f"constraints.yaml: {con['id']}"
        for ref in con.get("blocks_fixes", []) + con.get("alternatives", []):
            if ref not in fixes:
                problems.append(f"{where}: names unknown fix {ref!r}")
        check_facts(where, con.get("violated_when"))
        check_facts(where, con.get("blocks_when"))
    for cause in kb.entries("causes"):
        sit = cause.get("situation") or {}
        where = f"causes.yaml: {cause['id']}: situation"
        if not sit.get("supports") and not any(rule["cause"] == cause["id"] for rule in kb.entries("rules")):
            problems.append(f"causes.yaml: {cause['id']}: no rule concludes this cause and no situation supports it")
        check_facts(where, sit.get("supports"))
        check_facts(where, sit.get("said_by"))
        for branch in sit.get("rules_out", []):
            check_facts(where, branch["when"])
            check_facts(where, {"all": [{"fact": name, "exists": True} for name in branch["example"]]})
        problems.extend(rules_out_example_problems(where, sit.get("rules_out")))
        for ref in [*sit.get("fixes", []), *([sit["check_fix"]] if sit.get("check_fix") else []),
                    *(a["fix"] for a in sit.get("avoid", []))]:
            if ref not in fixes:
                problems.append(f"{where}: unknown fix {ref!r}")
    problems += _situation_problems(kb)
    cand = (kb.tables.get("ledger") or {}).get("candidates") or {}
    for key in (k for k in cand if k.startswith("check_fix")):  # every check the candidates name is a fix
        if cand.get(key) and cand[key] not in fixes:
            problems.append(f"ledger.yaml: candidates.{key}: unknown fix {cand[key]!r}")
    problems += [f"ledger.yaml: candidates.generic: unknown cause {c['cause']!r}" for c in cand.get("generic", [])
                 if c["cause"] not in causes]
    for c in cand.get("generic", []):
        check_facts("ledger.yaml: candidates.generic", c.get("when"))
    return problems


def rules_out_example_problems(where: str, branches: list[dict[str, Any]] | None) -> list[str]:
    """Each rules_out branch's example must make that branch hold and no other: the answer gives the reason of
    every branch that holds, so an example that fires two shows no reason alone (the test renders each one)."""
    problems = []
    for n, branch in enumerate(branches or []):
        fired = [m for m, other in enumerate(branches or []) if evaluate(other["when"], branch["example"])]
        if fired != [n]:
            problems.append(f"{where}: rules_out[{n}].example makes branches {fired} hold, not only its own")
    return problems


def _situation_problems(kb: Knowledge) -> list[str]:
    """situation.yaml phases point at ledger.yaml phases; the priority list names each phase once."""
    table = kb.tables.get("situation") or {}
    phases = {p["id"] for p in table.get("phases") or []}
    ledger = {row["phase"] for row in (kb.tables.get("ledger") or {}).get("phases") or []}
    problems = [f"situation.yaml: phases {p['id']}: ledger_phase {p['ledger_phase']!r} is not a ledger.yaml phase"
                for p in table.get("phases") or [] if "ledger_phase" in p and p["ledger_phase"] not in ledger]
    order = table.get("phase_priority") or []
    problems += [f"situation.yaml: phase_priority: unknown phase {p!r}" for p in order if p not in phases]
    problems += [f"situation.yaml: phase_priority: phase {p!r} missing" for p in sorted(phases - set(order))]
    return problems


def _is_open_fact(kb: Knowledge, fact: str) -> bool:
    """A fact under a prefix that facts.yaml declares open (``name: stats.*``)."""
    prefixes = [f["name"][:-1] for f in kb.entries("facts") if f["name"].endswith("*")]
    return any(fact.startswith(p) for p in prefixes)
