"""Read a training configuration (Bridge YAML, Megatron-LM args, HF config.json) into TrainingConfig.

Every reader funnels its (key, value, location) triples through ``Builder.set``, so type checks,
list parsing and error wording are the same whatever the source.  The key tables below are a
schema mapping (a Bridge / Megatron attribute name -> a TrainingConfig field), not domain facts;
recipe names, PEFT classes and dataset kinds are looked up in knowledge/vocabulary.yaml.

Bad values raise UserError naming file, line and key; keys memtune does not use are skipped, and
those that look like a misspelling of a key it does use become warnings in ``TrainingConfig.warnings``.
"""

from __future__ import annotations

import ast
import re
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..facts import TrainingConfig
from ..knowledge import Knowledge
from ..textfmt import brief as _brief
from . import limits

# --- the TrainingConfig fields and the kind of value each holds ---------------------------------


def _field_kinds() -> dict[str, str]:
    hints = typing.get_type_hints(TrainingConfig)
    kinds: dict[str, str] = {}
    for f in fields(TrainingConfig):
        hint = hints[f.name]
        is_union = typing.get_origin(hint) in (typing.Union, types.UnionType)
        args = [a for a in typing.get_args(hint) if a is not type(None)] if is_union else [hint]
        origins = {typing.get_origin(a) or a for a in args}
        if len(origins) != 1:
            kinds[f.name] = "any"
        else:
            kinds[f.name] = {bool: "bool", int: "int", float: "float", str: "str", list: "list",
                             dict: "dict"}.get(origins.pop(), "any")
    return kinds


FIELD_KINDS = _field_kinds()
# Physical counts and sizes: a value below 1 is a typo, not a layout (Megatron asserts on each).
# The other integer fields may be 0 (no MTP layers, no offloaded layers, no data-loader workers),
# never negative; fractions lie in [0, 1]; no number is NaN or infinite.
AT_LEAST_ONE = frozenset({
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
    "context_parallel_size", "expert_model_parallel_size", "expert_tensor_parallel_size", "data_parallel_size",
    "world_size", "micro_batch_size", "global_batch_size", "seq_length", "num_layers", "hidden_size",
    "ffn_hidden_size", "num_attention_heads", "num_query_groups", "kv_channels", "vocab_size", "padded_vocab_size",
    "make_vocab_size_divisible_by", "moe_router_topk", "moe_ffn_hidden_size", "max_position_embeddings",
    "mamba_num_heads", "mamba_head_dim", "mamba_state_dim", "mamba_num_groups",
    "microbatch_group_size_per_vp_stage", "num_distributed_optimizer_instances", "peft_dim",
})
FRACTIONS = frozenset({"activation_offload_fraction", "optimizer_offload_fraction", "hidden_dropout",
                       "attention_dropout"})
_INTERNAL = {"provided", "source", "warnings"}

# Bridge ConfigContainer sections (src/megatron/bridge/training/config.py @067f987df).
BRIDGE_SECTIONS = (
    "env_vars", "rng", "rerun_state_machine", "train", "model", "optimizer", "optimizer_config_override_provider",
    "ddp", "validation", "scheduler", "dataset", "logger", "tokenizer", "checkpoint", "dist", "ft", "straggler",
    "nvrx_straggler", "profiling", "peft", "comm_overlap", "mixed_precision", "tensor_inspect", "inprocess_restart",
)
# Sections whose keys map onto the TrainingConfig field of the same name.  Later sections win:
# Bridge applies mixed_precision onto model/optimizer/ddp, and the data loader's sequence length
# is the one activations are built from.
SAME_NAME_SECTIONS = ("model", "train", "optimizer", "ddp", "dist", "checkpoint", "comm_overlap", "dataset",
                      "mixed_precision")
SECTION_ORDER = ("model", "train", "optimizer", "ddp", "dist", "checkpoint", "comm_overlap", "profiling", "peft",
                 "dataset", "mixed_precision")

# "section.key" -> field, or (field, value-to-set-when-the-key-is-true).
BRIDGE_KEYS: dict[str, str | tuple[str, Any]] = {
    "model.seq_length": "seq_length",
    "dataset.sequence_length": "seq_length",
    "dataset.seq_length": "seq_length",
    "ddp.nccl_ub": "use_nccl_ub",
    "ddp.use_custom_fsdp": "use_megatron_fsdp",
    "model.cuda_graph_modules": "cuda_graph_scope",
    "model.enable_cuda_graph": ("cuda_graph_impl", "local"),
    "model.external_cuda_graph": ("cuda_graph_impl", "transformer_engine"),
    "mixed_precision.fp8_param": "fp8_param_gather",
    "peft.dim": "peft_dim",
    "peft.target_modules": "peft_target_modules",
    "peft.sequence_parallel_input_regather": "sequence_parallel_input_regather",
    "profiling.record_memory_history": "record_memory_history",
}
# Keys that are read for their meaning, not copied into a field.
BRIDGE_SPECIAL = {"peft._target_", "dataset._target_", "model._target_", "checkpoint.pretrained_checkpoint",
                  "checkpoint.finetune"}

_TORCH_DTYPES = {"float32": "fp32", "float": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16",
                 "uint8": "uint8", "float8_e4m3fn": "fp8"}
