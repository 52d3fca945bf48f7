"""A YAML file as values plus the line of each top-level and section key, without constructing unknown tags.

Apart from config.py so that PyYAML is imported only when a YAML file is read (a log-only diagnosis needs the
config vocabulary, not the parser).
"""

from __future__ import annotations

from typing import Any

import yaml

from ..errors import UserError


class _Loader(yaml.SafeLoader):  # not libyaml's CSafeLoader: it overflows the C stack on deep nesting (fuzz)
    """SafeLoader used only to compose nodes; unknown tags (!!python/...) never get constructed."""


def _node_value(node: yaml.Node, loader: _Loader) -> Any:
    if isinstance(node, yaml.ScalarNode):
        tag = node.tag or ""
        if tag.startswith("tag:yaml.org,2002:") and "python/" not in tag:
            try:
                return loader.construct_object(node, deep=True)
            except (yaml.YAMLError, ValueError):  # ValueError: an int past Python's 4300-digit limit
                return node.value
        if "python/name:" in tag or "python/module:" in tag:
            return tag.split(":", 3)[-1] if not node.value else node.value
        return node.value
    if isinstance(node, yaml.SequenceNode):
        return [_node_value(n, loader) for n in node.value]
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        tag = node.tag or ""
        if "python/object" in tag:
            out["_target_"] = tag.split(":", 3)[-1]
        for k, v in node.value:
            out[str(_node_value(k, loader))] = _node_value(v, loader)
        return out
    return None


def load_yaml_tree(text: str, path: str) -> tuple[Any, dict[tuple[str, ...], int]]:
    """Parse YAML tolerating unknown tags; returns (value, {key path: 1-based line}) for two levels."""
    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError as exc:  # a control character YAML does not allow
        line = text.count("\n", 0, max(exc.position, 0)) + 1
        raise UserError(f"{path}:{line}: invalid YAML: {exc.reason} (#x{exc.character:04x})") from None
    try:
        node = loader.get_single_node()
    except RecursionError:
        raise UserError(f"{path}: invalid YAML: nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise UserError(f"{path}{line}: invalid YAML: {getattr(exc, 'problem', None) or exc}") from None
    finally:
        loader.dispose()
    if node is None:
        return None, {}
    lines: dict[tuple[str, ...], int] = {}
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            lines[(str(k.value),)] = k.start_mark.line + 1
            if isinstance(v, yaml.MappingNode):
                for k2, _ in v.value:
                    lines[(str(k.value), str(k2.value))] = k2.start_mark.line + 1
    try:
        return _node_value(node, loader), lines
    except RecursionError:
        raise UserError(f"{path}: invalid YAML: nested too deeply or an anchor refers to itself") from None
