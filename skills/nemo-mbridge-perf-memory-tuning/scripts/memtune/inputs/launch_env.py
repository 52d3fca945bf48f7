"""Environment variables of the failing run -> EnvFacts.

Values come from up to four places; knowledge/vocabulary.yaml ``env.source_precedence`` says which
wins (Bridge ``env_vars`` are only defaults, the shell overrides them, the log shows what the run saw,
``--env`` is the user's last word).  This process's environment is never read: the helper runs
beside the agent, not inside the training job, so what it would see is not what the job saw.

The allocator string (``opt:val,opt2:val2``) is parsed the way PyTorch does it: spaces ignored,
later options override earlier ones, the first of the ``*ALLOC_CONF`` variables that is set is the
one read.  Option names and values PyTorch would reject are listed, not guessed at.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import UserError
from ..facts import EnvFacts
from ..knowledge import Knowledge


def _vocab(kb: Knowledge) -> Mapping[str, Any]:
    return (kb.tables.get("vocabulary") or {}).get("env") or {}


def parse_pairs(pairs: list[str], label: str = "--env") -> dict[str, str]:
    """``KEY=VALUE`` strings -> dict; UserError naming the bad pair."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        key = key.strip()
        if key.startswith("export "):
            key = key[7:].strip()
        if not eq or not key or not key.replace("_", "").isalnum():
            raise UserError(f"{label} {pair!r}: expected KEY=VALUE, "
                            "e.g. PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[key] = value
    return out


def read_env(pairs: list[str], log_text_env: Mapping[str, str] | None = None,
             config_env: Mapping[str, Any] | None = None, *, kb: Knowledge) -> EnvFacts:
    """Merge the environment sources and read the allocator and NCCL settings from them."""
    vocab = _vocab(kb)
    sources: dict[str, Mapping[str, Any]] = {}
    if config_env:
        sources["config"] = {str(k): str(v) for k, v in config_env.items()}
    if log_text_env:
        sources["log"] = dict(log_text_env)
    if pairs:
        sources["cli"] = parse_pairs(pairs)
    if not sources:
        return EnvFacts()
    variables: dict[str, str] = {}
    for name in vocab.get("source_precedence") or ("config", "log", "cli"):
        variables.update(sources.get(name) or {})
    return facts_from_variables(variables, vocab)


def env_from_config(config: Any) -> dict[str, str]:
    """The environment a config carries (Bridge ``env_vars``, a launch script's exports) as strings.

    Accepts a TrainingConfig or the mapping itself; pass the result to ``read_env(config_env=...)``,
    where it ranks below the shell, as Bridge's ``setdefault`` on the process environment does.
    """
    env_vars = getattr(config, "env_vars", config)
    if not isinstance(env_vars, Mapping):
        return {}
    return {str(k): str(v) for k, v in env_vars.items()}


def facts_from_variables(variables: Mapping[str, str], vocab: Mapping[str, Any]) -> EnvFacts:
    conf_vars = list(vocab.get("alloc_conf_vars") or ())
    present = [v for v in conf_vars if v in variables]
    conf_var = present[0] if present else None
    conf = variables.get(conf_var) if conf_var else None
    ignored = [v for v in present[1:] if variables[v] != conf]
    options = parse_alloc_conf(conf or "")
    known: Mapping[str, Any] = vocab.get("alloc_options") or {}
    unknown = [k for k in options if k not in known]
    invalid = [f"{k}:{v}" for k, v in options.items() if k in known and not _valid(v, known[k])]
    seg = options.get("expandable_segments")
    expandable = False if seg is None else {"True": True, "False": False}.get(seg)
    return EnvFacts(
        provided=True,
        variables=dict(variables),
        alloc_conf=conf,
        alloc_options=options,
        expandable_segments=expandable,
        allocator_backend=options.get("backend", "native"),
        nccl_graph_register=variables.get("NCCL_GRAPH_REGISTER"),
        avoid_record_streams=variables.get("TORCH_NCCL_AVOID_RECORD_STREAMS"),
        alloc_conf_var=conf_var,
        alloc_conf_ignored=ignored,
        alloc_conf_unknown=unknown,
        alloc_conf_invalid=invalid,
    )


def parse_alloc_conf(text: str) -> dict[str, str]:
    """``opt:val,opt2:val2`` -> {opt: val}; brackets ([256:1,512:2]) stay whole, later options win."""
    options: dict[str, str] = {}
    depth, buf, items = 0, [], []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            items.append("".join(buf))
            buf = []
        elif ch != " ":
            buf.append(ch)
    items.append("".join(buf))
    for item in items:
        if not item:
            continue
        key, _, value = item.partition(":")
        options[key] = value
    return options


def _valid(value: str, spec: Mapping[str, Any]) -> bool:
    kind = spec.get("kind")
    if kind == "bool":
        return value in ("True", "False")
    if kind == "int":
        return value.isdigit()
    if kind == "number":
        try:
            float(value)
        except ValueError:
            return False
        return True
    if kind == "choice":
        return value in (spec.get("choices") or [])
    return True