# Enums Bridge dumps as constructor calls ({_target_: ...AttnBackend, _args_: [5]}); values from
# megatron/core/transformer/enums.py @d98e8a64.
_ENUMS = {"AttnBackend": {1: "flash", 2: "fused", 3: "unfused", 4: "local", 5: "auto"},
          "CudaGraphModule": {1: "attn", 2: "mlp", 3: "moe", 4: "moe_router", 5: "moe_preprocess", 6: "mamba"},
          "CudaGraphScope": {1: "full_iteration", 2: "attn", 3: "mlp", 4: "moe", 5: "moe_router",
                             6: "moe_preprocess", 7: "mamba", 8: "full_iteration_inference"}}
# Settings Megatron-Core takes from a closed set and refuses otherwise (TransformerConfig.__post_init__, the
# Fp8Recipe enum, CudaGraphModule[name] in cuda_graph_config.normalize_cuda_graph_modules; megatron/core @d98e8a64):
# an estimate for a value Megatron-Core would refuse at startup describes no run.  Compared exactly, as there.
ALLOWED_VALUES: dict[str, tuple[str, ...]] = {
    "recompute_granularity": ("full", "selective"),
    "recompute_method": ("uniform", "block"),
    "cuda_graph_impl": ("none", "local", "transformer_engine", "full_iteration"),
    "cuda_graph_scope": ("attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba",
                         "full", "full_iteration", "full_iteration_inference"),  # the last three deprecated
    "fp8": ("e4m3", "hybrid"),
    "fp8_recipe": ("delayed", "tensorwise", "mxfp8", "blockwise", "custom"),
    "fp4": ("e2m1",),
}


# Short names launchers take for a value: Megatron-Bridge's performance scripts take --fp8_recipe ds / cs / mx / ss
# for delayed, current (tensorwise), MXFP8 and sub-channel (blockwise) scaling (scripts/performance,
# get_precision_config).
VALUE_ALIASES: dict[str, dict[str, str]] = {
    "fp8_recipe": {"ds": "delayed", "cs": "tensorwise", "mx": "mxfp8", "ss": "blockwise"},
}

# Format settings a user may write as a plain switch ("fp8: true"): the format "on" stands for.
_SWITCHED_FORMATS = {"fp8": "hybrid", "fp4": "e2m1"}


def _where(path: str | None, line: int | None, key: str) -> str:
    loc = f"{path or '<config>'}:{line}" if line else (path or "<config>")
    return f"{loc}: {key}"


# --- value parsing -----------------------------------------------------------------------------


def parse_scalar(text: str) -> Any:
    """A Hydra/CLI scalar: null/None, true/false, numbers, quoted strings, [a,b] lists."""
    s = text.strip()
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        return s[1:-1]
    low = s.lower()
    if low in ("null", "none", "~", ""):
        return None
    if low == "true":
        return True
    if low == "false":
        return False
    if s.startswith("[") and s.endswith("]"):
        inner = s[1:-1].strip()
        return [parse_scalar(p) for p in _split_top(inner)] if inner else []
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        return s


def _split_top(text: str) -> list[str]:
    """Split on commas (or whitespace when there is no comma) outside brackets and quotes."""
    sep_is_comma = "," in text
    parts, depth, quote, buf = [], 0, "", []
    for ch in text:
        if quote:
            buf.append(ch)
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
            buf.append(ch)
        elif ch in "[(":
            depth += 1
            buf.append(ch)
        elif ch in "])":
            depth -= 1
            buf.append(ch)
        elif depth == 0 and ((ch == "," and sep_is_comma) or (ch.isspace() and not sep_is_comma)):
            if "".join(buf).strip():
                parts.append("".join(buf).strip())
            buf = []
        else:
            buf.append(ch)
    if "".join(buf).strip():
        parts.append("".join(buf).strip())
    return parts


def layer_freq(value: Any) -> Any:
    """Megatron's moe_layer_freq: an int, a list of 0/1, or a Python list expression like ([0]*3+[1]*58)."""
    if value is None or isinstance(value, (int, list)) and not isinstance(value, bool):
        return value
    text = str(value).strip()
    if re.fullmatch(r"\d{1,4000}", text):  # int() refuses > 4300 digits
        return int(text)
    try:
        result = _eval_list(ast.parse(text, mode="eval").body)
    except (SyntaxError, ValueError, TypeError, RecursionError):
        return text
    return result


_MAX_EXPANDED = 1 << 20  # far above any layer count; bounds list expressions and layouts, not a model fact


def _eval_list(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.List):
        return [_eval_list(e) for e in node.elts]
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        left, right = _eval_list(node.left), _eval_list(node.right)
        if isinstance(node.op, ast.Mult) and isinstance(left, list) != isinstance(right, list):
            items, times = (left, right) if isinstance(left, list) else (right, left)
            if len(items) * times > _MAX_EXPANDED:  # [1]*99999999999 would exhaust memory
                raise ValueError("list expression too long")
        return left + right if isinstance(node.op, ast.Add) else left * right
    raise ValueError("not a list expression")


def _object_value(value: Any) -> Any:
    """What a dumped Python object stands for: a dtype, a function's name, an enum member, else None."""
    if isinstance(value, Mapping) and "_target_" in value:
        target = str(value["_target_"])
        cls = target.rsplit(".", 1)[-1]
        args = value.get("_args_") or []
        if cls in _ENUMS and args:
            return _ENUMS[cls].get(args[0])
        if target.startswith("torch.") or value.get("_call_") is False:
            return _object_value(target)
        return None
    if isinstance(value, str) and value.startswith("torch."):
        tail = value.rsplit(".", 1)[-1]
        return _TORCH_DTYPES.get(tail, tail)
    return value


