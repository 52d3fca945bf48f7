"""Apply lines for a simulated fix, written from the overrides that were simulated on the user's config.

A fix's static ``apply`` text in fixes.yaml shows one typical setting; once a fix has been simulated the lines
must say exactly what was simulated (``recompute_modules=[mlp]`` for a dense model, PP 4 -> 8 for this layout),
in every interface: Bridge overrides, Bridge Python and Megatron-LM flags.  Interfaces that are not config
(environment, shell) keep the fix's own lines.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

CONFIG_INTERFACES = ("bridge_override", "bridge_python", "megatron_lm", "perf_script")


def apply_lines(static: Mapping[str, list[str]], overrides: Iterable[str]) -> dict[str, list[str]]:
    """``static`` with its config interfaces replaced by lines generated from ``overrides``."""
    from .inputs.config import parse_scalar
    from .planner.options import field_of, split

    # the fix's own settings first, then what the simulated variant had to set beside them (a prerequisite such
    # as the distributed optimizer): an answer that shows two lines shows the fix
    own = {split(line)[0] for line in static.get("bridge_override") or []}
    overrides = sorted(overrides, key=lambda line: split(line)[0] not in own)
    out: dict[str, list[str]] = {"bridge_override": list(overrides), "bridge_python": [], "megatron_lm": []}
    flags: list[str] = []
    for line in overrides:
        key, text = split(line)
        value = parse_scalar(text)
        out["bridge_python"].append(f"cfg.{key} = {_python(value)}")
        name = field_of(key)
        if name:
            flag = _megatron_flag(name, value)
            if flag:
                flags.append(flag)
    if flags:
        out["megatron_lm"] = [" ".join(flags)]
    else:
        del out["megatron_lm"]
    for iface, lines in static.items():
        if iface not in CONFIG_INTERFACES:
            out[iface] = list(lines)
    return out


def _python(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_python(v) for v in value) + "]"
    return repr(value)


def _megatron_flag(name: str, value: Any) -> str | None:
    """The Megatron-LM flag that sets a TrainingConfig field (megatron_args.py spelling), or None."""
    from .inputs.megatron_names import NOT_FLAGS, RENAMED

    if name in NOT_FLAGS:
        return None
    renamed = {v: k for k, v in RENAMED.items()}
    flag = "--" + renamed.get(name, name.replace("_", "-"))
    if value is True:
        return flag
    if value is False or value is None:
        return f"(drop {flag})"
    if isinstance(value, list):
        return f"{flag} {' '.join(str(v) for v in value)}"
    return f"{flag} {value}"
