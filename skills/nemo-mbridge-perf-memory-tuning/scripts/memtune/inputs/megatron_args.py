"""Read Megatron-LM arguments from a command line, a launch script or an args mapping.

Launch scripts build the argument list in bash arrays from shell variables, so the reader does a
small, safe subset of what bash would: it splits words (quotes, ``\\`` continuations, comments),
remembers plain ``NAME=value`` assignments, expands ``$NAME`` / ``${NAME:-default}`` / ``$((a*b))``
and then reads every ``--flag value`` it finds.  Nothing is executed.  A flag whose value still
holds an unresolved ``$VAR`` is left unknown and reported in ``warnings``; so is a flag set twice
to different values (both branches of an ``if`` are read).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..facts import TrainingConfig
from ..knowledge import Knowledge
from . import limits
from .config import BRIDGE_SECTIONS, FIELD_KINDS, Builder, apply_overrides
from .megatron_names import NOT_FLAGS, RENAMED  # noqa: F401  (re-exported: the flag spellings)

# store_true flags that set fields to fixed values.
FLAGS: dict[str, dict[str, Any]] = {
    "swiglu": {"gated_linear_unit": True, "activation_func": "silu"},
    # TransformerConfig.add_bias_linear's only flag (argparse_meta); Megatron then also drops the QKV bias
    # unless --add-qkv-bias is given.
    "disable-bias-linear": {"add_bias_linear": False},
    "use-rotary-position-embeddings": {"position_embedding_type": "rope"},  # legacy spelling
    "quick-geglu": {"gated_linear_unit": True, "activation_func": "quick_gelu"},
    "squared-relu": {"activation_func": "squared_relu"},
    "untie-embeddings-and-output-weights": {"share_embeddings_and_output_weights": False},
    "recompute-activations": {"recompute_granularity": "selective"},
    "no-load-optim": {"load_optim": False},
    "enable-cuda-graph": {"cuda_graph_impl": "local"},
    "external-cuda-graph": {"cuda_graph_impl": "transformer_engine"},
    "accumulate-allreduce-grads-in-fp32": {"grad_reduce_in_fp32": True},
    "grad-reduce-in-bf16": {"grad_reduce_in_fp32": False},
}
# Read for derivations only (VPP, world size, grouped-query attention), never copied into a field.
AUX_INT = {"num-layers-per-virtual-pipeline-stage", "nproc-per-node", "nnodes"}
AUX_FLAG = {"group-query-attention"}
# Megatron defaults that hold when a flag is absent, applied only when the argument list defines
# the model (num-layers / hidden-size given) or the run (micro-batch / parallel sizes given).
ARCH_DEFAULTS = {"share_embeddings_and_output_weights": True, "gated_linear_unit": False,
                 "activation_func": "gelu", "multi_latent_attention": False}
RUN_DEFAULTS = {"sequence_parallel": False, "use_distributed_optimizer": False, "use_megatron_fsdp": False,
                "cpu_offloading": False, "optimizer_cpu_offload": False, "fp8_param_gather": False}
ARCH_MARKERS = ("num_layers", "hidden_size")
RUN_MARKERS = ("micro_batch_size", "tensor_model_parallel_size", "pipeline_model_parallel_size")
_ENTRYPOINT = re.compile(r"(?:^|/)pretrain_\w+\.py$")


def _normal(flag: str) -> str:
    return flag.strip().lstrip("-").replace("_", "-")


def _spec(flag: str) -> tuple[str, str, Any] | None:
    """(field or aux name, kind, fixed value) for a flag memtune reads, else None."""
    if flag in FLAGS:
        return flag, "const", FLAGS[flag]
    if flag in AUX_INT:
        return flag, "aux", None
    if flag in AUX_FLAG:
        return flag, "auxflag", None
    name = RENAMED.get(flag, flag.replace("-", "_"))
    if name in FIELD_KINDS and name not in NOT_FLAGS:
        return name, FIELD_KINDS[name], None
    if flag.startswith("no-"):
        name = flag[3:].replace("-", "_")
        if FIELD_KINDS.get(name) == "bool" and name not in NOT_FLAGS:
            return name, "const", {name: False}
    return None


# --- shell words -------------------------------------------------------------------------------


@dataclass
class Word:
    segments: list[tuple[str, str]]  # (text, mode): u = unquoted, d = "double", s = 'single'
    line: int
    op: bool = False  # a separator: newline ; & | ( ) < >

    @property
    def raw(self) -> str:
        return "".join(t for t, _ in self.segments)

    @property
    def quoted(self) -> bool:
        return any(m != "u" for _, m in self.segments)


@dataclass
class _Scan:
    words: list[Word] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def shell_words(text: str, path: str) -> _Scan:
    """Split shell text into words and separators, tracking the line each word starts on."""
    scan = _Scan()
    i, n, line = 0, len(text), 1
    segs: list[tuple[str, str]] = []
    buf: list[str] = []
    start = 1

    def end_word() -> None:
        nonlocal segs, buf
        if buf:
            segs.append(("".join(buf), "u"))
            buf = []
        if segs:
            scan.words.append(Word(segs, start))
            segs = []

    def begin() -> None:
        nonlocal start
        if not buf and not segs:
            start = line

    while i < n:
        c = text[i]
        if c == "\\":
            nxt = text[i + 1] if i + 1 < n else ""
            if nxt == "\n":
                line += 1
            else:
                begin()
                buf.append(nxt)
            i += 2
            continue
        if c in "'\"":
            begin()
            if buf:
                segs.append(("".join(buf), "u"))
                buf = []
            j, chunk = i + 1, []
            while j < n and text[j] != c:
                if c == '"' and text[j] == "\\" and j + 1 < n and text[j + 1] in '"\\$`\n':
                    j += 1
                    if text[j] == "\n":
                        line += 1
                        j += 1
                        continue
                elif text[j] == "\n":
                    line += 1
                chunk.append(text[j])
                j += 1
            if j >= n:
                scan.warnings.append(f"{path}:{start}: unclosed {c} quote; the rest of the file was read as one word")
            segs.append(("".join(chunk), "s" if c == "'" else "d"))
            i = j + 1
            continue
        if c == "$" and i + 1 < n and text[i + 1] in "({":
            begin()
            j = _balanced(text, i + 1)
            chunk = text[i:j]
            line += chunk.count("\n")
            buf.append(chunk)
            i = j
            continue
        if c == "#" and not buf and not segs:
            while i < n and text[i] != "\n":
                i += 1
            continue
        if c == "\n":
            end_word()
            scan.words.append(Word([("\n", "u")], line, op=True))
            line += 1
            i += 1
            continue
        if c in " \t\r":
            end_word()
            i += 1
            continue
        if c in ";&|()<>":
            end_word()
            scan.words.append(Word([(c, "u")], line, op=True))
            i += 1
            continue
        begin()
        buf.append(c)
        i += 1
    end_word()
    return scan


def _balanced(text: str, i: int) -> int:
    """Index just past the bracket group opening at text[i] ('(' or '{'), quotes respected."""
    pairs = {"(": ")", "{": "}"}
    stack = [pairs[text[i]]]
    j = i + 1
    quote = ""
    while j < len(text) and stack:
        c = text[j]
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in pairs:
            stack.append(pairs[c])
        elif c == stack[-1]:
            stack.pop()
        j += 1
    return j


# --- variables and expansion -------------------------------------------------------------------

_ASSIGN = re.compile(r"^([A-Za-z_]\w*)=(.*)$", re.S)
_EXPANSION = re.compile(r"\$(?:\(\((?P<arith>.*?)\)\)|\{(?P<brace>[^}]*)\}|(?P<name>[A-Za-z_]\w*|\d))", re.S)
_BRACE = re.compile(r"^([A-Za-z_]\w*|\d+)(?:(:?[-=+?])(.*))?$", re.S)
_KEYWORDS = {"export", "local", "declare", "readonly", "then", "do", "else", "elif", "if", "while", "until", "!"}


def expand(text: str, variables: Mapping[str, str]) -> str:
    """Substitute known variables; anything that cannot be resolved keeps its ``$``."""

    def sub(m: re.Match[str]) -> str:
        if m.group("arith") is not None:
            value = _arith(m.group("arith"), variables)
            return m.group(0) if value is None else str(value)
        if m.group("name") is not None:
            return variables.get(m.group("name"), m.group(0))
        bm = _BRACE.match(m.group("brace"))
        if not bm:
            return m.group(0)
        name, op, arg = bm.group(1), bm.group(2), bm.group(3)
        value = variables.get(name)
        if op is None:
            return m.group(0) if value is None else value
        if op in ("-", "=") and value is not None or op in (":-", ":=") and value:
            return value
        if op in ("-", "=", ":-", ":="):
            return _unquote(expand(arg or "", variables))
        if op in ("+", ":+"):
            return _unquote(expand(arg or "", variables)) if value else ""
        return m.group(0)

    return _EXPANSION.sub(sub, text)


def _unquote(text: str) -> str:
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text


def _arith(expr: str, variables: Mapping[str, str]) -> int | None:
    text = expand(expr, variables)
    text = re.sub(r"[A-Za-z_]\w*", lambda m: variables.get(m.group(0), m.group(0)), text)
    try:
        return _eval_int(ast.parse(text.strip(), mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError):
        return None


def _eval_int(node: ast.AST) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _eval_int(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        a, b = _eval_int(node.left), _eval_int(node.right)
        ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
               ast.Div: lambda: a // b, ast.FloorDiv: lambda: a // b, ast.Mod: lambda: a % b}
        for kind, fn in ops.items():
            if isinstance(node.op, kind):
                return fn()
    raise ValueError("not integer arithmetic")


def _expand_word(word: Word, variables: Mapping[str, str]) -> str:
    return "".join(t if mode == "s" else expand(t, variables) for t, mode in word.segments)


@dataclass
class Arg:
    text: str
    line: int
    group: int  # arguments in one group sit on one logical line; a value never crosses groups


@dataclass
class ShellArgs:
    args: list[Arg]
    warnings: list[str]
    exports: dict[str, str]  # exported variables whose values resolved


def shell_args(text: str, path: str) -> ShellArgs:
    """Expanded words of a launch script (assignments applied, separators dropped)."""
    scan = shell_words(text, path)
    variables: dict[str, str] = {}
    exports: dict[str, str] = {}
    args: list[Arg] = []
    group, command_pos, exporting = 0, True, False
    words = scan.words
    for idx, word in enumerate(words):
        if word.op:
            group += 1
            command_pos, exporting = True, False
            continue
        first_text, first_mode = word.segments[0]
        m = _ASSIGN.match(first_text) if first_mode == "u" else None
        next_is_array = bool(m) and not m.group(2) and idx + 1 < len(words) and words[idx + 1].raw == "("
        if command_pos and m and not next_is_array:
            rest = Word([(m.group(2), "u"), *word.segments[1:]], word.line)
            variables[m.group(1)] = _expand_word(rest, variables)
            if exporting and "$" not in variables[m.group(1)]:
                exports[m.group(1)] = variables[m.group(1)]
            continue
        value = _expand_word(word, variables)
        exporting = command_pos and word.raw == "export"
        command_pos = word.raw in _KEYWORDS and command_pos
        if value.startswith("--") and re.search(r"\s", value) or not word.quoted and re.search(r"\s", value.strip()):
            args.extend(Arg(part, word.line, group) for part in value.split())
        else:
            args.append(Arg(value, word.line, group))
    return ShellArgs(args, scan.warnings, exports)


# --- reading flags -----------------------------------------------------------------------------


class _Reader:
    def __init__(self, source: str, path: str, kb: Knowledge) -> None:
        self.b = Builder(source, path)
        self.path = path
        self.kb = kb
        self.aux: dict[str, Any] = {}
        self.overrides: list[str] = []

    def flag(self, flag: str, values: list[str] | None, line: int | None) -> None:
        """Apply one ``--flag [values]``; ``values`` None means the flag was given bare."""
        spec = _spec(flag)
        if spec is None:
            return
        name, kind, fixed = spec
        key = f"--{flag}"
        where = f"{self.path}:{line}" if line else self.path
        if values is not None and any("$" in v for v in values):
            self.b.warn(f"{where}: {key} {' '.join(values)}: unresolved shell variable; value left unknown")
            return
        if values == [] and kind in ("auxflag", "const", "bool"):  # an empty list in a MODEL_ARGS mapping
            raise UserError(f"{where}: {key}: expected true or false, got an empty list")
        if kind == "auxflag":
            self.aux[name] = values is None or values[0].lower() in ("true", "1")
            return
        if kind == "aux":
            if values:
                try:
                    self.aux[name] = int(values[0])
                except ValueError:
                    raise UserError(f"{where}: {key}: expected an integer, got {values[0]!r}") from None
            return
        if kind == "const":
            if values is None or values[0].lower() in ("true", "1"):
                for field_name, value in fixed.items():
                    self.b.set(field_name, value, key, line)
            return
        if kind == "bool":
            self.b.set(name, True if values is None else values[0], key, line)
            return
        if values is None or not values:
            raise UserError(f"{where}: {key}: missing value")
        if kind == "list" and len(values) > 1:
            self.b.set(name, values, key, line)
        else:
            self.b.set(name, values[0], key, line)

    def finish(self, base_task: str | None = None) -> TrainingConfig:
        v, b = self.b.values, self.b
        if v.get("num_query_groups") is not None and not self.aux.get("group-query-attention"):
            b.warn(f"{self.path}: --num-query-groups without --group-query-attention: Megatron-LM ignores it "
                   "(multi-head attention)")
            b.values["num_query_groups"] = None
        vpp = _virtual_stages(v, self.aux)
        if vpp is not None:
            b.values["virtual_pipeline_model_parallel_size"] = vpp
        elif v.get("virtual_pipeline_model_parallel_size") == 1:
            b.values["virtual_pipeline_model_parallel_size"] = None
        if v.get("sequence_parallel") and (v.get("tensor_model_parallel_size") or 1) == 1:
            # validate_args: "Disabling sequence parallelism because tensor model parallelism is disabled"
            b.warn(f"{self.path}: --sequence-parallel with tensor parallel size 1: Megatron-LM turns it off")
            b.values["sequence_parallel"] = False
        if isinstance(self.aux.get("nproc-per-node"), int) and v.get("world_size") is None:
            b.values["world_size"] = self.aux["nproc-per-node"] * int(self.aux.get("nnodes") or 1)
        if any(v.get(k) is not None for k in ARCH_MARKERS):
            for name, default in ARCH_DEFAULTS.items():
                b.values.setdefault(name, default)
        if any(v.get(k) is not None for k in RUN_MARKERS):
            for name, default in RUN_DEFAULTS.items():
                b.values.setdefault(name, default)
        if base_task and "task" not in v:
            b.values["task"] = base_task
        cfg = b.build()
        if self.overrides:
            cfg = apply_overrides(cfg, self.overrides, self.kb)
        return cfg


def _virtual_stages(values: Mapping[str, Any], aux: Mapping[str, Any]) -> int | None:
    """VPP as Megatron derives it from a layout string or layers-per-virtual-stage (1 -> None)."""
    pp = values.get("pipeline_model_parallel_size") or 1
    layout = values.get("pipeline_model_parallel_layout")
    vpp: int | None = None
    if isinstance(layout, str):
        stages = layout_stages(layout)
        if stages and stages % pp == 0:
            vpp = stages // pp
    elif aux.get("num-layers-per-virtual-pipeline-stage") and values.get("num_layers"):
        layers = values["num_layers"] + int(bool(values.get("account_for_embedding_in_pipeline_split"))) + int(
            bool(values.get("account_for_loss_in_pipeline_split")))
        per_stage = layers // pp
        vpp = per_stage // aux["num-layers-per-virtual-pipeline-stage"]
    else:
        return None
    return None if vpp == 1 else vpp


_MAX_LAYOUT_CHARS = 1 << 20  # expanded layout size; real ones are a few hundred characters
_MAX_LAYOUT_NESTING = 8


def layout_stages(layout: str) -> int | None:
    """Number of PP x VPP stages in a pipeline_model_parallel_layout such as ``Et|(tt|)*6mL``.

    None when there is no layout or it would expand past _MAX_LAYOUT_CHARS (``(t|)*99999999999``).
    """
    budget = [_MAX_LAYOUT_CHARS]

    def repeat(m: re.Match[str]) -> str:
        times = int(m.group(2)) if len(m.group(2)) <= 7 else _MAX_LAYOUT_CHARS + 1
        budget[0] -= len(m.group(1)) * times
        if budget[0] < 0:
            raise ValueError("layout too long")
        return m.group(1) * times

    text = layout.replace(",", "")
    try:
        # innermost groups first, one nesting level per pass: [^()] keeps each pass linear (a [^)] group
        # rescanned from every '(' of '(((((...': quadratic), and no real layout nests more than twice
        for _ in range(_MAX_LAYOUT_NESTING):
            text, n = re.subn(r"\(([^()]+)\)\*(\d+)", repeat, text)
            if not n:
                break
        else:
            return None
        text = re.sub(r"(.)\*(\d+)", repeat, text)
    except ValueError:
        return None
    return len(text.split("|")) if text else None


def _is_file(text: str) -> bool:
    """A short single-line string naming an existing file (a pasted command line is not one)."""
    if "\n" in text or len(text) > 4096 or text.lstrip().startswith("-"):
        return False
    try:
        return Path(text).is_file()
    except OSError:
        return False


def _is_override(text: str) -> bool:
    """A Bridge/Hydra ``section.key=value`` word inside a launch script."""
    head = text.split("=", 1)[0].lstrip("+~")
    return "=" in text and "." in head and head.split(".", 1)[0] in BRIDGE_SECTIONS


def read_megatron_args(text_or_path: str | Path | Mapping[str, Any], path: str | None = None,
                       *, kb: Knowledge) -> TrainingConfig:
    """Megatron-LM args from a launch script, a pasted command line, a file path, or a mapping.

    Variables the script exports (PYTORCH_CUDA_ALLOC_CONF, NCCL_*) land in ``env_vars``, filtered by
    vocabulary.yaml ``env.process_prefixes`` / ``env.never_read`` so no secret is carried along.
    """
    if isinstance(text_or_path, Mapping):
        return args_from_mapping(text_or_path, path or "<args>", kb=kb)
    if isinstance(text_or_path, Path) or _is_file(text_or_path):
        p = Path(text_or_path)
        text = limits.read_text(p, "a launch script", limits.MAX_LAUNCH_SCRIPT_BYTES)
        path = str(p)
    else:
        text = str(text_or_path)
    path = path or "<args>"
    if len(text) > limits.MAX_LAUNCH_SCRIPT_BYTES:
        cap_kib = limits.MAX_LAUNCH_SCRIPT_BYTES // 1024
        raise UserError(f"{path}: {len(text)} characters is more than the {cap_kib} KiB a launch script or "
                        "command line can be here")
    shell = shell_args(text, path)
    args = shell.args
    reader = _Reader("megatron-args", path, kb)
    reader.b.warnings.extend(shell.warnings)
    env = relevant_env(shell.exports, kb) if shell.exports else {}
    if env:
        reader.b.set("env_vars", env, "export")
    task = None
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if _ENTRYPOINT.search(arg.text):
            task = "pretrain"
        if _is_override(arg.text):
            reader.overrides.append(arg.text)
            continue
        if not arg.text.startswith("--") or arg.text == "--":
            continue
        name, eq, inline = arg.text[2:].partition("=")
        flag = _normal(name)
        spec = _spec(flag)
        if eq:
            reader.flag(flag, [inline], arg.line)
            continue
        kind = spec[1] if spec else "unknown"
        if kind in ("const", "bool", "auxflag"):
            reader.flag(flag, None, arg.line)
            continue
        values: list[str] = []
        while i < len(args) and args[i].group == arg.group and not args[i].text.startswith("--"):
            if kind != "list" and values:
                break
            if args[i].text.startswith("-") and not re.fullmatch(r"-\d[\d.e+-]*", args[i].text):
                break
            values.append(args[i].text)
            i += 1
        reader.flag(flag, values if values or kind == "unknown" else [], arg.line)
    return reader.finish(task)


def relevant_env(variables: Mapping[str, str], kb: Knowledge) -> dict[str, str]:
    """The variables worth keeping: memory-relevant prefixes, nothing that looks like a secret."""
    vocab = (kb.tables.get("vocabulary") or {}).get("env") or {}
    prefixes = tuple(vocab.get("process_prefixes") or ())
    secret = [w.upper() for w in vocab.get("never_read") or ()]
    return {k: str(v) for k, v in variables.items()
            if k.startswith(prefixes) and not any(w in k.upper() for w in secret)}


def args_from_mapping(args: Mapping[str, Any], path: str = "<args>", env: Mapping[str, Any] | None = None,
                      *, kb: Knowledge) -> TrainingConfig:
    """Megatron args given as a mapping (Megatron-LM CI model_config.yaml MODEL_ARGS, or JSON)."""
    reader = _Reader("megatron-args", path, kb)
    kept = relevant_env(env, kb) if env else {}
    if kept:
        reader.b.set("env_vars", kept, "ENV_VARS")
    for key, value in args.items():
        flag = _normal(str(key))
        if value is False or value is None:
            continue
        if value is True:
            reader.flag(flag, None, None)
        elif isinstance(value, (list, tuple)):
            reader.flag(flag, [str(v) for v in value], None)
        else:
            reader.flag(flag, [str(value)], None)
    return reader.finish()