def _as_int(value: Any, where: str) -> int:
    if isinstance(value, bool):
        raise UserError(f"{where}: expected an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*[-+]?\d{1,18}\s*", value):
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*[-+]?\d+\s*", value):
        raise UserError(f"{where}: {len(value.strip())}-digit integer; no training setting is that large")
    raise UserError(f"{where}: expected an integer, got {_brief(value)}")


_MAX_SETTING = 2**53  # past any count or size a training run has, and exact as a float


def _in_range(name: str, number: int | float, where: str) -> int | float:
    """Refuse NaN, infinities, negatives, values below 1 for counts and sizes, fractions outside [0, 1]."""
    if number != number or number in (float("inf"), float("-inf")):
        raise UserError(f"{where}: {number} is not a number a training setting can have")
    if abs(number) > _MAX_SETTING:
        raise UserError(f"{where}: {_brief(number)} is larger than any training setting")
    if name in FRACTIONS and not 0 <= number <= 1:
        raise UserError(f"{where}: {number} is outside [0, 1]")
    if name in AT_LEAST_ONE and number < 1:
        raise UserError(f"{where}: {number} is below 1; a size or count must be at least 1")
    if number < 0:
        raise UserError(f"{where}: {number} is negative")
    return number


def coerce(name: str, value: Any, where: str) -> Any:
    """Convert ``value`` to the kind of TrainingConfig field ``name``; UserError when it cannot be."""
    if value is None:
        return None
    kind = FIELD_KINDS[name]
    if name == "moe_layer_freq":
        return layer_freq(value)
    if name == "cuda_graph_scope":
        return _graph_scope(value, where)
    if name == "pipeline_model_parallel_layout" and isinstance(value, list):
        value = _layout_text(value)
    if name == "pipeline_model_parallel_layout" and isinstance(value, str) and _layout_chars(value) > _MAX_EXPANDED:
        raise UserError(f"{where}: expands to over {_MAX_EXPANDED} layer symbols, which no model has")
    if kind == "bool":
        return as_bool(value, where)
    if kind == "int":
        return _in_range(name, _as_int(value, where), where)
    if kind == "float":
        try:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                number = float(value)
            else:
                number = float(str(value)[:100])
        except (ValueError, OverflowError):  # OverflowError: an int past float range
            raise UserError(f"{where}: expected a number, got {_brief(value)}") from None
        return _in_range(name, number, where)
    if kind == "str":
        value = _object_value(value)
        if value is None:
            return None
        if name in _SWITCHED_FORMATS and (isinstance(value, bool) or str(value).strip().lower() in ("true", "false")):
            # "fp8: true" says FP8 is on without naming its format; both formats hold one byte per element, so the
            # estimate does not depend on which (TE's DelayedScaling recipe defaults to HYBRID); false is off
            on = value if isinstance(value, bool) else str(value).strip().lower() == "true"
            return _SWITCHED_FORMATS[name] if on else None
        if isinstance(value, (Mapping, list)):
            raise UserError(f"{where}: expected a single value, got {value!r}")
        text = str(value)
        return _allowed(name, VALUE_ALIASES.get(name, {}).get(text.strip().lower(), text), where)
    if kind == "list":
        if isinstance(value, str):
            return coerce_list(value)
        if isinstance(value, (list, tuple)):
            return [str(v) for v in value]
        raise UserError(f"{where}: expected a list, got {value!r}")
    if kind == "dict":
        if not isinstance(value, Mapping):
            raise UserError(f"{where}: expected a mapping, got {value!r}")
        return {str(k): str(v) for k, v in value.items()}
    return value


# MCore PipelineParallelLayerLayout letters (megatron/core/transformer/pipeline_parallel_layer_layout.py).
_LAYOUT_LETTERS = {"embedding": "E", "decoder": "t", "mtp": "m", "loss": "L"}


def _layout_text(stages: list[Any]) -> str:
    """A layout given as a list of stages (lists of layer names) -> the string form, e.g. ``Et|tt|tL``."""
    return "|".join("".join(_LAYOUT_LETTERS.get(str(layer).rsplit(".", 1)[-1].lower(), str(layer)) for layer in stage)
                    if isinstance(stage, list) else str(stage) for stage in stages)


def _layout_chars(text: str) -> int:
    """Length of a layout once its ``(...)*N`` / ``tN`` repeats are expanded, counted without expanding it."""
    stack, last = [0], 0
    for m in re.finditer(r"\*?(\d+)|.", text):
        tok, digits = m.group(), m.group(1)
        if tok == "(":
            stack.append(0)
            last = 0
        elif tok == ")" and len(stack) > 1:
            last = stack.pop()
            stack[-1] += last
        elif digits:
            stack[-1] += last * ((int(digits) if len(digits) < 10 else 10**10) - 1)
            last = 0
        else:
            stack[-1] += 1
            last = 1
    return sum(stack)


