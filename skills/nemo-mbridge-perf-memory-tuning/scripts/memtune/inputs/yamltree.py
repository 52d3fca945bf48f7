"""A YAML file as values plus the line of each top-level and section key, without constructing unknown tags.

Apart from config.py so that PyYAML is imported only when a YAML file is read (a log-only diagnosis needs the
config vocabulary, not the parser).
"""

from __future__ import annotations

from typing import Any

import yaml

from ..errors import UserError

# A config without aliases expands to at most one value per few bytes; aliases that multiply it
# (the 456-byte "billion laughs" expands to 10^9 values) or nesting no config has are refused.
EXPANSION_PER_BYTE = 4
EXPANSION_FLOOR = 10_000
MAX_DEPTH = 100  # a Bridge config dump nests 4-6 deep
# A Bridge config dump has ~1,500 keys (3,000 nodes).  Pure-Python PyYAML spends ~20 us per node, so
# a node budget keeps any accepted file near a second; every node needs a line break, a comma or a
# bracket, so their count bounds the nodes before anything is parsed.
MAX_NODES = 40_000


def line_breaks(text: str) -> int:
    """Every YAML line break (\\r\\n once, \\r, \\n, NEL, LS, PS): counting only \\n let a \\r-separated file
    parse 3x the node cap."""
    return (text.count("\n") + text.count("\r") - text.count("\r\n") + text.count("\x85") + text.count("\u2028")
            + text.count("\u2029"))


def check_size(text: str, path: str) -> None:
    """Refuse, before parsing, a document that may hold more nodes than MAX_NODES."""
    bound = line_breaks(text) + text.count(",") + text.count("[") + text.count("{") + 1
    if bound > MAX_NODES:
        raise UserError(f"{path}: refused: up to {bound} YAML values (lines, commas, brackets); a training config "
                        f"has a few thousand, at most {MAX_NODES} are read")


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


def check_expansion(node: yaml.Node, text_len: int, path: str) -> None:
    """Refuse a document whose aliases expand it past the budget, or that nests deeper than MAX_DEPTH.

    Iterative (no recursion), and it stops as soon as the budget is spent, so a bomb costs
    the budget, not its expansion.
    """
    budget = EXPANSION_FLOOR + EXPANSION_PER_BYTE * text_len
    stack: list[tuple[yaml.Node, int]] = [(node, 1)]
    while stack:
        current, depth = stack.pop()
        budget -= 1
        if budget < 0:
            raise UserError(f"{path}: refused: YAML aliases expand it to more values than a {text_len}-byte config "
                            "can hold (an alias bomb?)")
        if depth > MAX_DEPTH:
            raise UserError(f"{path}: refused: YAML nested more than {MAX_DEPTH} levels deep; no config is")
        if isinstance(current, yaml.SequenceNode):
            stack.extend((child, depth + 1) for child in current.value)
        elif isinstance(current, yaml.MappingNode):
            for key, value in current.value:
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))


def safe_load_bounded(text: str, path: str) -> Any:
    """``yaml.safe_load`` after the expansion and depth check; YAML errors propagate as yaml.YAMLError."""
    check_size(text, path)
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        check_expansion(node, len(text), path)
        return loader.construct_document(node)
    except RecursionError:
        raise UserError(f"{path}: invalid YAML: nested too deeply") from None
    finally:
        loader.dispose()


def load_yaml_tree(text: str, path: str) -> tuple[Any, dict[tuple[str, ...], int]]:
    """Parse YAML tolerating unknown tags; returns (value, {key path: 1-based line}) for two levels."""
    check_size(text, path)
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
    check_expansion(node, len(text), path)
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
