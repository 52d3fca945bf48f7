"""Gather every piece of evidence the user gave into one Facts object, then diagnose.

This is the only module that knows all the input readers; the CLI and the
benchmark both call ``collect_facts`` / ``run`` so they see exactly the same
pipeline.  Precedence when two inputs disagree: config file < --set overrides;
numbers the question mentions only fill gaps; --env beats env_vars in the config.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .defaults import fill_unstated
from .engine import Diagnosis, diagnose
from .facts import ARCHITECTURE_FIELDS, EnvFacts, Facts, GpuFacts, LogFacts, QuestionFacts, TrainingConfig
from .knowledge import Knowledge


@dataclass
class Inputs:
    """What the user passed on the command line (paths are read here, nowhere else)."""

    log: Path | Iterable[str] | None = None  # a path, or the lines of stdin
    config: Path | None = None
    overrides: list[str] = field(default_factory=list)
    env: list[str] = field(default_factory=list)
    gpu: str | None = None
    question: str | None = None
    snapshot: Path | None = None
    stats: Path | None = None
    num_microbatches: int | None = None
    ranking: str | None = None  # None = knowledge/ledger.yaml ranking
    stated: Any = None  # situation.Stated: what the agent read in the user's message (--phase, --trend, ...)


def collect_facts(inputs: Inputs, kb: Knowledge) -> Facts:
    from .derive import derive
    from .inputs.config import apply_overrides, read_config
    from .inputs.gpu import lookup_gpu
    from .inputs.launch_env import env_from_config, read_env

    question = QuestionFacts()
    if inputs.question:
        from .inputs.question import parse_question

        question = parse_question(inputs.question, kb)
        question.mentioned_fixes = _mentioned_fixes(inputs.question, kb)
    log = LogFacts()
    if inputs.log:
        from .inputs.oom_log import parse_log

        log = parse_log(inputs.log, kb)
    log_text = pasted_log_text(inputs.log) or ""  # read once: a small pasted log's text, else nothing
    for lines in (log_text.splitlines(), (inputs.question or "").splitlines()):
        if any(line.rstrip().endswith("\\") for line in lines):  # a continued launch command was pasted
            from .inputs.shell_lines import cut_by_comment

            cut = cut_by_comment(lines) or _lost_setting(lines, kb)
            if cut:
                log = replace(log, cut_continuation=cut)
                break

    if inputs.overrides or log_text:  # RL keys set in --set or a pasted launch command size the log-prob pass too
        from .inputs.question import rl_batch_in

        settings = "\n".join([*inputs.overrides, log_text])
        question.rl_batch = {**rl_batch_in(settings, kb.tables.get("vocabulary") or {}), **question.rl_batch}
    if (inputs.overrides or log_text) and not (question.model_name or question.model_size_b):
        from .inputs.question import model_in_settings  # the checkpoint path a setting names ("pretrain=...")

        question.model_name, question.model_size_b = model_in_settings(inputs.overrides, kb, log_text)
    config = read_config(inputs.config, inputs.overrides, kb=kb) if inputs.config else TrainingConfig()
    if not inputs.config and inputs.overrides:
        config = apply_overrides(config, inputs.overrides, kb=kb)
    if not inputs.config:
        config = _with_launch_flags(config, log_text, inputs.overrides, kb)
    launched = _launched_processes(log_text, kb)
    if launched and config.world_size is None:  # the pasted launch command says how many processes ran
        said = {} if config.provided else {"provided": True, "source": "question"}
        config = replace(config, world_size=launched, **said)
    offloading = config.cpu_offloading
    config = _fill_from_question(config, question)
    not_megatron = _other_trainer(inputs, kb) or _other_program(inputs, log_text, kb)
    if not_megatron and offloading is None and config.cpu_offloading:
        # "ZeRO-3 with CPU offload", "FSDP CPU offload" move the parameters and the optimizer state, not Megatron's
        # layer activations (model.cpu_offloading), whose constraints would then refuse recompute
        config = replace(config, cpu_offloading=None)
    config = fill_unstated(_fill_architecture(_approximate_shape(config, question, kb), kb), kb,
                           bridge=not _megatron_lm_launch(inputs, log, kb) and not not_megatron,
                           trainer=_fsdp_named(inputs, kb),
                           recompute=_framework_recompute(inputs, log_text, question, kb))

    # Bridge applies cfg.env_vars with setdefault, so --env (the shell) outranks them; the log's exports
    # rank between the shell and --env (vocabulary.yaml env.source_precedence).
    environment = read_env(inputs.env, log_text_env=log.env, config_env=env_from_config(config), kb=kb)

    # What the user names explicitly, then what the OOM message measured, then what the question says.
    gpu = GpuFacts()
    if inputs.gpu:
        gpu = lookup_gpu(inputs.gpu, kb)
    elif log.capacity_bytes:
        gpu = lookup_gpu(log.capacity_bytes, kb)
    elif question.gpu_name:
        gpu = lookup_gpu(question.gpu_name, kb)
    elif question.gpu_nominal_gb:
        gpu = _gpu_by_size(question.gpu_nominal_gb, kb)
    else:
        gpu = _gpu_from_full_card(log, kb) or gpu
    if gpu.count and config.world_size is None:  # "--gpu '8x H800'" says how many, where nothing else did
        config = replace(config, world_size=gpu.count)

    facts = Facts(log=log, env=_fill_env_from_question(environment, question.env), config=config, gpu=gpu,
                  question=question)
    if inputs.snapshot:
        from .inputs.snapshot import analyze_snapshot

        facts.snapshot = analyze_snapshot(inputs.snapshot)
    facts.stats = _memory_stats(inputs, facts)

    facts.estimate = _estimate(facts, kb, inputs.num_microbatches)
    facts.derived = derive(facts.config, facts.env)
    facts.derived["preset_only_violations"] = _preset_only_violations(facts, kb)
    if not facts.estimate:
        facts.derived.update(_model_state_only(facts, kb))
    facts.derived.update(_model_state_floor(facts, kb))
    facts.derived.update(_logprob_logits(facts))
    # what the user saw the run use ("in text mode it uses 8.5 GB"): far below the model state counted for it, the
    # count's reading of the run (full training, its precision, the model's size) is what is wrong, not the GPU
    used = [f["bytes"] for f in facts.question.memory_figures if f.get("role") == "peak" and f.get("bytes")]
    if used:
        facts.derived["stated_usage_bytes"] = min(used)
    needed = facts.derived.get("model_state_min_gpus")
    if needed and needed > (facts.derived.get("next_world") or 0):  # "add GPUs" says how many hold the state
        node = _gpus_per_node(facts.gpu.name, kb)
        facts.derived["next_world"] = -(-needed // node) * node if needed > node else 1 << (needed - 1).bit_length()
    return facts


# Settings of the layout a lost line can cut off that move memory as much as a fix does: an adapter instead of full
# fine-tuning, the batch and sequence sizes, recompute, the parallel sizes
_LOST_LAYOUT = frozenset({"peft", "task", "micro_batch_size", "seq_length", "recompute_granularity",
                          "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size"})


def _lost_setting(lines: list[str], kb: Knowledge) -> str | None:
    """A continued line that lost its backslash, where the options after it name a memory setting (LLaMA-Factory#2867:
    "--fp16" with none, so "--deepspeed ds_z3_offload.json" never reached the run; ms-swift#3964: "--streaming true"
    with none, so "--train_type lora" never did and the run fine-tuned every weight): the command was cut there."""
    from .inputs.question import parse_question
    from .inputs.shell_lines import lost_backslash
    from .recognize import fix_recognizer
    from .situation import trainer_named

    found = lost_backslash(lines)
    if not found:
        return None
    quote, rest = found  # a memory fix's own words, the DeepSpeed config that shards the state, or a layout setting
    if fix_recognizer(kb).find(rest) or trainer_named(rest, kb) == "deepspeed":
        return quote
    return quote if _LOST_LAYOUT & set(parse_question(rest, kb).layout) else None


def _launched_processes(log_text: str | None, kb: Knowledge) -> int | None:
    """The processes a pasted launch command starts ("torchrun --nproc_per_node 2 ...", "NPROC_PER_NODE=2 swift
    sft"), read with the question's GPU-count patterns from its continued program lines only: what ran, whatever the
    machine holds ("8*80G server", of which "CUDA_VISIBLE_DEVICES=2,3" and two processes were used)."""
    from .inputs.question import parse_question

    lines = _command_lines(log_text)
    return parse_question("\n".join(lines), kb).num_gpus if lines else None


def _gpus_per_node(name: str | None, kb: Knowledge) -> int:
    """GPUs in one node of this kind (gpus.yaml), whole nodes being what a job adds."""
    table = kb.tables.get("gpus") or {}
    entry = next((g for g in table.get("gpus") or [] if name and g.get("name") == name), None)
    return int((entry or {}).get("gpus_per_node") or table["default_gpus_per_node"])


def _model_state_floor(facts: Facts, kb: Knowledge) -> dict[str, Any]:
    """The whole model state over the run's GPU count: no TP/PP/EP/DP layout of these GPUs puts less on each one
    (every parameter's weight, gradient and optimizer share lives somewhere), so a floor above the GPU means more
    GPUs or less state (optimizer offload, PEFT), whatever the layout; "70B x 18 B / 16 GPUs = 79 GB" is the
    expert's first sum.  Computed with the estimator at TP 1 PP 1 on one GPU and the shortest sequence; with no GPU
    count known, only the whole model's weights over one GPU (model_weights_ratio: what a converter must hold)."""
    import math

    from .errors import UserError
    from .estimator import estimate
    from .estimator.constants import constants
    from .estimator.setup import resolve
    from .ledger import policy

    cfg, capacity = facts.config, facts.gpu.capacity_bytes
    if not (cfg.num_layers and cfg.hidden_size):
        return {}
    whole = replace(cfg, tensor_model_parallel_size=1, pipeline_model_parallel_size=1, context_parallel_size=1,
                    expert_model_parallel_size=1, virtual_pipeline_model_parallel_size=None, world_size=1,
                    data_parallel_size=1,
                    seq_length=2, micro_batch_size=1, global_batch_size=1, sequence_parallel=False)
    try:
        stage = estimate(whole, gpu=facts.gpu, kb=kb, env=facts.env).stages[0]
    except (UserError, IndexError):
        return {}
    # a stand-in shape for a model the presets lack holds its own parameter count; the whole model's bytes follow
    # the size the user named (OPT-175B through a 117B stand-in would lose a third of its weights)
    named = facts.question.model_size_b
    if cfg.approximate_shape and named and stage.params:
        scale = named * 1e9 / stage.params
        stage = replace(stage, params=stage.params * scale, weights_bytes=stage.weights_bytes * scale,
                        grads_bytes=stage.grads_bytes * scale, optimizer_bytes=stage.optimizer_bytes * scale)
    # the whole model's weights on one device: what a converter that builds the model in one place must hold
    weights: dict[str, Any] = {"model_weights_bytes": stage.weights_bytes}
    # ...and a whole copy per process of one node, which a loader that reads the checkpoint on every rank puts in
    # host RAM: the host's sum, known without any GPU named
    if cfg.world_size:
        weights["host_load_bytes"] = stage.weights_bytes * min(cfg.world_size, _gpus_per_node(facts.gpu.name, kb))
    # ...and an optimizer offloaded to the CPU keeps its master weights and moments (FP32 Adam: 12 B per trained
    # parameter) in host RAM, the whole model's divided among the nodes its ranks span: "70B x 12 B = 840 GB"
    if cfg.optimizer_cpu_offload and not (cfg.peft and cfg.peft.lower() not in {"none", "false"}):
        setup = resolve(whole, constants(kb), [])
        fraction = 1.0 if cfg.optimizer_offload_fraction is None else float(cfg.optimizer_offload_fraction)
        weights["offloaded_optimizer_bytes"] = stage.params * (setup.master_bytes + setup.moment_bytes) * fraction
    if not capacity:
        return weights
    weights["model_weights_ratio"] = stage.weights_bytes / capacity
    if not cfg.world_size:
        return weights
    total = stage.weights_bytes + stage.grads_bytes + stage.optimizer_bytes
    room = float(policy(kb).get("model_state_room_share", 0.3))
    floor = total / cfg.world_size
    # the weights alone split evenly over every GPU: what full sharding (ZeRO-3, FSDP) holds at best, loading included
    weights.update(weights_floor_bytes=stage.weights_bytes / cfg.world_size,
                   weights_floor_ratio=stage.weights_bytes / cfg.world_size / capacity,
                   weights_min_gpus=math.ceil(stage.weights_bytes / ((1 - room) * capacity)))
    # ...and the whole state on every GPU, what data parallelism alone (DDP, no ZeRO / FSDP) keeps per rank whatever
    # the Megatron defaults the estimate of the run's own layout assumes (its distributed optimizer)
    weights.update(model_state_replicated_bytes=total, model_state_replicated_ratio=total / capacity)
    return {**weights, "model_state_floor_bytes": floor, "model_state_floor_ratio": floor / capacity,
            "model_state_offload_floor_bytes": (stage.weights_bytes + stage.grads_bytes) / cfg.world_size,
            "model_state_offload_floor_ratio": (stage.weights_bytes + stage.grads_bytes) / cfg.world_size / capacity,
            "model_state_offload_leaves_room": (stage.weights_bytes + stage.grads_bytes) / cfg.world_size
                                              <= (1 - room) * capacity,
            "model_state_min_gpus": math.ceil(total / ((1 - room) * capacity)),
            "model_state_bytes_per_param": total / stage.params if stage.params else None}


def _logprob_logits(facts: Facts) -> dict[str, Any]:
    """The logits of one log-prob micro-batch as the user's RL keys size it (vocabulary.yaml rl_batch): sequences x
    (prompt + response) tokens, or the stated token budget, x the vocabulary over TP, in BF16 - a floor: the log-softmax
    in FP32 doubles it. "32 x 12,288 x 151,936 x 2 B = 119 GB" is the sum an expert does before anything else."""
    rl, cfg = facts.question.rl_batch, facts.config
    if not (rl and cfg.vocab_size):
        return {}
    tokens = rl.get("logprob_tokens")
    length = rl.get("total_length") or (rl.get("prompt_length", 0) + rl.get("response_length", 0))
    if not tokens and rl.get("logprob_micro_batch") and length:
        tokens = rl["logprob_micro_batch"] * length
    if not tokens:
        return {}
    logits = tokens * cfg.vocab_size / (cfg.tensor_model_parallel_size or 1) * 2
    capacity = facts.gpu.capacity_bytes
    return {"logprob_tokens": tokens, "logprob_logits_bytes": logits,
            "logprob_logits_ratio": logits / capacity if capacity else None}


def _model_state_only(facts: Facts, kb: Knowledge) -> dict[str, Any]:
    """Weights, gradients and optimizer state per GPU of a layout whose sequence length nobody stated: they do not
    depend on it, and "16B x 16 B / 4 GPUs = 64 GB before any activation" is the first number an expert works out.
    The estimator runs at the shortest sequence the layout allows; only its model-state figures are kept (as
    ``derived.model_state_*``: they are no estimate of the peak)."""
    from .errors import UserError
    from .estimator import estimate

    cfg = facts.config
    shortest = (cfg.tensor_model_parallel_size or 1) * 2 * (cfg.context_parallel_size or 1)
    try:
        est = estimate(replace(cfg, seq_length=shortest), gpu=facts.gpu, kb=kb, env=facts.env)
    except UserError:
        return {}
    peak = max(est.stages, key=lambda s: s.weights_bytes + s.grads_bytes + s.optimizer_bytes)
    state = peak.weights_bytes + peak.grads_bytes + peak.optimizer_bytes
    capacity = facts.gpu.capacity_bytes
    return {"model_state_bytes": state, "model_state_ratio": state / capacity if capacity else None}


def _preset_only_violations(facts: Facts, kb: Knowledge) -> list[str]:
    """Constraints the config breaks only with the architecture numbers a preset filled in.

    A run that got as far as running out of memory passed Megatron's start-up checks, so such a violation says the
    user's model differs from the preset, not that the layout is invalid (engine.py drops it then).
    """
    from .derive import derive
    from .engine import check_constraints

    cfg = facts.config
    if not cfg.from_preset:
        return []
    stated = replace(cfg, **{name: None for name in cfg.from_preset})
    with_preset = {v.id for v in check_constraints(facts.flatten(), kb)}
    if not with_preset:
        return []
    without = {v.id for v in check_constraints(replace(facts, config=stated, derived=derive(stated, facts.env))
                                               .flatten(), kb)}
    return sorted(with_preset - without)


def _mentioned_fixes(text: str, kb: Knowledge) -> list[str]:
    """Fixes the user asks about ("would CPU offloading help?"), through each fix's own recognizers.

    The engine uses them to warn about a blocked fix the user is considering, even when no rule
    would have proposed it.
    """
    from .recognize import fix_recognizer

    return list(dict.fromkeys(m.ident for m in fix_recognizer(kb).find(text)))


_FULL_CARD_FREE_SHARE = 0.05  # free memory under this share of in-use + free: the card was full when it failed


def _gpu_from_full_card(log: Any, kb: Knowledge) -> Any:
    """A card that was full when it failed is about as large as what was in use plus what was free: an OOM message
    without the total ("79.15 GB memory has been allocated and available memory is only 175.56 MB", PaddlePaddle)
    still bounds the GPU. Stated as an assumption; None where the message does not show a full card."""
    used = max(log.process_bytes or 0, log.reserved_bytes or 0, log.allocated_bytes or 0)
    free = log.free_bytes
    if not used or free is None or free > _FULL_CARD_FREE_SHARE * (used + free):
        return None
    from .inputs.gpu import gpu_from_capacity

    gpu = gpu_from_capacity(used + free, kb)
    gpu.assumption = (f"GPU capacity about {(used + free) / 2**30:.1f} GiB: the OOM message gives no total, and the "
                      "card was full (what was in use plus what was free)")
    return gpu


def _gpu_by_size(nominal_gb: float, kb: Knowledge) -> Any:
    """The first GPU in knowledge/gpus.yaml sold with that memory size (its usable capacity is what matters)."""
    from .inputs.gpu import lookup_gpu

    for entry in kb.entries("gpus"):
        if entry.get("nominal_gb") == nominal_gb and entry.get("capacity_gib"):
            return lookup_gpu(entry["name"], kb)
    return lookup_gpu(nominal_gb * 1e9, kb)


def _memory_stats(inputs: Inputs, facts: Facts) -> dict[str, Any]:
    """memory_stats() dump and the memory reports parse_log kept, merged (the dump wins per key)."""
    log = facts.log
    if not inputs.stats and not log.memory_reports and not log.theoretical_bytes:
        return {}
    from .inputs import stats

    summaries = []
    if inputs.stats:
        summaries.append(stats.read_memory_stats(inputs.stats))
    summaries.append(stats.summarize_reports(log.memory_reports, log.theoretical_bytes, failing_rank=log.rank))
    return stats.merge(*summaries) if any(summaries) else {}


def _fill_from_question(config: TrainingConfig, question: Any) -> TrainingConfig:
    """Numbers from the question fill only what the config did not say."""
    names = {f.name for f in fields(TrainingConfig)}
    gaps = {k: v for k, v in question.layout.items() if k in names and vars(config)[k] is None}
    full = config.task == "sft" and config.source != "question"  # the settings say every weight trains
    if full:
        gaps.pop("peft", None)  # ("finetuning_type=full"): no adapter the question names is this run's
    if question.model_name and not config.model_name:
        gaps["model_name"] = question.model_name
    if question.num_gpus and config.world_size is None:
        gaps["world_size"] = question.num_gpus
    if question.layout.get("task") == "lora" and config.peft is None and "peft" not in gaps and not full:
        gaps["peft"] = "lora"  # "LoRA SFT ..." is the LoRA class unless the config says otherwise
    if not gaps:
        return config
    filled = replace(config, **gaps)
    if not config.provided:
        filled = replace(filled, provided=True, source="question")
    return filled


def _fill_env_from_question(env: EnvFacts, claims: dict[str, Any]) -> EnvFacts:
    """What the question says about the environment (EnvFacts field -> value) fills only unknown fields.

    "Unknown" includes an allocator setting that is off only because no allocator variable was seen
    (e.g. a log echoing other exports): the user saying "I set expandable_segments" is better evidence.
    """
    names = {f.name for f in fields(EnvFacts)}
    inferred = {"expandable_segments"} if env.alloc_conf is None else set()
    gaps = {k: v for k, v in claims.items() if k in names and (vars(env)[k] is None or k in inferred)}
    return replace(env, provided=True, **gaps) if gaps else env


def _approximate_shape(config: TrainingConfig, question: Any, kb: Knowledge) -> TrainingConfig:
    """A model the presets lack, named with its size ("GPT-30B"), takes the nearest preset's shape - stated.

    The fields it fills are in ``from_preset``; with ``approximate_shape`` set they count as assumed evidence.  Any
    part of the shape given (the layer count, the width) and there is none: the nearest preset by size is another
    model, and its other fields beside the user's would describe neither (bigscience tr11: 80 layers of a 200B model
    beside the 235B MoE preset's width and experts).
    """
    if config.model_name or any(vars(config)[f] for f in ARCHITECTURE_FIELDS) or not question.model_size_b:
        return config
    from .estimator.models import nearest_preset

    # an MoE when the question's words say so (vocabulary.yaml topic moe: "16B-A3B", "8x7B", "MoE", ...)
    name = nearest_preset(question.model_size_b, "moe" in question.topics, kb)
    if name is None:
        return config
    filled = _fill_architecture(replace(config, model_name=name), kb)
    return replace(filled, provided=True, source=config.source or "question", approximate_shape=name)


def _fill_architecture(config: TrainingConfig, kb: Knowledge) -> TrainingConfig:
    """A model name with no architecture numbers takes them from knowledge/models.yaml."""
    if not config.model_name or all(vars(config)[f] for f in ARCHITECTURE_FIELDS):
        return config
    from .estimator.models import preset

    try:
        arch = preset(config.model_name, kb)
    except LookupError:
        return config
    gaps = {f.name: vars(arch)[f.name] for f in fields(TrainingConfig)
            if vars(config)[f.name] is None and vars(arch)[f.name] is not None}
    return replace(config, **gaps, from_preset=[*config.from_preset, *(k for k in gaps if k != "model_name")])


def _estimate(facts: Facts, kb: Knowledge, num_microbatches: int | None) -> dict[str, Any]:
    """Estimator summary facts when the layout is complete enough to estimate; else empty."""
    cfg = facts.config
    if not all(vars(cfg)[f] for f in ARCHITECTURE_FIELDS) or not cfg.seq_length:
        return {}
    from .errors import UserError
    from .estimator import estimate, summarize

    try:
        est = estimate(cfg, gpu=facts.gpu, num_microbatches=num_microbatches, kb=kb, env=facts.env)
    except UserError:
        return {}  # a layout the estimator cannot place (e.g. PP not dividing layers): constraints say why
    summary = summarize(est, facts.gpu)
    observed = facts.log.allocated_bytes
    if observed and summary.get("peak_bytes"):
        summary["vs_observed_ratio"] = summary["peak_bytes"] / observed
    summary["table"] = est.to_dict()
    return summary


def _simulated(fix_id: str, flat: dict[str, Any], kb: Knowledge) -> bool:
    """Whether re-estimating the config with the fix describes its effect here (fixes.yaml simulated_when)."""
    from .conditions import evaluate

    cond = kb.get("fixes", fix_id).get("simulated_when")
    return cond is None or evaluate(cond, flat)


def _request_simulations(fix_ids: list[str], flat: dict[str, Any], led: Any, kb: Knowledge) -> dict[str, Any]:
    """Fixes that shrink the failed request itself (fixes.yaml shrinks_request), simulated on the OOM message's
    numbers: the request scaled by the factor, against what was free."""
    from .conditions import evaluate
    from .simulate import Simulation

    out = {}
    request, free = led.request_bytes, led.free_bytes
    for fix_id in fix_ids:
        rule = kb.get("fixes", fix_id).get("shrinks_request")
        if not rule or request is None or free is None or not evaluate(rule["when"], flat):
            continue
        saving = request * (1 - float(rule["factor"]))
        sim = Simulation(fix_id, "request", stage=led.stage, predicted_saving_bytes=saving,
                         fits=request - saving <= free)
        if led.in_use_bytes is not None:
            sim.predicted_peak_bytes = led.in_use_bytes + request - saving
        out[fix_id] = sim
    return out


# A pasted excerpt is read whole for frame names the parser's traceback reader cannot place ("-> compute_log_probs");
# a full training log is left to the streaming parser.
PASTED_LOG_BYTES = 256 * 1024


def _launch_flags(log_text: str) -> list[str]:
    """The --key value, --key=value and bare --flag settings of a launch command pasted with the log (its lines
    continued with a backslash), as key=value: what the run was started with, the user's own settings.  The words
    come from the launch-script reader's shell tokenizer (quotes, variables, continuations), one command at a time."""
    from .errors import UserError
    from .inputs.megatron_args import shell_args

    lines = log_text.splitlines()
    block = "\n".join(line for i, line in enumerate(lines)
                      if line.rstrip().endswith("\\") or (i and lines[i - 1].rstrip().endswith("\\")))
    try:
        args = shell_args(block, "<pasted launch command>").args
    except UserError:
        return []
    flags: list[str] = []
    for i, arg in enumerate(args):
        if not arg.text.startswith("--") or len(arg.text) < 3:
            continue
        key, eq, value = arg.text[2:].partition("=")
        if not eq:  # a value in the next word of the same command, else a bare flag
            nxt = args[i + 1] if i + 1 < len(args) and args[i + 1].group == arg.group else None
            value = nxt.text if nxt is not None and not nxt.text.startswith("-") else "true"
        flags.append(f"{key.replace('-', '_')}={value}")
    return flags


def _with_launch_flags(config: TrainingConfig, log_text: str, overrides: list[str], kb: Knowledge) -> TrainingConfig:
    """The config with the pasted launch command's settings the stated ones (--set) leave unset; a flag memtune cannot
    read is skipped without a word (the launch line is the user's, not an input to check)."""
    from .errors import UserError
    from .inputs.config import apply_overrides

    stated = {item.split("=", 1)[0].lstrip("+~").split(".")[-1] for item in overrides}
    for item in _launch_flags(log_text):
        if item.split("=", 1)[0].split(".")[-1] in stated:
            continue
        try:
            config = replace(apply_overrides(config, [item], kb=kb, hints=False), warnings=config.warnings)
        except UserError:
            continue
    return config


def _command_lines(text: str | None) -> list[str]:
    """The program lines of a launch command pasted in a log ("swift sft \\", "llamafactory-cli train \\"): lines
    continued with a backslash that are not one of its --flags (another tool's flags can look like a framework's
    keys) - and not its tracebacks and messages, whose file paths name every library on the stack."""
    return [line for line in (text or "").splitlines()
            if line.rstrip().endswith("\\") and not line.lstrip().startswith("-")]


def pasted_log_text(log: Any) -> str | None:
    """The text of a small uncompressed log file or list of lines (what users paste), else None."""
    if isinstance(log, (list, tuple)) and all(isinstance(line, str) for line in log):
        text = "\n".join(log)
        return text if len(text) <= PASTED_LOG_BYTES else None
    if not isinstance(log, Path) or log.suffix == ".gz":
        return None
    try:
        if log.stat().st_size > PASTED_LOG_BYTES:
            return None
        return log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


MEGATRON_LM_LAUNCHED = frozenset({"megatron-lm", "pai-megatron-patch"})  # situation.yaml framework ids


def _megatron_lm_launch(inputs: Inputs, log: LogFacts, kb: Knowledge) -> bool:
    """The run is launched the Megatron-LM way (a pretrain_*.py script, Megatron-LM or Pai-Megatron-Patch named),
    where an unstated flag keeps Megatron-Core's default rather than a Bridge recipe's."""
    from .situation import framework_named

    script = (log.entry_script or "").rsplit("/", 1)[-1]
    return script.startswith("pretrain_") or framework_named(inputs.question or "", kb) in MEGATRON_LM_LAUNCHED


def _other_trainer(inputs: Inputs, kb: Knowledge) -> bool:
    """The run trains with something other than Megatron-Core (NeMo-RL's DTensor worker, verl's FSDP actor, DeepSpeed,
    the HF Trainer): Bridge recipe defaults (distributed optimizer, sequence parallelism) are no guess for it."""
    from .situation import trainer_named

    return trainer_named(" ".join([inputs.question or "", *(inputs.overrides or [])]), kb) is not None


def _framework_recompute(inputs: Inputs, log_text: str | None, question: Any, kb: Knowledge) -> str | None:
    """The recompute the run's framework turns on by default (situation.yaml frameworks ``recompute_default``) where
    it trains with its HF Trainer and nothing the user wrote, set or pasted turns recompute off
    ("--gradient_checkpointing false", disable_gradient_checkpointing, "no gradient checkpointing")."""
    from .situation import framework_named, framework_row, recompute_said_off, trainer_named

    said = " ".join([inputs.question or "", *(inputs.overrides or [])])
    everything = f"{said}\n{log_text or ''}"
    row = framework_row(kb.tables.get("situation") or {}, framework_named(said, kb) or framework_named(everything, kb))
    if not row.get("recompute_default") or trainer_named(everything, kb) != "hf":
        return None
    return None if recompute_said_off(question.layout, everything, kb) else str(row["recompute_default"])


def _fsdp_named(inputs: Inputs, kb: Knowledge) -> str | None:
    """"fsdp" where the user's words or settings name PyTorch FSDP as the trainer (situation.yaml fsdp_words) and no
    framework of ours decides it; else None."""
    from .situation import fsdp_named

    return "fsdp" if fsdp_named(" ".join([inputs.question or "", *(inputs.overrides or [])]), kb) else None


def _other_program(inputs: Inputs, log_text: str | None, kb: Knowledge) -> bool:
    """The pasted launch command starts a program of its own, none of a Megatron-based stack (situation.own_program):
    its trainer is its own (DDP, FSDP, ZeRO as it says), so Bridge recipe defaults are no guess for it."""
    from .situation import own_program

    return own_program(log_text, " ".join([inputs.question or "", *(inputs.overrides or [])]), kb)


def run(inputs: Inputs, kb: Knowledge) -> tuple[Facts, dict[str, Any], Diagnosis]:
    """Facts -> situation -> ledger -> rules -> every candidate fix simulated on the user's layout -> diagnosis."""
    from . import ledger
    from .engine import rank_fixes, ranking_mode
    from .simulate import simulate
    from .situation import read_situation

    facts = collect_facts(inputs, kb)
    pasted = pasted_log_text(inputs.log)
    # the settings, and the launch command a pasted log holds ("swift sft ...", "openrlhf.cli.train_ppo_ray"), name the
    # framework that runs where the user's words do not
    settings = "\n".join([*inputs.overrides, *_command_lines(pasted)])
    situation = read_situation(facts, kb, inputs.stated, pasted, settings)
    if not situation.oom_said and "oom" in facts.question.topics:  # "is this an OOM?" asks; it says none happened
        facts = replace(facts, question=replace(facts.question,
                                                topics=[t for t in facts.question.topics if t != "oom"]))
    flat = facts.flatten()
    flat.pop("estimate.table", None)
    flat.update(situation.flatten())
    led = ledger.build(facts, kb, situation.ledger_phase(kb))
    mode = ranking_mode(kb, inputs.ranking)
    diag = diagnose(flat, kb, led, mode)
    sims = simulate([f.id for f in diag.fixes if _simulated(f.id, flat, kb)], facts, led, kb)
    sims.update(_request_simulations([f.id for f in diag.fixes], flat, led, kb))
    diag = rank_fixes(diag, sims, led, kb, mode)
    diag.situation = situation
    return facts, flat, diag