def as_bool(value: Any, where: str) -> bool:
    """YAML/CLI booleans: true/false, 1/0, yes/no; anything else is a UserError at ``where``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.strip().lower() in ("true", "1", "yes")
    raise UserError(f"{where}: expected true or false, got {value!r}")


def _allowed(name: str, value: str, where: str) -> str:
    """``value``, or a UserError naming the values Megatron-Core accepts for ``name`` (ALLOWED_VALUES)."""
    allowed = ALLOWED_VALUES.get(name)
    if allowed is not None and value not in allowed:
        raise UserError(f"{where}: {_brief(value)} is not one of {', '.join(allowed)} "
                        "(Megatron-Core refuses any other value)")
    return value


def _graph_scope(value: Any, where: str) -> list[str]:
    """MCore cuda_graph_modules: "full" (deprecated) and an empty list both mean the whole layer.

    A name may carry its enum's class (``CudaGraphScope.attn``); a dumped object memtune cannot name is kept
    unchecked, as before."""
    items = value if isinstance(value, (list, tuple)) else coerce_list(value)
    names = []
    for item in items:
        named = _object_value(item)
        text = str(named).split(".")[-1].lower()
        if named is not None and text:
            _allowed("cuda_graph_scope", text, where)
        names.append(text)
    return [n for n in names if n and n != "full"]


def coerce_list(value: Any) -> list[str]:
    """``[a, b]``, ``a,b`` or ``a b`` -> ["a", "b"] (Hydra lists and Megatron nargs strings)."""
    text = str(value).strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    return [p.strip("'\" ") for p in _split_top(text)]


# --- the builder every reader feeds ------------------------------------------------------------


class Builder:
    """Collects field values with where each came from; later sets win, conflicts are noted."""

    def __init__(self, source: str, path: str | None, hints: bool = True) -> None:
        self.source = source
        self.path = path
        self.hints = hints  # "did you mean" suggestions for keys memtune does not read (users' input only)
        self.hints_left = MAX_TYPO_HINTS
        self.values: dict[str, Any] = {}
        self.origin: dict[str, str] = {}
        self.warnings: list[str] = []

    def set(self, name: str, value: Any, key: str, line: int | None = None) -> None:
        where = _where(self.path, line, key)
        value = coerce(name, value, where)
        old = self.values.get(name)
        if name in self.values and old is not None and value is not None and old != value:
            self.warnings.append(f"{where} = {value!r} replaces {old!r} set by {self.origin[name]}")
        self.values[name] = value
        self.origin[name] = f"line {line}: {key}" if line else key

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def build(self, base: TrainingConfig | None = None) -> TrainingConfig:
        cfg = base if base is not None else TrainingConfig()
        changes = dict(self.values)
        changes["provided"] = True
        if base is None or base.source is None:
            changes["source"] = self.source
        changes["warnings"] = [*(cfg.warnings if base is not None else []), *self.warnings]
        return replace(cfg, **changes)


MAX_TYPO_HINTS = 32  # per file: a config with 200k unknown keys is not a typo, and each hint costs a fuzzy match
_MAX_HINT_KEY_CHARS = 100  # no real key is longer; fuzzy matching is quadratic in the key's length


def near_miss(key: str, known: Iterable[str]) -> str | None:
    """The known key ``key`` probably misspells, or None (longer/shorter variants are other keys)."""
    import difflib  # only for a typo hint

    if len(key) > _MAX_HINT_KEY_CHARS:
        return None

    for cand in difflib.get_close_matches(key, list(known), n=3, cutoff=0.88):
        if cand == key or cand.startswith(key) or key.startswith(cand) or abs(len(cand) - len(key)) > 2:
            continue
        if re.sub(r"\d", "", cand) == re.sub(r"\d", "", key):
            continue  # fp4_recipe vs fp8_recipe: a sibling key, not a typo
        return cand
    return None


# --- Bridge YAML -------------------------------------------------------------------------------


def load_yaml_tree(text: str, path: str) -> tuple[Any, dict[tuple[str, ...], int]]:
    """Parse YAML tolerating unknown tags; returns (value, {key path: 1-based line}) for two levels (yamltree.py)."""
    from .yamltree import load_yaml_tree as load

    return load(text, path)


def _class_name(target: Any) -> str | None:
    return str(target).rsplit(".", 1)[-1] if target else None


def _vocab(kb: Knowledge) -> dict[str, Any]:
    return kb.tables.get("vocabulary") or {}


def read_bridge_config(path: str | Path, kb: Knowledge) -> TrainingConfig:
    """A Bridge ConfigContainer dump (or a partial override YAML) -> TrainingConfig."""
    path = Path(path)
    text = _read_text(path)
    tree, lines = load_yaml_tree(text, str(path))
    return bridge_from_tree(tree, lines, str(path), kb)


def bridge_from_tree(tree: Any, lines: Mapping[tuple[str, ...], int], path: str, kb: Knowledge) -> TrainingConfig:
    if not isinstance(tree, Mapping):
        raise UserError(f"{path}:1: expected a mapping of Bridge config sections (model:, train:, ...)")
    b = Builder("bridge-yaml", path)
    vocab: dict[str, Any] | None = None
    for section in tree:
        if section not in BRIDGE_SECTIONS and section != "_target_":
            b.warn(f"{path}:{lines.get((section,), '?')}: {section}: not a Bridge ConfigContainer section; ignored")
    for section in SECTION_ORDER:
        body = tree.get(section)
        if section == "mixed_precision" and isinstance(body, str):
            vocab = vocab if vocab is not None else _vocab(kb)
            _apply_precision_recipe(b, body, lines.get((section,)), vocab)
            continue
        if section == "peft" and isinstance(body, str):
            vocab = vocab if vocab is not None else _vocab(kb)
            _apply_peft_name(b, body, f"{path}:{lines.get((section,), '?')}: peft", vocab)
            continue
        if not isinstance(body, Mapping):
            continue
        for key, value in body.items():
            _bridge_key(b, section, key, value, lines.get((section, key)))
    if isinstance(tree.get("env_vars"), Mapping):
        b.set("env_vars", tree["env_vars"], "env_vars", lines.get(("env_vars",)))
    vocab = vocab if vocab is not None else _vocab(kb)
    _bridge_meaning(b, tree, lines, vocab)
    return b.build()


def _bridge_key(b: Builder, section: str, key: str, value: Any, line: int | None) -> None:
    dotted = f"{section}.{key}"
    target = BRIDGE_KEYS.get(dotted)
    if target is None and section in SAME_NAME_SECTIONS and key in FIELD_KINDS and key not in _INTERNAL:
        target = key
    if target is None:
        if dotted in BRIDGE_SPECIAL or key.startswith("_"):
            return
        known = [k.split(".", 1)[1] for k in BRIDGE_KEYS if k.startswith(section + ".")]
        if section in SAME_NAME_SECTIONS:
            known += [k for k in FIELD_KINDS if k not in _INTERNAL]
        guess = None
        if b.hints and b.hints_left > 0:
            b.hints_left -= 1
            guess = near_miss(key, known)
        if guess:
            b.warn(f"{_where(b.path, line, dotted)}: not a key memtune reads; did you mean {section}.{guess}?")
        return
    if isinstance(target, tuple):
        name, when_true = target
        if value is not None and as_bool(value, _where(b.path, line, dotted)):
            b.set(name, when_true, dotted, line)
        return
    b.set(target, value, dotted, line)


def _bridge_meaning(b: Builder, tree: Mapping[str, Any], lines: Mapping[tuple[str, ...], int],
                    vocab: Mapping[str, Any]) -> None:
    """Task, PEFT kind and model name, which Bridge encodes in class names."""
    peft = tree.get("peft")
    if isinstance(peft, Mapping):
        cls = _class_name(peft.get("_target_"))
        kind = (vocab.get("peft_classes") or {}).get(cls or "")
        line = lines.get(("peft", "_target_"), lines.get(("peft",)))
        if kind is None:
            b.warn(f"{_where(b.path, line, 'peft._target_')}: PEFT class {cls!r} is not in vocabulary.yaml "
                   "peft_classes; treated as LoRA-like")
            kind = cls
        b.set("peft", kind, "peft._target_", line)
        b.set("task", "lora", "peft._target_", line)
    if "task" not in b.values:
        dataset = tree.get("dataset")
        cls = _class_name(dataset.get("_target_")) if isinstance(dataset, Mapping) else None
        task = (vocab.get("dataset_tasks") or {}).get(cls or "")
        ckpt = tree.get("checkpoint")
        if task is None and isinstance(ckpt, Mapping) and ckpt.get("finetune") is True:
            task = "sft"
        if task:
            b.set("task", task, "dataset._target_", lines.get(("dataset", "_target_")))
    model = tree.get("model")
    if isinstance(model, Mapping) and model.get("_target_"):
        name = _class_name(model["_target_"]) or ""
        b.set("model_name", name.removesuffix("ModelProvider").removesuffix("Provider") or name,
              "model._target_", lines.get(("model", "_target_")))


def _apply_precision_recipe(b: Builder, name: str, line: int | None, vocab: Mapping[str, Any]) -> None:
    recipes = vocab.get("precision_recipes") or {}
    recipe = recipes.get(name.replace("-", "_"))
    if recipe is None:
        b.warn(f"{_where(b.path, line, 'mixed_precision')}: recipe {name!r} is not in vocabulary.yaml "
               "precision_recipes; precision left unknown")
        return
    for field_name, value in recipe.items():
        b.set(field_name, value, f"mixed_precision={name}", line)


def _apply_peft_name(b: Builder, name: str, where: str, vocab: Mapping[str, Any]) -> None:
    if name.strip().lower() in ("none", "null", ""):
        b.set("peft", None, "peft")
        return
    kind = (vocab.get("peft_names") or {}).get(name.strip().lower())
    if kind is None:
        b.warn(f"{where}: PEFT scheme {name!r} is not in vocabulary.yaml peft_names; treated as LoRA-like")
        kind = name
    b.set("peft", kind, "peft")
    b.set("task", "lora", "peft")


# --- Hydra-style overrides ---------------------------------------------------------------------

# An RL or fine-tuning framework's own override key (verl, NeMo-RL, SkyRL, OpenRLHF): its last dotted part is the
# Megatron attribute it sets where the framework passes Megatron's name through
# (actor_rollout_ref.actor.megatron.tensor_model_parallel_size, policy.megatron_cfg.pipeline_model_parallel_size,
# trainer.policy.megatron_config.context_parallel_size), or one of the framework names below.  Keys of the inference
# engine, the reference, critic or reward models and the teacher describe other processes, not the trained one.
_PASSED_THROUGH = frozenset({
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
    "context_parallel_size", "expert_model_parallel_size", "expert_tensor_parallel_size", "sequence_parallel",
    "recompute_granularity", "recompute_method", "recompute_num_layers", "recompute_modules",
    "use_distributed_optimizer", "optimizer_cpu_offload", "optimizer_offload_fraction", "micro_batch_size",
    "global_batch_size",
    # the FP8 parameter settings Megatron's TransformerConfig / DDP config take by these names (Megatron-LM#3461's
    # bare fp8_recipe=mxfp8 fp8_param_gather=true reuse_grad_buf_for_mxfp8_param_ag=true)
    "fp8_recipe", "fp8_param_gather", "reuse_grad_buf_for_mxfp8_param_ag",
    # the CUDA-graph settings by TransformerConfig's names, as Megatron-Bridge's performance launcher takes them
    # (cuda_graph_impl=transformer_engine cuda_graph_scope=[attn,moe_router], Megatron-Bridge#3845)
    "cuda_graph_impl", "cuda_graph_scope",
    # the model's depth and the run's sequence by Megatron-LM's argument names, which are TransformerConfig's and
    # ours: a bare num_layers=64 (MindSpeed-LLM's DeepSeek-V3 script pads 61 layers to 64 with noop_layers) is the
    # run's, not the preset's 61.  Widths stay out: a width with the rest of the shape from the nearest preset mixes
    # two models (bigscience tr11: hidden 14400 beside a 175B preset's FFN and vocabulary)
    "num_layers", "seq_length", "mtp_num_layers"})
FRAMEWORK_KEYS = {
    # verl (verl/trainer/config/ppo_megatron_trainer.yaml): the actor's per-GPU micro-batch
    "ppo_micro_batch_size_per_gpu": "micro_batch_size",
    # OpenRLHF (openrlhf/cli/train_ppo_ray.py, train_sft.py): per-GPU micro-batch; DeepSpeed CPU Adam
    "micro_train_batch_size": "micro_batch_size",
    # ms-swift / HF Trainer arguments: the per-device micro-batch
    "per_device_train_batch_size": "micro_batch_size",
    # TorchTitan's [training] local_batch_size and NeMo Automodel's step_scheduler.local_batch_size: the per-rank
    # batch of one forward (the global batch is accumulated from it); TorchTitan's name for it before that
    "local_batch_size": "micro_batch_size",
    "training.batch_size": "micro_batch_size",
}
# TorchTitan's [activation_checkpoint] mode (full: every block rerun in backward; selective: op / layer SAC) and the
# HF Trainer's gradient_checkpointing (each decoder layer rerun from its input: full recompute, one layer at a time)
_CHECKPOINT_SECTIONS = frozenset({"activation_checkpoint", "activation_checkpointing"})


def _deepspeed_fields(parts: list[str], value: Any) -> dict[str, Any]:
    """The Megatron fields DeepSpeed's ZeRO keys stand for, as fine-tuning frameworks pass them: ZeRO-1/2 shard the
    optimizer state over data parallel (the distributed optimizer), ZeRO-3 shards weights and gradients too (as torch
    FSDP does), and an optimizer offloaded to CPU or NVMe is all of it (fraction 1.0).  Keys: the DeepSpeed config's
    zero_optimization.stage and offload_optimizer.device, OpenRLHF / DeepSpeed-Chat --zero_stage and --offload /
    --adam_offload, ms-swift's deepspeed=zero3_offload presets and LLaMA-Factory's examples/deepspeed/ds_z3_config.json
    files; ColossalAI Gemini's placement_policy=cpu keeps the optimizer state (and the FP32 master weights) on the
    host."""
    name, text = parts[-1], str(value).strip().lower()
    stage = None
    offload = False
    if name == "zero_stage" or (name == "stage" and "zero_optimization" in parts):
        stage = int(text) if text.isdigit() else None
    elif name == "device" and len(parts) > 1 and parts[-2] == "offload_optimizer":
        offload = text in ("cpu", "nvme")
    elif name in ("offload", "adam_offload"):  # a switch, or the device it names ("zero_optimization.offload=cpu")
        offload = text in ("true", "1", "yes", "", "cpu", "nvme")
    elif name in ("placement_policy", "tensor_placement_policy"):  # ColossalAI Gemini: "cpu" keeps it on the host
        offload = text == "cpu"
    elif name == "deepspeed" and (m := re.search(r"(?:zero[_-]?|\bds_z)([123])(?:[_-]?(offload))?", text)):
        stage, offload = int(m.group(1)), bool(m.group(2))
    fields: dict[str, Any] = {}
    if stage in (1, 2):  # the weights stay whole on every rank: no words of the question make it a full shard
        fields.update(use_distributed_optimizer=True, use_torch_fsdp2=False)
        if stage == 2:  # ...and stage 2 shards the gradients as well: Megatron FSDP's optim_grads strategy
            fields.update(data_parallel_sharding_strategy="optim_grads")
    elif stage == 3:
        fields.update(use_distributed_optimizer=True, use_torch_fsdp2=True)
    if offload:
        fields.update(optimizer_cpu_offload=True, optimizer_offload_fraction=1.0)
    return fields


_OTHER_PROCESSES = frozenset({"rollout", "ref", "critic", "reward", "reward_model", "rm", "generation", "vllm_cfg",
                              "sglang_cfg", "inference", "teacher", "judge", "vllm", "sglang"})


def _framework_key(b: Builder, parts: list[str], value: Any, label: str, megatron: bool = False) -> bool:
    """Set the TrainingConfig field a framework's own key names (see FRAMEWORK_KEYS); False when it names none."""
    if any(p in _OTHER_PROCESSES or p.startswith(("vllm_", "sglang_", "rollout_")) for p in parts):
        return False
    name = parts[-1]
    zero = _deepspeed_fields(parts, value) if value is not None else {}
    for field, setting in zero.items():
        b.set(field, setting, label)
    if zero:
        return True
    if value is not None and _checkpoint_key(b, parts, value, label, megatron):
        return True
    # a key the whole dotted name identifies ("training.batch_size"), else its last part
    field = name if name in _PASSED_THROUGH else FRAMEWORK_KEYS.get(".".join(parts)) or FRAMEWORK_KEYS.get(name)
    if field is None or value is None:
        return False
    b.set(field, value, label)
    # a framework passes Megatron-LM's arguments through, where --optimizer-offload-fraction defaults to 1.0 (the
    # whole optimizer), not Megatron-Core's 0.0: an offload switched on this way is all of it unless a fraction is set
    if field == "optimizer_cpu_offload" and value is True and "optimizer_offload_fraction" not in b.values:
        b.set("optimizer_offload_fraction", 1.0, label)
    return True


def _checkpoint_key(b: Builder, parts: list[str], value: Any, label: str, megatron: bool) -> bool:
    """Set recompute_granularity from an activation-checkpointing key outside Megatron (see _CHECKPOINT_SECTIONS);
    False when the key is none of them. A mode of none / off is no recompute, which is Megatron's default too.
    ``megatron``: the overrides name a Megatron backend, whose recompute keys decide, not the trainer's
    gradient_checkpointing flag (SkyRL#700: true by default and ignored by its Megatron worker)."""
    text = str(value).strip().lower()
    if parts[-1] == "mode" and len(parts) > 1 and parts[-2] in _CHECKPOINT_SECTIONS:
        mode = text if text in ("full", "selective") else None
    elif parts[-1] == "gradient_checkpointing" and not megatron:
        mode = "full" if value is True or text in ("true", "1", "yes") else None
    else:
        return False
    if mode:
        b.set("recompute_granularity", mode, label)
    if mode == "full":  # every block from its input, one at a time: Megatron's uniform method over 1 layer
        b.set("recompute_method", "uniform", label)
        b.set("recompute_num_layers", 1, label)
    return True


_TUNING_TYPE_KEYS = frozenset({"train_type", "finetuning_type"})
_OVERRIDE = re.compile(r"^(?P<op>\+\+|\+|~)?(?P<key>[A-Za-z_][\w.]*)(?:=(?P<value>.*))?$", re.S)


def apply_overrides(cfg: TrainingConfig, overrides: list[str], kb: Knowledge, hints: bool = True) -> TrainingConfig:
    """Apply Bridge/Hydra ``section.key=value`` overrides (``+key=v`` adds, ``~key`` removes).

    ``hints=False`` for the knowledge base's own override lines: keys memtune does not read (Bridge keys with no
    memory effect) are skipped without looking for a near miss.
    """
    if not overrides:
        return cfg
    b = Builder("overrides", None, hints)
    vocab: dict[str, Any] | None = None
    megatron = any("megatron" in raw.lower() for raw in overrides)  # a Megatron backend: its own recompute keys
    for raw in overrides:
        label = f"override {raw!r}"
        b.path = label
        text = raw.strip()
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
            text = text[1:-1]
        m = _OVERRIDE.match(text)
        if not m:
            raise UserError(f"override {raw!r}: expected section.key=value, +section.key=value or ~section.key")
        op, key, value_text = m.group("op"), m.group("key"), m.group("value")
        if op == "~":
            value: Any = None
        elif value_text is None:
            raise UserError(f"override {raw!r}: missing '=value' (use ~{key} to remove a key)")
        else:
            value = parse_scalar(value_text)
            if isinstance(value, str) and value.startswith("[") != value.endswith("]"):
                raise UserError(f"override {raw!r}: unbalanced brackets in the value")
        parts = key.split(".")
        section = parts[0]
        if section not in BRIDGE_SECTIONS and _framework_key(b, parts, value, label, megatron):
            continue
        # ms-swift --train_type / LLaMA-Factory --finetuning_type name the PEFT scheme ("lora", "qlora"; "full" none)
        if key in _TUNING_TYPE_KEYS and isinstance(value, str):
            vocab = vocab if vocab is not None else _vocab(kb)
            if value.strip().lower() in (vocab.get("peft_names") or {}):
                _apply_peft_name(b, value, label, vocab)
            elif value.strip().lower() == "full":  # every weight trains: an adapter named elsewhere is not this run
                b.set("task", "sft", label)
            continue
        if len(parts) == 1:
            if section in ("mixed_precision", "peft") and isinstance(value, str):
                vocab = vocab if vocab is not None else _vocab(kb)
                if section == "mixed_precision":
                    _apply_precision_recipe(b, value, None, vocab)
                else:
                    _apply_peft_name(b, value, label, vocab)
            elif section == "peft" and value is None:
                b.set("peft", None, "peft")
            else:
                b.warn(f"{label}: memtune reads only section.key overrides here; ignored")
            continue
        if section not in BRIDGE_SECTIONS:
            b.warn(f"{label}: {section} is not a Bridge ConfigContainer section; ignored")
            continue
        if section == "env_vars" and len(parts) == 2:
            env = dict(cfg.env_vars)
            env.update(b.values.get("env_vars") or {})
            if value is None:
                env.pop(parts[1], None)
            else:
                env[parts[1]] = str(value)
            b.set("env_vars", env, label)
            continue
        if len(parts) != 2:
            continue  # nested objects (model.generation_config.x) hold nothing memtune reads
        _bridge_key(b, section, parts[1], value, None)
    return b.build(cfg)


def apply_sets(cfg: TrainingConfig, overrides: list[str], kb: Knowledge) -> TrainingConfig:
    """``--set`` items of ``estimate`` and ``plan``, later items winning: Bridge overrides (``section.key=value``)
    and bare TrainingConfig field names (``tensor_model_parallel_size=4``), except the two Bridge sections a recipe
    string names (``mixed_precision=bf16_with_fp8_current_scaling_mixed``, ``peft=lora``), read as overrides."""
    names = {f.name for f in fields(TrainingConfig)}
    run: list[str] = []  # consecutive Bridge overrides, applied together
    for raw in [*overrides, None]:
        key = None if raw is None else raw.partition("=")[0].strip().lstrip("+~")
        if key is not None and ("." in key or key in ("mixed_precision", "peft")):
            run.append(raw)
            continue
        cfg, run = apply_overrides(cfg, run, kb), []
        if raw is None:
            break
        name, eq, value = raw.partition("=")
        name = name.strip()
        if not eq or name not in names:
            raise UserError(f"--set {raw!r}: expected section.key=value or a layout field name=value")
        cfg = replace(cfg, **{name: coerce(name, parse_scalar(value.strip()), f"--set {raw!r}")})
    return cfg


# --- dispatch ----------------------------------------------------------------------------------

_TASK_CONFIG_MARK = re.compile(r"^_target_:\s*megatron\.bridge\.training\.config\.ConfigContainer\s*$", re.M)


def _read_text(path: Path) -> str:
    return limits.read_text(path, "a training config")


def read_config(path: str | Path, overrides: list[str] | None = None, *, kb: Knowledge) -> TrainingConfig:
    """Any supported config file, recognised by its content, then ``overrides`` on top."""
    path = Path(path)
    text = _read_text(path)
    cfg = _dispatch(text, path, kb)
    return apply_overrides(cfg, overrides or [], kb)


def _dispatch(text: str, path: Path, kb: Any) -> TrainingConfig:
    # each reader is imported only for the kind of file it reads (a Bridge YAML needs neither of the others)
    from importlib import import_module

    def hf_config() -> Any:
        return import_module(".hf_config", __package__)

    def megatron_args() -> Any:
        return import_module(".megatron_args", __package__)

    from .jsontext import parse_json

    stripped = text.lstrip()
    if stripped.startswith("{"):
        data = parse_json(text, path)
        if isinstance(data, Mapping) and hf_config().looks_like_hf(data):
            return hf_config().hf_from_mapping(data, str(path), kb=kb)
        if isinstance(data, Mapping) and isinstance(data.get("args"), Mapping):
            return megatron_args().args_from_mapping(data["args"], str(path), kb=kb)
        if isinstance(data, Mapping):
            return megatron_args().args_from_mapping(data, str(path), kb=kb)
        raise UserError(f"{path}:1: expected a JSON object (HF config.json or Megatron args)")
    yaml_suffix = path.suffix in (".yaml", ".yml")
    if not yaml_suffix and (path.suffix in (".sh", ".bash", ".slurm", ".sbatch") or _looks_like_shell(text)):
        return megatron_args().read_megatron_args(text, str(path), kb=kb)
    tree, lines = load_yaml_tree(_embedded_dump(text) or text, str(path))
    if isinstance(tree, Mapping):
        if isinstance(tree.get("MODEL_ARGS"), Mapping):
            env = tree.get("ENV_VARS") if isinstance(tree.get("ENV_VARS"), Mapping) else None
            return megatron_args().args_from_mapping(tree["MODEL_ARGS"], str(path), env, kb=kb)
        if tree and all(str(k).startswith("--") for k in tree):
            return megatron_args().args_from_mapping(tree, str(path), kb=kb)
        if any(k in BRIDGE_SECTIONS for k in tree):
            return bridge_from_tree(tree, lines, str(path), kb)
        if hf_config().looks_like_hf(tree):
            return hf_config().hf_from_mapping(tree, str(path), kb=kb)
    if not yaml_suffix and "--" in text:
        return megatron_args().read_megatron_args(text, str(path), kb=kb)
    raise UserError(f"{path}:1: not a Bridge config YAML, Megatron-LM launch script/args or HF config.json")


def _looks_like_shell(text: str) -> bool:
    """A shebang, an export, a bash array, or a torchrun/python command line."""
    return bool(re.search(r"(?m)^\s*(?:#!.*\b(?:ba)?sh\b|export\s|\w+=\(|torchrun\b|python3?\s)", text))


def _embedded_dump(text: str) -> str | None:
    """The YAML of a Bridge task-config dump printed inside a log, if there is one."""
    m = _TASK_CONFIG_MARK.search(text)
    if not m or m.start() == 0:
        return None
    out = []
    for line in text[m.start():].splitlines():
        if line and not (line.startswith((" ", "- ")) or re.match(r"^[A-Za-z_]\w*:( |$)", line)):
            break
        out.append(line)
    return "\n" * text[: m.start()].count("\n") + "\n".join(out)
