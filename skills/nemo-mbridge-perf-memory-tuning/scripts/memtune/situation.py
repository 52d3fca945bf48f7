"""The situation an expert reads before counting bytes: what failed, when, where, how memory moves, what changed.

Pure: Facts (+ what the agent stated, + a pasted log's text) -> Situation.  Every field is a ``Reading`` with the
clues it rests on and where each came from (the agent's statement, a traceback frame, a number, the config, the
user's words), so the engine can weigh them and the answer can quote them.  The vocabulary is
knowledge/situation.yaml; this module knows no cause and no fix.

Precedence, strongest first: what the agent stated (it read the user's message) > the log (frames, per-rank lines,
the failed request's size against the shapes the config implies) > the user's words.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache, partial
from typing import Any, NamedTuple

from .facts import Facts
from .inputs.question import gpu_counts_in, model_sizes_in, names_topic, without_small
from .inputs.units import parse_size
from .knowledge import Knowledge

GIB = 2**30


# Field names an agent may state (diagnose --phase ...), with the situation.yaml list holding their values.
STATED_FIELDS = {"phase": "phases", "component": "components", "trend": "trends", "process": "processes",
                 "where": "places", "framework": "frameworks", "step": "steps"}


@dataclass(frozen=True, eq=False)
class Clue:
    """One piece of evidence: what was read, and what kind of source it came from."""

    text: str
    source: str  # agent | log | number | config | words | asked (a question the user asked: a suspicion)


@dataclass(eq=False)
class Reading:
    value: str
    clues: list[Clue] = field(default_factory=list)

    @property
    def source(self) -> str:
        return self.clues[0].source if self.clues else "words"


@dataclass(eq=False)
class Stated:
    """What the agent read in the user's message and passed on the command line (validated names)."""

    phase: str | None = None
    step: str | None = None
    component: list[str] = field(default_factory=list)
    trend: str | None = None
    process: str | None = None
    where: str | None = None
    framework: str | None = None
    changed: list[str] = field(default_factory=list)  # free text, one item per --changed


@dataclass(eq=False, repr=False)  # 20 fields: generated __eq__ / __repr__ cost start-up time and nothing uses them
class Situation:
    failed: Reading | None = None  # what the failed allocation is: impossible | logits | parameters | ...
    failed_bytes: float | None = None
    failed_batch: int | None = None  # sequences in the logits tensor the request was, where the match says
    phase: Reading | None = None
    step: Reading | None = None  # first-step | later-step
    where: Reading | None = None  # first-stage | last-stage | some-ranks | all-ranks
    trend: Reading | None = None  # grows | spike | constant
    process: Reading | None = None  # colocated-engine | other-process | host
    framework: Reading | None = None
    components: list[Reading] = field(default_factory=list)
    changed: list[Reading] = field(default_factory=list)  # fix ids, or "stack" for a version / container change
    tried: list[Reading] = field(default_factory=list)  # fix ids the user says they tried
    no_effect: list[Reading] = field(default_factory=list)  # tried (or changed) and it did nothing, or made it worse
    removed: list[Reading] = field(default_factory=list)  # memory settings the user turned off or took out
    worked_with: list[Reading] = field(default_factory=list)  # settings the user says made the run fit
    absent: list[Reading] = field(default_factory=list)  # memory settings the user says are not on ("no recompute")
    figures: list[tuple[str, str | None]] = field(default_factory=list)  # memory figures the user quotes, as typed
    waste_bytes: float | None = None  # the largest memory held outside live tensors that the evidence states
    capacity_bytes: float | None = None  # the failing GPU's usable capacity (OOM message, else the GPU named)
    waste_share: float | None = None  # waste_bytes / what PyTorch reserved, where both are stated
    waste_source: str | None = None  # number (the OOM message) or words (the question's figures)
    worked_before: bool = False  # the user says the same setup ran before
    expected_release: bool = False  # the user expects memory to have been released (offload, sleep) before it failed
    owner_gone: bool = False  # memory stays held after the process that held it was killed or exited
    freed_by_collect: bool = False  # the user says gc.collect() (with empty_cache) gives the risen memory back
    fewer_gpus_fit: bool = False  # the run works on fewer GPUs than the count it fails on
    kept: list[str] = field(default_factory=list)  # components the user says stay on the GPU ("optimizer still on it")
    forward_only: bool = False  # the user says the model or pass that holds the memory only runs forward (no update)
    more_than_expected: bool = False  # the user says it holds more than it should (more than its weights)
    device_zero_crowded: bool = False  # other processes of the job sit on GPU 0 beside its own (each rank's context)
    some_samples_fail: bool = False  # only some of the data fails, the rest trains
    refused: list[str] = field(default_factory=list)  # fix ids the user says are not an option
    one_process: bool = False  # the user or the launcher's banner says the run started one process
    critic: bool = False  # the RL run trains a critic beside the actor (PPO with GAE): a second trained model
    no_save: bool = False  # the user says no checkpoint was saved before it failed
    fixed_shapes_fit: bool = False  # padded to one fixed length it fits, at its own lengths it runs out
    steady_inputs: bool = False  # the user says the inputs (batch, lengths) are the same every step
    recompute_off: bool = False  # a setting turns activation recompute off (gradient_checkpointing false)
    env_case_mismatch: str | None = None  # a variable exported in another case than the name the program reads
    capacity_mismatch: bool = False  # the OOM message's device is far smaller than the GPU the user names
    not_applied_said: bool = False  # the user says a setting never reached the run (ignored, not applied)
    not_applied_asked: bool = False  # the user asks whether a setting reached the run ("does it take effect at all?")
    made_worse: bool = False  # a change the user made made memory worse: it reached the run
    compared: bool = False  # the user measured the run with a setting on and off ("switching X on and off")
    after_phase: str | None = None  # a phase said to be over when it failed ("after every checkpoint save")
    gpu_memory_failed: bool = False  # a clause that says something failed names the GPU's memory ("CUDA OOM", xiancun)
    gpu_memory_fine: bool = False  # the user says the GPU's memory is fine or low ("GPU memory is fine")
    failure_said: bool = False  # a clause says something failed (OOM, crash, hang) and does not ask whether it did
    oom_said: bool = False  # a clause that does not ask says it ran out of memory ("is this an OOM?" asks)
    oom_asked: bool = False  # the user asks whether it ran out of memory and nothing (words or log) says it did
    grows_per_step: bool = False  # the growth is said beside a step count ("step after step"), not within one phase
    setting_stated: bool = False  # the user names a setting they set, changed or tried, or the error names one
    env_named: list[str] = field(default_factory=list)  # environment variables named so (what a check should print)
    kernel_fault: bool = False  # a kernel fault CUDA reports late (illegal address, launch failure): the frame misleads
    call_path: list[str] = field(default_factory=list)  # the failing traceback's innermost functions, innermost first
    error: str | None = None  # the error line of a crash with no memory failure in it ("pidfd_getfd: not permitted")
    error_from_a_try: bool = False  # the user says it ran out and names that error as what a workaround then raised
    headroom_bytes: float | None = None  # free + reserved-but-unallocated at the failure: all an allocator could use
    shortfall_bytes: float | None = None  # the request beyond that headroom: what freeing something else must cover
    trainer: str | None = None  # the trainer when it is not Megatron-Core (situation.yaml frameworks trainer)
    megatron: bool = False  # something the user gave says Megatron-Core trains (_megatron_evident)
    host_ram_bytes: float | None = None  # the machine's RAM as the user states it ("physical memory 512GB")
    # the most GPU memory the user quotes over the size of the checkpoint files they quote ("the weight files are 32G,
    # loaded it takes 60G"): about 2 is 16-bit weights loaded in FP32
    load_over_files: float | None = None
    image_max_pixels: int | None = None  # the largest image pixel cap stated (max_pixels, image_max_pixels, MAX_PIXELS)
    image_tokens: float | None = None  # LLM tokens of one image at that cap (situation.yaml image_pixels_per_token)

    def flatten(self) -> dict[str, Any]:
        """``situation.*`` facts for rule and cause conditions (knowledge/facts.yaml)."""
        out: dict[str, Any] = {}
        for name, reading in self.readings().items():
            asked = reading is not None and reading.source == "asked"  # a suspicion: only suspected_* says it
            out[f"situation.{name}"] = reading.value if reading and not asked else None
            out[f"situation.{name}_source"] = reading.source if reading and not asked else None
        out["situation.suspected_trend"] = self.trend.value if self.trend and self.trend.source == "asked" else None
        out["situation.failed_bytes"] = self.failed_bytes
        out["situation.failed_batch"] = self.failed_batch
        out["situation.waste_bytes"] = self.waste_bytes
        out["situation.capacity_bytes"] = self.capacity_bytes
        out["situation.waste_share"] = self.waste_share
        out["situation.waste_source"] = self.waste_source
        out["situation.worked_before"] = self.worked_before
        out["situation.expected_release"] = self.expected_release
        out["situation.owner_gone"] = self.owner_gone
        out["situation.freed_by_collect"] = self.freed_by_collect
        out["situation.fewer_gpus_fit"] = self.fewer_gpus_fit
        out["situation.kept"] = list(self.kept)
        out["situation.forward_only"] = self.forward_only
        out["situation.more_than_expected"] = self.more_than_expected
        out["situation.device_zero_crowded"] = self.device_zero_crowded
        out["situation.some_samples_fail"] = self.some_samples_fail
        out["situation.refused"] = list(self.refused)
        out["situation.one_process"] = self.one_process
        out["situation.critic"] = self.critic
        out["situation.no_save"] = self.no_save
        out["situation.fixed_shapes_fit"] = self.fixed_shapes_fit
        out["situation.steady_inputs"] = self.steady_inputs
        out["situation.capacity_mismatch"] = self.capacity_mismatch
        out["situation.not_applied_said"] = self.not_applied_said
        out["situation.not_applied_asked"] = self.not_applied_asked
        out["situation.made_worse"] = self.made_worse
        out["situation.compared"] = self.compared
        out["situation.after_phase"] = self.after_phase
        out["situation.gpu_memory_failed"] = self.gpu_memory_failed
        out["situation.gpu_memory_fine"] = self.gpu_memory_fine
        out["situation.failure_said"] = self.failure_said
        out["situation.oom_said"] = self.oom_said
        out["situation.oom_asked"] = self.oom_asked
        out["situation.grows_per_step"] = self.grows_per_step
        out["situation.setting_stated"] = self.setting_stated
        out["situation.env_named"] = list(self.env_named) or None  # None: the check's default variables
        out["situation.kernel_fault"] = self.kernel_fault
        out["situation.call_path"] = list(self.call_path)
        out["situation.error"] = self.error
        out["situation.error_from_a_try"] = self.error_from_a_try
        out["situation.headroom_bytes"] = self.headroom_bytes
        out["situation.shortfall_bytes"] = self.shortfall_bytes
        out["situation.trainer"] = self.trainer
        out["situation.megatron"] = self.megatron
        out["situation.host_ram_bytes"] = self.host_ram_bytes
        out["situation.load_over_files"] = self.load_over_files
        out["situation.image_max_pixels"] = self.image_max_pixels
        out["situation.recompute_off"] = self.recompute_off
        out["situation.env_case_mismatch"] = self.env_case_mismatch
        out["situation.image_tokens"] = self.image_tokens
        out["situation.components"] = [r.value for r in self.components]
        out["situation.changed"] = [r.value for r in self.changed]
        out["situation.tried"] = [r.value for r in self.tried]
        out["situation.no_effect"] = [r.value for r in self.no_effect]
        out["situation.removed"] = [r.value for r in self.removed]
        out["situation.worked_with"] = [r.value for r in self.worked_with]
        out["situation.absent"] = [r.value for r in self.absent]
        out["situation.read"] = [name for name, reading in self.readings().items()
                                 if reading is not None and reading.source not in ("words", "asked")]
        return out

    def ledger_phase(self, kb: Knowledge) -> str | None:
        """The GPU ledger's name for the phase read (situation.yaml ``ledger_phase``); None when no phase was read,
        the phase moves no memory (config validation), or host memory is what ran out (the ledger counts the GPU's)."""
        if self.phase is None or (self.process is not None and self.process.value == "host"):
            return None
        phases = (kb.tables.get("situation") or {}).get("phases") or []
        return next((p.get("ledger_phase") for p in phases if p["id"] == self.phase.value), None)

    def readings(self) -> dict[str, Reading | None]:
        """The single-valued fields by name."""
        return {"failed": self.failed, "phase": self.phase, "step": self.step, "where": self.where,
                "trend": self.trend, "process": self.process, "framework": self.framework}


# --------------------------------------------------------------------------- entry point


def read_situation(facts: Facts, kb: Knowledge, stated: Stated | None = None, log_text: str | None = None,
                   config_text: str | None = None) -> Situation:
    """Read every field from the strongest evidence that states it."""
    table = kb.tables.get("situation") or {}
    words = _Words.of(kb)
    text = facts.question.text or ""
    clauses = _clauses(text)
    sit = Situation()
    stated = stated or Stated()
    asking = _asking_clauses(text, words)
    said = [c for c in clauses if c not in asking]  # what the user says, without the clauses that ask

    sit.failed, sit.failed_bytes = _failed(facts, table, kb)
    sit.failed_batch = _batch_of(sit.failed)
    # a setting written as key=value or --flag names a pass it configures ("log_prob_micro_batch_size_per_gpu=8",
    # "--megatron-to-hf-mode bridge"), not the pass that failed
    # a clause that asks ("does it mean 8 copies of the model are saved in memory?") names no phase it failed in
    mates = frozenset(_unset_settings(c) for s in _sentences(text) if words.failure.search(s)
                      for c in _clauses(s) if not words.failure.search(c))
    said_phase = _one("phases", [_unset_settings(c) for c in said], words, order=words.phase_order, symptoms=True,
                      mates=mates)
    sit.phase = (_stated(stated.phase, "phase") or _refined(_phase_from_log(facts, words, log_text), said_phase)
                 or said_phase or _phase_from_question_frames(text, words) or _phase_from_logprob_logits(facts))
    sit.after_phase = next((v for c in clauses for v, _ in _hits("phases", c, words, over=True)), None)
    # commands pasted in the order they ran (download, convert_hf_checkpoint, ..., finetune/lora.py): the last one is
    # what failed, so a phase the words take from an earlier program's name is a step that finished
    # (Lightning-AI/lit-gpt#781: the conversion ran, then the LoRA fine-tune ran out of memory)
    if sit.phase is not None and sit.phase.source == "words" and sit.phase.value in _done_programs(log_text, words):
        sit.phase = None
    # "died right after the rollout phase" with "the actor does its own rollout generation" elsewhere: a phase the
    # failure's own clause places before the failure, naming no other, is not where it failed, whichever clause
    # also names it ("fails when it wakes up after the weight sync" names the wake-up it failed in)
    if sit.phase is not None and sit.phase.source == "words" and any(
            words.failure.search(c) and not _hits("phases", c, words)
            and sit.phase.value in (v for v, _ in _hits("phases", c, words, over=True)) for c in said):
        sit.phase = None
    sit.step = (_stated(stated.step, "step") or _step_from_log(facts)
                or _one("steps", clauses, words, failing_only=False) or _step_from_number(text, words))
    # "the processes appear from the checkpoint load on; when training starts it OOMs": a set-up phase named only
    # beside no failure, with the first step in the failure's own clause, finished before it failed (LlamaFactory#5750)
    # (not where the failure's clause ties the step to what came before: "after the resume, the first round OOMs")
    if (sit.phase is not None and sit.phase.source == "words" and sit.phase.value in _BEFORE_THE_FIRST_STEP
            and sit.step is not None and sit.step.value == "first-step"
            and not any(words.failure.search(c) and any(v == sit.phase.value for v, _ in _hits("phases", c, words))
                        for c in said)
            and any(words.failure.search(c) and any(v == "first-step" for v, _ in _hits("steps", c, words))
                    and not any(o in _normal(c) for o in words.over) for c in said)):
        sit.phase = None
    sit.where = _stated(stated.where, "where") or _where_from_log(facts) or _one("places", clauses, words)
    # several trends named, none beside the failure: growth first, since measuring it per step is also the check
    # that tells a leak from a spike ("memory keeps rising, then suddenly needs 21 GiB")
    # "is it a leak?" is a suspicion, not memory seen to grow: read only where no clause states a trend, with the
    # source "asked", so it supports the per-step measurement but rules no other cause out (flatten)
    order = tuple(v for v, _ in words.lists.get("trends", []))
    sit.trend = (_stated(stated.trend, "trend") or _trend_from_log(facts, table)
                 or _one("trends", said, words, order=order)
                 or _asked(_one("trends", [c for c in clauses if c not in said], words, order=order)))
    # "PT and SFT fit, then DPO OOMs: memory higher and higher": growth from one training stage to the next is what
    # each stage adds (DPO's reference model), not memory that rises over the steps of one run
    if sit.trend is not None and sit.trend.source == "words" and sit.trend.value == "grows" and words.stages and \
            not words.per_step.search(text) and \
            len({said for _, _, said in words.stages.spans(text)}) >= 2:
        sit.trend = None
    # memory seen to grow over many steps failed in a step, not in a load or build before the first one that a clause
    # without any failure names ("after x10000 steps ... it leads to OOM. If I resume training, this phenomenon
    # repeats": the resume is a context)
    if (sit.phase is not None and sit.phase.source == "words" and sit.phase.value in _BEFORE_THE_FIRST_STEP
            and sit.trend is not None and sit.trend.value == "grows"
            and sit.step is not None and sit.step.value == "later-step"
            and not any(words.failure.search(c) for c in said if any(v == sit.phase.value
                                                                      for v, _ in _hits("phases", c, words)))):
        sit.phase = None
    # memory said to climb in the sentence that names a load or build, with no step beyond the first, is that one-off
    # phase filling memory, not growth over steps (PrimeIntellect-ai/prime-rl#1760: "before step 0,
    # while the trainer loads the model weights, host RAM climbs until the processes get SIGKILLed")
    if (sit.trend is not None and sit.trend.source == "words" and sit.trend.value == "grows"
            and sit.phase is not None and sit.phase.value in _BEFORE_THE_FIRST_STEP
            and (sit.step is None or sit.step.value == "first-step")
            and any(any(v == "grows" for v, _ in _hits("trends", c, words))
                    and any(v == sit.phase.value for v, _ in _hits("phases", c, words)) for c in _sentences(text))):
        sit.trend = None
    sit.gpu_memory_fine = bool(words.gpu_memory_fine.search(text))
    sit.process = (_stated(stated.process, "process")
                   or _process_from_words(clauses, said, words, sit.gpu_memory_fine)
                   or _process_from_log(facts, table)
                   or _host_report_before_a_kill(facts, table, log_text))
    # a kill (SIGKILL, exit -9) while the user says the GPUs' memory is low: the host's is what ran out, not a GPU's
    # (2U1/Qwen-VL-Series-Finetune#79: "killed randomly ... memory used on each GPU is only less than 20%")
    if sit.process is None and sit.gpu_memory_fine and facts.log.host_oom and facts.log.oom_kind == "host":
        sit.process = Reading("host", [Clue(f"\u201c{(facts.log.first_error or 'SIGKILL')[:80]}\u201d", "log")])
    # the log's own GPU allocation failure, with no host kill, outranks host memory read from words alone: Chinese
    # says nei cun (memory) of either ("dan ka sft nei cun yi chu" beside Paddle's "Out of memory error on GPU 0")
    if (sit.process is not None and sit.process.value == "host" and sit.process.source == "words"
            and facts.log.has_memory_failure and not facts.log.host_oom):
        sit.process = None
    # the user's words first; else the keys of the config they passed ("micro_train_batch_size=1" is OpenRLHF's),
    # only where they name one framework
    sit.framework = (_stated(stated.framework, "framework")
                     or _one("frameworks", clauses, words, failing_only=False)
                     or _framework_from_config(config_text, words))
    # a framework whose trainer is not Megatron-Core (OpenRLHF's DeepSpeed, LLaMA-Factory's HF Trainer) has no Megatron
    # parallel layout to change, unless the user names Megatron (LLaMA-Factory's mcore adapter, a Megatron backend)
    sit.trainer = (_trainer(sit.framework, table, text + " " + (config_text or ""), words)
                   or _own_trainer(sit.framework, log_text, text + " " + (config_text or ""), words, kb))
    sit.megatron = sit.trainer is None and _megatron_evident(facts, sit.framework, table,
                                                             f"{text} {config_text or ''} {log_text or ''}", words)
    # the framework's own default, when the user is silent; an SFT or pretraining run that says nothing of RL has
    # no rollout engine (an engine named with its version, "sglang 0.5.1, safetensors 0.6.2" in a pip list, is
    # installed, not running)
    no_rollout = (((facts.config.task or facts.question.layout.get("task")) in ("sft", "pretrain")
                   or bool(words.offline.search(text))) and not words.rl.search(_PACKAGE_VERSION.sub(" ", text)))
    if (sit.process is not None and sit.process.value == "colocated-engine" and sit.process.source == "words"
            and _one("processes", [_PACKAGE_VERSION.sub(" ", c) for c in clauses], words, failing_only=False) is None):
        # an engine named only with its version ("... TRL 0.8.6, vLLM 0.4.3" in the environment a user lists,
        # LlamaFactory#4310) is installed, not running beside the trainer
        sit.process = None
    if sit.process is None and sit.framework is not None and not no_rollout:
        sit.process = _default_process(sit.framework, table)
    elif (no_rollout and sit.process is not None and sit.process.value == "colocated-engine"
          and sit.process.source == "words" and not _places_engine(clauses, words)):
        # an SFT run that only names an engine ("sglang 0.5.1" in its pip list) runs none beside it
        sit.process = None
    elif (sit.process is not None and sit.process.value == "colocated-engine" and sit.process.source == "words"
          and sit.framework is not None and not _places_engine(clauses, words)):
        # only an engine's name: where it runs is the framework's placement ("OpenRLHF ... 1 vLLM engine")
        sit.process = _default_process(sit.framework, table, only="separate-engine") or sit.process
    sit.components = ([Reading(c, [Clue(f"--component {c}", "agent")]) for c in stated.component]
                      or _all("components", _sentences(without_small(text, kb)), words))
    sentences = _sentences(text)
    changes = _changes(sentences, kb, words)
    sit.changed, sit.tried, sit.no_effect, sit.removed, sit.worked_with = changes
    # "is disabling X a supported way?" asks about taking X out; "did X not help?" still says X was tried
    without_asking = [_stated_only(s, words) for s in sentences]
    if without_asking != sentences:  # read the removals again only where a clause asks
        sit.removed = _changes(without_asking, kb, words)[3]
    if stated.changed:  # what the agent read wins; the user's own sentences add what it did not state
        agent = _changes(_sentences(" ; ".join(stated.changed)), kb, words, agent=True)
        own = (sit.changed, sit.tried, sit.no_effect, sit.removed, sit.worked_with)
        (sit.changed, sit.tried, sit.no_effect, sit.removed,
         sit.worked_with) = (_merge(a, b) for a, b in zip(agent, own, strict=True))
    # "with ZeRO-3 + gradient checkpointing it trains; turn checkpointing off and it OOMs": of the setup that fit,
    # the setting taken out is what made it fit - the rest stayed in the run that failed (VLM-R1#36)
    lever = [r for r in sit.worked_with if r.value in {x.value for x in sit.removed}]
    if lever:
        sit.worked_with = lever
    sit.absent = _absent(sentences, kb, words, {r.value for r in [*sit.removed, *sit.worked_with]})
    sit.figures = _figures(facts)
    sit.waste_bytes, sit.waste_share = _waste(facts)
    sit.waste_source = None if sit.waste_bytes is None else (
        "number" if facts.log.reserved_unallocated_bytes is not None else "words")
    sit.capacity_bytes = facts.log.capacity_bytes or facts.gpu.capacity_bytes
    # "my card has 80 GB, why does it say 3.82 GiB total?": the process is not on the card the user means
    named = facts.gpu.capacity_bytes if facts.gpu.inferred_from in ("name", "typed-size") else None
    compare = (kb.tables.get("situation") or {})["comparisons"]
    sit.capacity_mismatch = bool(facts.log.capacity_bytes and named
                                 and facts.log.capacity_bytes < compare["other_device_share"] * named)
    sit.worked_before = _worked_before(text, words)
    if not sit.worked_before:
        # "it works with the pjnl-20240503 image and goes OOM with pjnl-20240504": one build fits, the next fails
        moved = _fits_on_one_build(text, words)
        if moved:
            sit.worked_before = True
            _add_change(sit.changed, moved)
    if not sit.worked_before and _names_software(text, words):
        # "1.13.1: 5515MiB, 2.0.0: 6802MiB": the same run, measured on both
        moved = _more_memory_on_newer(text, compare["newer_version_more"])
        if not moved and words.more_on_version is not None:
            # "0.9.1 takes about 2GB more than 0.8.2": the comparison names a version ("why does saving need more GPU
            # memory than training? ... deepspeed 0.4.3, torch 1.8" compares saving with training, no versions)
            if any(words.more_on_version.search(c) and _VERSION.search(c) for c in _sentences(text)):
                moved = next(iter(_two_versions(text, words)), None)
        if moved:
            sit.worked_before = True
            _add_change(sit.changed, moved)
    if sit.worked_before and not any(r.value == "stack" for r in sit.changed):
        sit.changed.extend(_two_versions(text, words))
    if sit.worked_before and not sit.changed and words.regressed.search(text):
        # "this configuration is a regression for us (container nightly-2026-04-28, Bridge commit fcb4c287)": it ran
        # before, no setting is said to have changed, and the software is named - the software is what moved
        version = words.versions.spans(_software_words(text, words))
        if version:
            sit.changed.append(Reading("stack", [Clue(f"\u201c{version[0][2].strip()}\u201d", "words")]))
    if any(r.value == "stack" for r in sit.changed) and words.config_unchanged.search(text):
        # "the script is unchanged, only the branch moved": the settings listed describe the run; the software moved
        sit.changed = [r for r in sit.changed if r.value == "stack"]
    sit.expected_release = bool(words.expected_release.search(text))
    # "training ended, memory still held" names a process that is gone unless the program goes on in it ("back in my
    # script, in the same process, an extra evaluation OOMs": DeepSpeed#3025, ZeRO-3's gathered weights)
    sit.owner_gone = bool(words.owner_gone.search(text)) and not words.same_process.search(text)
    sit.freed_by_collect = bool(words.freed_by_collect.search(text))
    sit.fewer_gpus_fit = _fewer_gpus_fit(said, words, kb)
    kept = [(c, v) for c in said if words.kept.search(c) for v, _ in _hits("components", c, words)]
    sit.kept = list(dict.fromkeys(v for _, v in kept))
    if kept and sit.trend is None:  # "the weights stay on the GPU": memory not released where it should be
        sit.trend = Reading("held", [Clue(f"\u201c{words.kept.spans(kept[0][0])[0][2].strip()}\u201d", "words")])
    # the words, or a setting that makes the run a prediction one ("do_predict=true")
    sit.forward_only = bool(words.forward_only.search(text) or words.forward_only.search(config_text or ""))
    sit.more_than_expected = bool(words.more_than_expected.search(text))
    sit.device_zero_crowded = bool(words.device_zero_crowded.search(text))
    sit.refused = _refused(text, words)
    # a setting named in the words that refuse it ("how do I fix it without lowering the batch size?") was not tried:
    # the clue a try was read from holds the refusal, so that reading goes
    refusing = [said for fix, said in words.refused if fix in sit.refused]
    sit.tried, sit.no_effect = ([r for r in readings if not (r.value in sit.refused and any(
        said.search(c.text) for said in refusing for c in r.clues))] for readings in (sit.tried, sit.no_effect))
    some = words.some_samples.spans(text)
    sit.some_samples_fail = bool(some)
    if some and sit.trend is None:  # the failing samples are larger than the rest: a spike at the steps that draw them
        sit.trend = Reading("spike", [Clue(f"\u201c{some[0][2]}\u201d", "words")])
    sit.one_process = words.one_process is not None and bool(words.one_process.search(f"{text}\n{log_text or ''}"))
    everything = f"{text}\n{config_text or ''}\n{log_text or ''}"
    sit.critic = words.critic is not None and bool(words.critic.search(everything))
    sit.no_save = words.no_save is not None and bool(words.no_save.search(text))
    sit.fixed_shapes_fit = words.fixed_shapes_fit is not None and bool(words.fixed_shapes_fit.search(text))
    sit.steady_inputs = words.steady_inputs is not None and bool(words.steady_inputs.search(text))
    sit.recompute_off = _recompute_off(facts, kb, f"{config_text or ''}\n{log_text or ''}", clauses, words)
    sit.env_case_mismatch = _env_case_mismatch(f"{text}\n{log_text or ''}", table)
    sit.not_applied_said = any(words.not_applied.search(c) for c in said)
    doubt = [words.not_applied] + ([words.not_applied_if_asked] if words.not_applied_if_asked else [])
    sit.not_applied_asked = not sit.not_applied_said and any(rx.search(c) for c in asking for rx in doubt)
    sit.compared = any(words.compared.search(c) for c in sentences)
    sit.made_worse = any(words.worse.search(c) and (words.changed.search(c) or words.tried.search(c)
                                                    or words.compared.search(c)) for c in sentences)
    sit.gpu_memory_failed = any(_says_gpu_failed(c, words) for c in clauses)
    sit.failure_said = any(words.failure.search(c) for c in said)
    sit.oom_said = "oom" in facts.question.topics and any(names_topic(c, kb, "oom") and not words.oom_denied.search(c)
                                                          for c in said)
    sit.oom_asked = ("oom" in facts.question.topics and not sit.oom_said and not sit.gpu_memory_failed
                     and not facts.log.has_memory_failure and not facts.log.host_oom)
    sit.grows_per_step = sit.trend is not None and sit.trend.value == "grows" and (
        sit.trend.source == "log" or any(words.per_step.search(c) for c in sentences  # "every save, it rises a notch"
                                         if any(v == "grows" for v, _ in _hits("trends", c, words))))
    logged = _call_path(facts, log_text)
    sit.call_path = logged or _said_call_path(text, words)
    if sit.failed is None and not facts.log.frames and sit.call_path:  # a pasted trace the parser could not read
        functions = [name.split(" (", 1)[0] for name in sit.call_path[:_FRAME_WORDS_DEPTH]]  # not the file names
        sit.failed = _failed_in_names(functions, table, "log" if logged else "words")
        if sit.failed is not None and not logged and sit.failed_bytes is None:
            sit.failed_bytes = _figure_beside(text, functions, facts.question.memory_figures)
    if facts.log.crash and not facts.log.has_memory_failure and facts.log.first_error:
        sit.error = facts.log.first_error.strip()[:ERROR_CHARS]
    refusals = {k["id"] for k in (kb.tables.get("signatures") or {}).get("kinds") or [] if k.get("refusal")}
    refusal = next((e for e in facts.log.events if e.kind in refusals), None)
    if sit.error is None and refusal is not None:  # a check that refused the run says in its own words what it needs
        sit.error = refusal.text.strip()[:ERROR_CHARS]
    sit.error_from_a_try = sit.oom_said and bool(sit.error) and _error_from_a_try(sentences, sit.error, words)
    sit.setting_stated, sit.env_named = _setting_stated(sentences, words, sit)
    sit.kernel_fault = any(names_topic(t, kb, "kernel-fault") for t in (text, sit.error) if t)
    sit.host_ram_bytes = facts.question.figure("host-ram", last=True) or _node_ram(facts.log.host_figures)
    sit.load_over_files = _load_over_files(facts.question.memory_figures)
    sit.image_max_pixels = _image_pixel_cap([text, log_text or "", config_text or "",
                                             *(f"{k}={v}" for k, v in facts.env.variables.items())])
    if sit.image_max_pixels:
        sit.image_tokens = sit.image_max_pixels / compare["image_pixels_per_token"]
    log = facts.log
    if log.free_bytes is not None and log.reserved_unallocated_bytes is not None:
        sit.headroom_bytes = log.free_bytes + log.reserved_unallocated_bytes
        if log.requested_bytes is not None:
            sit.shortfall_bytes = max(0.0, log.requested_bytes - sit.headroom_bytes)
    return sit


_FIGURE_TEXT = re.compile(r"\d+(?:\.\d+)?\s*[KMGT]i?B?\b|\d+(?:\.\d+)?\s*G\b", re.I)


def _load_over_files(figures: list[dict[str, Any]]) -> float | None:
    """The most GPU memory quoted (not a card's size, the host's RAM or a request) over the checkpoint files' size
    quoted beside it; None unless both are quoted."""
    files = max((f["bytes"] for f in figures if f.get("role") == "files"), default=0.0)
    used = max((f["bytes"] for f in figures if f.get("role") in (None, "peak", "oom", "allocated", "reserved")),
               default=0.0)
    return used / files if files and used else None


def _figures(facts: Facts) -> list[tuple[str, str | None]]:
    """The memory figures the user quotes, as typed, with the role the question reader gave each (peak, reserved,
    request, ...): the numbers the answer must be about."""
    text = facts.question.text or ""
    out = []
    for fig in facts.question.memory_figures:
        m = _FIGURE_TEXT.match(text, fig.get("at", 0))
        if m:
            out.append((m.group(0), fig.get("role")))
    return out[:12]


def _waste(facts: Facts) -> tuple[float | None, float | None]:
    """The largest memory held but not in live tensors, and its share of what PyTorch reserved: the OOM message's
    'reserved but unallocated', else the question's figures (a 'reserved but unallocated' / 'inactive' figure, or
    the last 'reserved' minus the last 'allocated' it quotes).  A request smaller than it could have been served."""
    log = facts.log
    if log.reserved_unallocated_bytes is not None:
        reserved = log.reserved_bytes or (log.allocated_bytes or 0) + log.reserved_unallocated_bytes
        return log.reserved_unallocated_bytes, (log.reserved_unallocated_bytes / reserved if reserved else None)
    stated = facts.question.figure("reserved-unallocated")
    reserved = facts.question.figure("reserved", last=True)
    allocated = facts.question.figure("allocated", last=True)
    if stated is None and reserved and allocated is not None and reserved > allocated:
        stated = reserved - allocated
    if stated is None:
        return None, None
    return stated, (stated / reserved if reserved and reserved >= stated else None)


# --------------------------------------------------------------------------- the agent's statement


def _stated(value: str | None, name: str) -> Reading | None:
    return Reading(value, [Clue(f"--{name} {value}", "agent")]) if value else None


def known_values(kb: Knowledge) -> dict[str, list[str]]:
    """Names an agent may state per field (diagnose --help lists them; the CLI validates against them)."""
    table = kb.tables.get("situation") or {}
    return {name: [e["id"] for e in table.get(key) or []] for name, key in STATED_FIELDS.items()}


# --------------------------------------------------------------------------- what failed: the request's shape


def _failed(facts: Facts, table: Mapping[str, Any], kb: Knowledge) -> tuple[Reading | None, float | None]:
    """What the failed allocation is, from its size against the GPU and the shapes the config implies.

    Only shapes of a model the user named count (a stand-in preset's vocabulary proves nothing), and a logits
    tensor only for token counts the config or the question implies: at the message's two decimals almost any
    size is *some* number of tokens times a vocabulary.
    """
    request = facts.log.requested_bytes or facts.question.figure("request")
    if not request:
        return None, None
    kind_of_source = "number" if facts.log.requested_bytes else "words"
    capacity = facts.log.capacity_bytes or facts.gpu.capacity_bytes
    largest = None if capacity else _largest_gpu(kb)  # the GPU unknown: a request no GPU holds is still one
    tol = float((table.get("request_shapes") or {}).get("tolerance", 0.005))
    rounded_tol = float((table.get("request_shapes") or {}).get("rounded_tolerance", tol))
    logits_match = partial(_logits_match, rounded_tol=rounded_tol)
    if (capacity and request > capacity) or (largest and request > largest[1]):
        where = (f"a GPU of {_gib(capacity)}" if capacity
                 else f"any GPU (the largest known, {largest[0]}, has {_gib(largest[1])})")
        clue = Clue(f"Tried to allocate {_gib(request)} on {where}: no setting can serve one "
                    "allocation larger than the GPU", kind_of_source)
        # a logits tensor of the run's own token count can outgrow a GPU (262k tokens x 152k vocabulary x 4 B is
        # 149 GiB): still logits, which chunking, a vocabulary split or a shorter sequence shrink
        logits = logits_match(request, facts, tol)
        if logits is not None:
            return Reading("logits", [Clue(logits.text, kind_of_source), clue]), request
        # one fp32 copy of a whole 7B model is 25 GiB: a model-state buffer (Megatron's contiguous grad buffer,
        # ZeRO / Gemini's flat fp32 master copy) that no layout of this one GPU holds - capacity, not a shape bug
        params = None if facts.config.approximate_shape else _parameters_match(request, facts, tol, kb)
        if params is not None:
            return Reading("parameters", [Clue(params.text, kind_of_source), clue]), request
        extra = _attention_match(request, facts, tol, dense=True)
        return Reading("impossible", [clue, *([extra] if extra else [])]), request
    if facts.config.approximate_shape:  # a stand-in's shapes prove nothing; figures the user states and the code
        stated = logits_match(request, facts, tol)  # that asked still do
        if stated is not None:
            return Reading("logits", [Clue(stated.text, kind_of_source)]), request
        return _failed_in_frame(facts, table), request
    for kind, match in (("logits", logits_match), ("parameters", partial(_parameters_match, kb=kb)),
                        ("attention-scores", _attention_match)):
        clue = match(request, facts, tol)
        if clue is not None:
            return Reading(kind, [Clue(clue.text, kind_of_source)]), request
    return _failed_in_frame(facts, table), request


_BESIDE_CALL = 24  # characters from a call the user names to the size they give for it: "logits.float() zhege 49G"


def _figure_beside(text: str, names: list[str], figures: list[dict[str, Any]]) -> float | None:
    """The memory figure the user writes right after naming the call that asked for it: that call's request."""
    for name in names:
        for m in re.finditer(re.escape(name), text):
            near = [f["bytes"] for f in figures if m.end() <= f.get("at", -1) <= m.end() + _BESIDE_CALL]
            if near:
                return near[0]
    return None


def _largest_gpu(kb: Knowledge) -> tuple[str, float] | None:
    """(name, bytes) of the largest GPU knowledge/gpus.yaml knows, by usable capacity (nominal where none seen)."""
    sizes = [(g["name"], (g.get("capacity_gib") or g.get("nominal_gb") or 0) * 2**30) for g in kb.entries("gpus")]
    return max(sizes, key=lambda p: p[1], default=None)


_FRAME_WORDS_DEPTH = 2  # the line that asked for the memory and its caller: deeper frames name whole passes


def _failed_in_frame(facts: Facts, table: Mapping[str, Any]) -> Reading | None:
    """What the request is by the code that asked for it, when no size the config implies matches: the innermost
    frames' function and code line name the tensor ("normalized_vocab_parallel_logits = vocab_parallel_logits -
    logits_max" is a logits tensor at whatever token count; "Reducer" buckets every gradient).  Words are matched
    as parts of identifiers (request_shapes kinds' frame_words)."""
    return _failed_in_names(list(reversed(facts.log.frames[-_FRAME_WORDS_DEPTH:])), table, "log")


def _failed_in_names(frames: list[str], table: Mapping[str, Any], source: str) -> Reading | None:
    """The request_shapes kind whose frame words the innermost frames (innermost first) name."""
    for kind in (table.get("request_shapes") or {}).get("kinds") or []:
        for frame in frames:
            word = next((w for w in kind.get("frame_words") or () if _names_word(frame, w)), None)
            if word is not None:
                return Reading(kind["id"], [Clue(f"the failing line names {word}: {frame.strip()[:120]}", source)])
    return None


def _names_word(code: str, word: str) -> bool:
    """``word`` as a whole identifier or an underscore-separated part of one (``vocab_parallel_logits`` names
    logits; ``logits_max`` too; ``nlogits`` does not)."""
    return re.search(rf"(?<![A-Za-z0-9]){re.escape(word)}(?![A-Za-z0-9])", code) is not None


_BATCH_IN_CLUE = re.compile(r"\((?:micro-)?batch (\d+) x sequence")


def _batch_of(failed: Reading | None) -> int | None:
    """How many sequences the logits the request matched hold (from the clue that matched them)."""
    if failed is None or failed.value != "logits":
        return None
    m = _BATCH_IN_CLUE.search(failed.clues[0].text)
    return int(m.group(1)) if m else None


class _Figure(NamedTuple):
    """Where a token count or vocabulary size comes from, and whether the user rounded it ("20k", "131k"): a rounded
    figure is matched within request_shapes.rounded_tolerance, an exact one within its tolerance."""
    label: str
    rounded: bool = False


def _token_counts(facts: Facts) -> dict[int, _Figure]:
    """Token counts a logits tensor may be built for: the micro-batch times the sequence length, a batch the user
    states times the sequence ("logprob_batch_size 4"), and token counts the user states ("--max-tokens-per-gpu
    9216", or rounded: "about 20k tokens per GPU").  Only these: a loose search would find a match for almost any
    size."""
    cfg = facts.config
    out: dict[int, _Figure] = {}
    seq, mbs = cfg.seq_length, cfg.micro_batch_size
    if seq and mbs:
        out[mbs * seq] = _Figure(f"micro-batch {mbs} x sequence {seq:,}")
    text = facts.question.text or ""
    if seq:
        for m in _BATCH.finditer(text):
            count = int(m.group("n"))
            if 1 <= count <= 256:
                out.setdefault(count * seq, _Figure(f"batch {count} x sequence {seq:,} (as the question says)"))
    for m in _TOKENS.finditer(text):
        count = int((m.group("n") or m.group("m")).replace(",", ""))
        if count >= 128 and count != seq:
            out.setdefault(count, _Figure(f"{count:,} tokens (as the question says)"))
    for m in _TOKENS_K.finditer(text):
        for count in _thousands(m.group("n")):
            out.setdefault(count, _Figure(f"~{m.group(0).strip()} as the question says", rounded=True))
    return out


def _thousands(figure: str) -> tuple[int, ...]:
    """A figure written with 'k' ("20k", "131k"): both readings, x 1000 and x 1024 (people write either)."""
    value = float(figure)
    return tuple(dict.fromkeys((round(value * 1000), round(value * 1024))))


def _stated_vocab(text: str) -> dict[int, _Figure]:
    """Vocabulary sizes the question states ("a 131k-entry vocabulary", "vocab_size 151936", Chinese ci biao 248k)."""
    out: dict[int, _Figure] = {}
    for m in _VOCAB.finditer(text):
        figure = (m.group("a") or m.group("b") or "").replace(",", "")
        if m.group("ka") or m.group("kb"):
            for size in _thousands(figure):
                out.setdefault(size, _Figure(f"~{figure}k as the question says", rounded=True))
        elif figure and int(float(figure)) >= 1000:
            out.setdefault(int(float(figure)), _Figure("as the question says"))
    return out


# A batch size the question states ("logprob_batch_size 4", "micro batch 2", "MBS=8", "mbs wei 4": \u4e3a wei and
# \u662f shi are Chinese "is") and a token count it states ("--max-tokens-per-gpu 9216", "response length 8192",
# "61,565 tokens").
_BATCH = re.compile(r"(?:batch[\w\-]*|mbs|micro[\s_\-]*batch[\w\-]*|bs)\s*(?:size)?\s*(?:[=:\u4e3a\u662f]|to|of)?\s*"
                    r"(?P<n>\d{1,3})(?![\d.])", re.I)
_TOKENS = re.compile(r"(?:tokens?[\w\-]*|length[\w\-]*|len)\s*(?:[=:\u4e3a\u662f]|of)?\s*(?P<n>\d{3,7})(?![\d.])"
                     r"|(?P<m>\d{1,3}(?:,\d{3})+|\d{3,7})\s*tokens?\b", re.I)
_TOKENS_K = re.compile(r"(?<![\w.])(?P<n>\d{1,4}(?:\.\d+)?)\s*k\s*tokens?\b", re.I)
# "131k-entry vocabulary", "a vocabulary of 151,936", "vocab_size=151936", ci biao 248k / ci biao da xiao wei 152k
_NUM = r"\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?"
_VOCAB = re.compile(rf"(?<![\w.])(?P<a>{_NUM})\s*(?P<ka>k)?[\s\-]*(?:entry|entries|token|word)?[\s\-]*vocab(?:ulary)?\b"
                    rf"|(?:\bvocab(?:ulary)?(?:[\s_\-]*size)?|\u8bcd\u8868(?:\u5927\u5c0f)?)\s*"
                    rf"(?:of|is|=|:|\uff1a|\u4e3a|\u662f)?\s*(?:about|around|~|\u7ea6|\u5927\u7ea6)?\s*"
                    rf"(?P<b>{_NUM})\s*(?P<kb>k)?(?![\w.])", re.I)


def _logits_match(request: float, facts: Facts, tol: float, rounded_tol: float | None = None) -> Clue | None:
    """request = tokens x vocabulary (per tensor-parallel rank) x 4 or 2 bytes for a token count the run implies:
    a logits tensor (fp32 upcast, or bf16).  The vocabulary is the config's, else one the question states; a figure
    the user rounded ("about 20k tokens") is matched within ``rounded_tol``."""
    cfg = facts.config
    # a stand-in's vocabulary proves nothing (its fields are in from_preset; a bare approximate_shape is all stand-in)
    stand_in = cfg.approximate_shape and (not cfg.from_preset or "vocab_size" in cfg.from_preset)
    known = None if stand_in else cfg.padded_vocab_size or cfg.vocab_size
    vocabs = {known: _Figure("")} if known else _stated_vocab(facts.question.text or "")
    if not vocabs and facts.question.model_vocab:  # the family's released vocabulary ("Baichuan2-13B": 125,696)
        vocabs = {facts.question.model_vocab: _Figure("the named model family's vocabulary")}
    counts = _token_counts(facts)
    if not vocabs or not counts:
        return None
    tp = cfg.tensor_model_parallel_size or 1
    for vocab, said in vocabs.items():
        shard = -(-vocab // tp)  # Megatron's output layer is vocabulary-parallel: each TP rank holds 1/TP of it
        for nbytes, dtype in ((4, "fp32"), (2, "bf16")):
            tokens = request / (shard * nbytes)
            for near in sorted(counts, key=lambda t: abs(t - tokens)):
                limit = rounded_tol if rounded_tol and (said.rounded or counts[near].rounded) else tol
                if abs(near - tokens) / tokens > limit:
                    continue
                per = f"{shard:,} vocabulary entries" + (f" (1/{tp} of {vocab:,})" if shard != vocab else "")
                per += f" ({said.label})" if said.label else ""
                return Clue(f"{_gib(request)} = {near:,} tokens ({counts[near].label}) x {per} x {nbytes} B: "
                            f"{dtype} logits",
                            "number")
    return None


def _parameters_match(request: float, facts: Facts, tol: float, kb: Knowledge) -> Clue | None:
    """request = a whole model's (or one GPU's share of) parameters x bytes: a weight / gradient / master copy."""
    counts = _param_counts(facts, kb)
    for label, params in counts:
        for nbytes, what in ((4, "an fp32 copy (main gradients or master weights)"), (2, "a bf16 copy of the weights"),
                             (8, "the two fp32 Adam moments")):
            if params and abs(request - params * nbytes) / request <= tol:
                return Clue(f"{_gib(request)} = {params / 1e9:.2f}B parameters ({label}) x {nbytes} B: {what}",
                            "number")
    return None


def _param_counts(facts: Facts, kb: Knowledge) -> list[tuple[str, float]]:
    est = facts.estimate.get("table") or {}
    params = est.get("parameters") or {}
    out = []
    if params.get("per_gpu_peak_stage"):
        out.append(("on this GPU", float(params["per_gpu_peak_stage"])))
    if params.get("total") and params.get("total") != params.get("per_gpu_peak_stage"):
        out.append(("the whole model", float(params["total"])))
    if not out:
        total = _total_params(facts, kb)
        if total:
            out.append(("the whole model", total))
    return out


def _total_params(facts: Facts, kb: Knowledge) -> float | None:
    cfg = facts.config
    if not (cfg.num_layers and cfg.hidden_size and cfg.num_attention_heads):
        return None
    from .errors import UserError
    from .estimator.constants import constants
    from .estimator.params import arch_from_config, total_params

    try:
        return float(total_params(arch_from_config(cfg, 1, constants(kb)["megatron-defaults"])))
    except (ValueError, ZeroDivisionError, TypeError, KeyError, UserError):  # a shape given in part (no vocabulary)
        return None


def _attention_match(request: float, facts: Facts, tol: float, dense: bool = False) -> Clue | None:
    """request = micro-batch x heads (per TP rank, or 1 for a mask) x seq x seq x bytes: scores or a mask built
    as a dense sequence x sequence tensor.  Only where attention may run unfused (or the request is already
    impossible): with flash / fused attention no such tensor exists, and powers of two coincide easily."""
    cfg = facts.config
    seq = cfg.seq_length
    if not seq or not (dense or cfg.attention_backend in ("unfused", "local")):
        return None
    mbs = cfg.micro_batch_size or 1
    tp = cfg.tensor_model_parallel_size or 1
    heads = cfg.num_attention_heads
    options = [(1, "a mask")]
    if heads:
        options += [(-(-heads // tp), f"{-(-heads // tp)} heads"), (heads, f"{heads} heads")]
    for count, what in options:
        for nbytes in (4, 2, 1):
            size = mbs * count * seq * seq * nbytes
            if abs(request - size) / request <= tol:
                return Clue(f"{_gib(request)} = micro-batch {mbs} x {what} x {seq:,} x {seq:,} x {nbytes} B: a dense "
                            "sequence x sequence tensor", "number")
    return None


def _gib(value: float) -> str:
    return f"{value / GIB:,.2f} GiB" if value < 1024 * GIB else f"{value / GIB / 1024:,.2f} TiB"


# --------------------------------------------------------------------------- when: frames and log phases


# A log knows it failed while the model was set up; the user's words can say which part of set-up it was.
# A log phase the user's words make more specific: set-up that was a conversion; a forward or loss step that was a
# log-prob pass (a reference worker's forward_step reaches the same schedule and loss code as training)
_REFINES = {"model-build": ("conversion", "checkpoint-load"), "forward": ("rl-logprob",), "loss": ("rl-logprob",)}


def _refined(from_log: Reading | None, said: Reading | None) -> Reading | None:
    """The log's phase, or the user's more specific one inside it (set-up that was a conversion)."""
    if from_log is not None and said is not None and said.value in _REFINES.get(from_log.value, ()):
        return Reading(said.value, [*from_log.clues, *said.clues])
    return from_log


def _phase_from_logprob_logits(facts: Facts) -> Reading | None:
    """Where nothing else places the failure: a log-prob micro-batch, as the user's RL keys size it, whose logits
    alone are larger than the GPU cannot run, whatever else the step holds - that pass is where it fails."""
    ratio = facts.derived.get("logprob_logits_ratio")
    if ratio is None or ratio < 1:
        return None
    gb = facts.derived["logprob_logits_bytes"] / 1e9
    return Reading("rl-logprob", [Clue(f"one log-prob micro-batch's logits alone are {gb:.0f} GB, more than the GPU",
                                       "number")])


def _phase_from_log(facts: Facts, words: _Words, log_text: str | None) -> Reading | None:
    """The program the traceback starts in (a converter is a conversion throughout), else the failing traceback's
    frames (most specific phase first), else the parser's phase, else frame names in a pasted log."""
    entry = [_script_name(facts.log.entry_script)] if facts.log.entry_script else []
    by_script = words.script_phase(entry + _entry_scripts(log_text or ""))
    if by_script:
        return Reading(by_script[0], [Clue(f"the traceback starts in {by_script[1]}", "log")])
    # ...else the last program a pasted launch line starts ("python -m metaseq.scripts.consolidate_fsdp_shards ...")
    launched = _launched_programs(log_text)
    by_launch = words.script_phase(launched[-1:]) if launched else None
    if by_launch:
        return Reading(by_launch[0], [Clue(f"the pasted command runs {by_launch[1]}", "log")])
    error = facts.log.first_error if facts.log.crash and not facts.log.has_memory_failure else None
    refused = words.refused_phase(error.strip()) if error else None
    if refused:
        said = error.strip()[:ERROR_CHARS]
        return Reading(refused, [Clue(f"the error states a rule the settings break: \u201c{said}\u201d", "log")])
    frames = facts.log.frames
    if frames:
        # the functions on the stack, and the code of the innermost line (the call that failed, in a cut excerpt);
        # names in other code lines are arguments and variables ("output_tensor, loss_func = ...")
        names = [f.split(" ", 1)[0] for f in frames]
        hit = words.frame_phase("\n".join([*names, frames[-1]]))
        if hit:
            return Reading(hit[0], [Clue(f"traceback: {hit[1]}", "log")])
    by_log = words.log_phase.get(facts.log.phase or "")
    if by_log:
        return Reading(by_log, [Clue(f"traceback phase: {facts.log.phase}", "log")])
    if log_text and not frames:  # a pasted trace the parser could not read as one ("-> compute_log_probs")
        # its frame names, and the code line printed right above the error (the call that failed, as in a frame)
        above = _code_line_above(log_text, facts.log.first_error)
        hit = words.frame_phase("\n".join([*_frame_names(log_text), above]), context=log_text)
        if hit:
            return Reading(hit[0], [Clue(f"traceback: {hit[1]}", "log")])
    return None


# An image pixel cap as it is set: a processor or trainer key (max_pixels, LLaMA-Factory's image_max_pixels) or
# ms-swift's MAX_PIXELS environment variable; a video's per-frame cap (video_max_pixels) is not one image's
_IMAGE_PIXEL_CAP = re.compile(r"(?<![\w-])-{0,2}(?:image_)?max_pixels['\"]?\s*[=:]?\s*['\"]?"
                              r"(\d{1,10}(?:\s*\*\s*\d{1,6}){0,3})\b", re.I)


def _image_pixel_cap(texts: list[str]) -> int | None:
    """The largest image pixel cap any of the texts sets ("image_max_pixels: 67108864", "MAX_PIXELS=602112", the
    processor's "max_pixels=1280*28*28")."""
    caps = [math.prod(int(f) for f in m.group(1).split("*")) for t in texts for m in _IMAGE_PIXEL_CAP.finditer(t)]
    caps = [c for c in caps if c >= 1024]  # a pixel count, not a stray small number
    return max(caps) if caps else None


def _code_line_above(text: str, error: str | None) -> str:
    """The last non-empty line above the line of the first error the log parser read: in a Python traceback, the
    code of the innermost frame ("denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)" is Adam's step)."""
    head = (error or "").strip()[:60]
    if not head:
        return ""
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if head in line), None)
    if at is None:
        return ""
    above = next((x.strip() for x in reversed(lines[:at]) if x.strip()), "")
    return "" if above.startswith(("File ", "Traceback", "...")) else above


# Where a pasted trace names a function: 'File "...", line N, in NAME', '-> NAME (file.py:12)', '  at NAME('.
_FRAME_NAME = re.compile(r"(?:, in |(?:->|\u2192|=>)\s*|^\s*at\s+)([A-Za-z_][\w.]*)", re.M)


# The program a Python traceback starts in: its '<module>' frame.
_ENTRY_FRAME = re.compile(r'File "([^"\n]{1,400})", line \d+, in <module>')


def _script_name(path: str) -> str:
    """``/work/tools/hf2mcore_qwen.py`` -> ``hf2mcore_qwen``."""
    return path.replace("\\", "/").rsplit("/", 1)[-1].rsplit(".", 1)[0].lower()


def _entry_scripts(text: str) -> list[str]:
    """File names (without folder or suffix, lower case) of the programs the pasted tracebacks start in."""
    return [_script_name(m.group(1)) for m in _ENTRY_FRAME.finditer(text)]


def _frame_names(text: str) -> list[str]:
    """Function names in frame positions of a pasted trace; names inside code lines are not frames."""
    return [m.group(1).rsplit(".", 1)[-1] for m in _FRAME_NAME.finditer(text)]


# A Python traceback frame: 'File "/x/y/copy.py", line 146, in deepcopy'.
_PY_FRAME = re.compile(r'File "([^"\n]{1,400})", line \d+, in ([A-Za-z_][\w.]*)')
CALL_PATH_DEPTH = 4


def _call_path(facts: Facts, log_text: str | None) -> list[str]:
    """The innermost frames of the failing traceback, innermost first, as ``function (file.py)``: where the memory
    was asked for, which an answer names ("deepcopy in Optimizer.load_state_dict").  The parser's frames of the
    primary failure when it read one, else the last traceback in a pasted excerpt."""
    if facts.log.frames:
        names = [f.split(" ", 1)[0] for f in facts.log.frames]
        path = [n for n in reversed(names) if n != "<module>"]
    else:
        frames = [(m.group(2), _script_name(m.group(1))) for m in _PY_FRAME.finditer(log_text or "")]
        path = [f"{name} ({script}.py)" for name, script in reversed(frames) if name != "<module>"]
    out: list[str] = []
    for name in path:
        if not out or out[-1] != name:
            out.append(name)
    return out[:CALL_PATH_DEPTH]


# A function the user says it failed in: code-shaped (snake_case, CamelCase, dotted) after "in", "inside",
# "called from", "via", "->", zai "in" ("dies inside _warmup_jit_function (called from set_jit_fusion_options)").
# (\u2192 is the arrow, \u5728 zai "in")
_SAID_FRAME = re.compile(r"(?:\b(?:in|inside|within|from|via|through)\s+|->\s*|\u2192\s*|\u5728\s*)`?"
                         r"((?:[A-Za-z_]\w*\.)*(?:_?[a-z][a-z0-9]*(?:_[a-z0-9]+)+|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*){2,}))"
                         r"(?:\(\))?`?")
ERROR_CHARS = 160


# a method call written as code ("logits.float()", "self.lm_head(hidden_states)"): in a sentence that says what
# failed, the line the user points at (modelscope/ms-swift#6966: "logits.float() xin shenqing de xiancun ... oom")
_SAID_CALL = re.compile(r"(?<![\w.])((?:[A-Za-z_]\w*\.)+[A-Za-z_]\w*)\([^()]{0,40}\)")


def _said_call_path(text: str, words: _Words) -> list[str]:
    """Functions the user names as where it failed, in the order named (the innermost is usually first): after
    "in" / "from" / an arrow, or a method call in a sentence that reports the failure and no try."""
    out: list[str] = []
    for m in _SAID_FRAME.finditer(text or ""):
        if m.group(1) not in out:
            out.append(m.group(1))
    for sentence in _sentences(text or ""):
        if not words.failure.search(sentence) or words.tried.search(sentence):
            continue
        for m in _SAID_CALL.finditer(sentence):
            if m.group(1) not in out:
                out.append(m.group(1))
    return out[:CALL_PATH_DEPTH]


def _phase_from_question_frames(text: str, words: _Words) -> Reading | None:
    # a flag in a pasted command ("--load_checkpoint") names a setting, not the function that was running
    hit = words.frame_phase(_FLAG.sub(" ", text))
    return Reading(hit[0], [Clue(f"\u201c{hit[1]}\u201d", "words")]) if hit else None


def _step_from_number(text: str, words: _Words) -> Reading | None:
    """The step counted in a sentence that says it failed ("OOM at step 180", "dies after 116 steps", the Chinese
    "trains to about 30 steps, then OOMs"): a number after an interval word ("save every 100 steps") is not one."""
    if words.step_number is None:
        return None
    # a count from 0 ("iter 0 training is fine, it OOMs on iter1", OpenRLHF's and verl's logs): step 1 is the second
    base = int(any((m.group(1) or m.group(2)) == "0" for m in words.step_number.finditer(_unset_settings(text))))
    for sentence in _sentences(text):
        if not words.failure.search(sentence):
            continue
        plain = _unset_settings(sentence)
        for m in words.step_number.finditer(plain):
            before = plain[max(0, m.start() - _STEP_CONTEXT):m.start()].lower()
            after = plain[m.end():m.end() + _STEP_CONTEXT].lower()
            if any(w in before for w in words.step_interval):
                continue
            count = int(m.group(1) or m.group(2)) + base + any(w in before or w in after for w in words.step_after)
            value = "first-step" if count <= 1 else "second-step" if count == 2 else "later-step"
            return Reading(value, [Clue(f"\u201c{m.group().strip()}\u201d", "words")])
    return None


_STEP_CONTEXT = 8  # characters either side of a step count read for "every" / "after"


_BEFORE_THE_FIRST_STEP = ("checkpoint-load", "model-build")  # phases that end before step 1 and do not come back


def _node_ram(figures: Mapping[str, str]) -> float | None:
    """The node's whole RAM as a host kill printed it (Ray's "was 7.58GB / 7.61GB"): the machine's, said by the log."""
    try:
        return parse_size(figures["node_total"]) if figures.get("node_total") else None
    except ValueError:
        return None


def _step_from_log(facts: Facts) -> Reading | None:
    reports = facts.log.memory_reports
    its = [r.iteration for r in reports if r.iteration is not None]
    if its and facts.log.has_memory_failure:
        last = max(its)
        return Reading("later-step" if last > 1 else "first-step",
                       [Clue(f"memory reports reach iteration {last} before the failure", "log")])
    return None


# --------------------------------------------------------------------------- where and how it moves


def _where_from_log(facts: Facts) -> Reading | None:
    """Per-rank memory lines: the peak on the lowest (first-stage) or highest (last-stage) rank well above its peers."""
    stats = facts.stats or {}
    ratio = stats.get("peak_rank_allocated_ratio") or stats.get("peak_rank_ratio")
    ranks = stats.get("ranks_reported") or []
    if ratio and ratio >= 1.1 and len(ranks) > 1:
        peak = stats.get("peak_rank")
        if peak == ranks[0]:
            return Reading("first-stage", [Clue(f"per-rank memory lines: rank {peak} peaks at {ratio:.2f}x the "
                                                "median of the other ranks", "log")])
        if peak == ranks[-1]:
            return Reading("last-stage", [Clue(f"per-rank memory lines: rank {peak} peaks at {ratio:.2f}x the "
                                               "median of the other ranks", "log")])
    failed = facts.log.ranks_failed
    others = [r for r in ranks if r not in failed]
    if len(failed) == 1 and len(others) >= 2:  # a pasted excerpt of one rank says nothing of the others
        return Reading("some-ranks", [Clue(f"only rank {failed[0]} reports the OOM; ranks {others[:4]} report "
                                           "memory lines without one", "log")])
    return None


def _trend_from_log(facts: Facts, table: Mapping[str, Any]) -> Reading | None:
    """Allocated memory per iteration (Megatron memory lines): grows when it keeps rising after the first steps."""
    policy = table.get("trend") or {}
    series = [(i, a) for i, a in facts.log.report_series if a is not None]
    if len(series) < int(policy.get("min_points", 3)):
        return None
    if any(b[0] <= a[0] for a, b in zip(series, series[1:], strict=False)):
        return None  # an iteration reported twice: lines of several ranks side by side, not one rank over time
    steady = series[1:]  # the first report precedes the first optimizer step (Adam state not yet allocated)
    rises = sum(b[1] > a[1] for a, b in zip(steady, steady[1:], strict=False))
    growth = steady[-1][1] - steady[0][1]
    if rises >= float(policy.get("monotone_share", 0.8)) * (len(steady) - 1) and \
            growth >= float(policy.get("growth_share", 0.03)) * steady[0][1]:
        return Reading("grows", [Clue(f"allocated grows from {_gib(steady[0][1])} at iteration {steady[0][0]} to "
                                      f"{_gib(steady[-1][1])} at iteration {steady[-1][0]}", "log")])
    if abs(growth) < float(policy.get("growth_share", 0.03)) * steady[0][1]:
        return Reading("constant", [Clue(f"allocated stays at {_gib(steady[-1][1])} from iteration {steady[0][0]} "
                                         f"to {steady[-1][0]}", "log")])
    return None


# --------------------------------------------------------------------------- the user's words


@dataclass(frozen=True, eq=False)
class _Words:
    """The compiled vocabulary: one regex per value per list, frame names per phase."""

    lists: dict[str, list[tuple[str, _Literals]]]
    frames: list[tuple[str, frozenset[str], tuple[str, ...]]]  # (phase, frame names, unless) in priority order
    scripts: list[tuple[str, tuple[str, ...]]]  # (phase, name parts of its programs) in priority order
    phase_order: tuple[str, ...]  # situation.yaml phase_priority: the most telling phase first
    log_phase: dict[str, str]  # parser phase -> situation phase
    failure: _Literals
    gpu_memory: _Literals
    gpu_memory_fine: _Literals
    time_limit: _Literals  # "killed at the Slurm time limit": a kill that says nothing of memory
    oom_denied: _Literals  # "no OOM error was printed" (and its Chinese): the OOM named only to say there was none
    diagnostic_env: re.Pattern[str]  # NCCL_DEBUG=INFO, CUDA_LAUNCH_BLOCKING=1: added to see more, they change nothing
    engine_names: frozenset[str]  # words naming an engine, not where it runs (situation.yaml engine_names)
    changed: _Literals
    tried: _Literals
    no_effect: _Literals
    removed: _Literals
    compared: _Literals  # "with or without X", kai bu kai X: a setting tried both ways, neither removed nor absent
    worked: _Literals
    upgraded: _Literals
    worked_before: _Literals
    config_unchanged: _Literals
    regressed: _Literals
    expected_release: _Literals
    owner_gone: _Literals  # situation.yaml changes.owner_gone: memory held after the process that held it is gone
    same_process: _Literals  # situation.yaml changes.same_process: the program goes on in the process that held it
    freed_by_collect: _Literals  # situation.yaml changes.freed_by_collect: gc.collect() gives the memory back
    fits_on: _Literals
    one_gpu: _Literals  # "on a single GPU" (and its Chinese): a count of one said in words
    several_gpus: _Literals  # "multi-GPU" (and its Chinese): more than one, said in words
    kept: _Literals
    unchanged: _Literals
    forward_only: _Literals
    more_than_expected: _Literals
    device_zero_crowded: _Literals
    some_samples: _Literals  # situation.yaml changes.some_samples: only some of the data fails
    refused: tuple[tuple[str, _Literals], ...]  # situation.yaml changes.refused: (fix, the words that refuse it)
    not_applied: _Literals  # situation.yaml changes.not_applied: the setting never reached the run
    worse: _Literals
    versions: _Literals
    settings: _Literals
    later_before: tuple[str, ...]  # situation.yaml not_this_phase, in the normal form ("before" -> " before")
    later_after: tuple[str, ...]
    over: tuple[str, ...]  # of later_before, the words that say the named time is over ("after")
    still_ahead: dict[str, str]  # a step said to be still ahead -> the step it failed in (first -> before training)
    within: tuple[str, ...]  # "completes", "finishes": "before iteration 1 completes" is within iteration 1
    negations: tuple[str, ...]
    asking_start: tuple[str, ...]  # situation.yaml asking: a clause that asks whether it failed says nothing
    asking_end: tuple[str, ...]
    asking_lead: tuple[str, ...]  # "and ", "so ": connectives before a clause's question words
    rl: _Literals  # situation.yaml rl_words: an RL run (its default rollout engine applies)
    offline: _Literals  # situation.yaml offline_words: post-training that generates nothing (DPO, a reward model)
    per_step: _Literals  # situation.yaml per_step_words: growth beside a step count is growth across steps
    absent_any: _Literals  # situation.yaml changes.absent_before + absent_after: a clause without them says nothing off
    absent_before: tuple[str, ...]  # "no", "without", meiyou kai: just before a setting, it is not on
    absent_after: tuple[str, ...]  # "isn't set", "is off": just after a setting
    absent_generic: tuple[tuple[str, re.Pattern[str]], ...]  # (fix, its words) for settings no recognizer maps alone
    tried_generic: tuple[tuple[str, re.Pattern[str]], ...]  # (fix, its words) for a setting tried, named loosely
    configured: _Literals  # "already sets", "configured", shezhi le: the verb says a setting is named
    alternative: _Literals  # situation.yaml asking.alternative: a choice question ("shi A haishi B?") asks throughout
    # (phase, exception types, words): an exception of those types whose message states a rule the settings broke
    # is that phase (a start-up check refusing the configuration), wherever in the program it was raised
    refusals: tuple[tuple[str, frozenset[str], _Literals], ...] = ()
    # situation.yaml symptom_words: memory said to be higher than before or than expected, with no failure ("resume
    # uses more memory"): a phase named beside them is where the memory is, as beside a failure word
    symptom: _Literals | None = None
    # situation.yaml not_phase_words: common words that hold a phase word and name no phase ("subsequent training"
    # in Chinese holds the two characters of "resume training")
    lookalike: _Literals | None = None
    # situation.yaml asking.within: question forms anywhere in a clause (Chinese A-not-A: hui bu hui, you mei you),
    # unless one of asking.regardless ends the text before it ("wulun shi bu shi ...": a statement)
    asking_within: _Literals | None = None
    asking_regardless: tuple[str, ...] = ()
    # situation.yaml stage_words: training stages (PT, SFT, DPO, PPO): growth said across two of them is no trend
    stages: _Literals | None = None
    # situation.yaml megatron_words: Megatron named, so a framework's non-Megatron default trainer is not the one used
    megatron: _Literals | None = None
    deepspeed: _Literals | None = None  # situation.yaml deepspeed_words: DeepSpeed ZeRO named
    fsdp: _Literals | None = None  # situation.yaml fsdp_words: PyTorch FSDP named
    refusal: _Literals | None = None  # situation.yaml refusal_words: a measure the user will not take
    hf_trainer: _Literals | None = None  # situation.yaml hf_trainer_words: the Hugging Face Trainer named
    # situation.yaml changes.not_applied_if_asked: words that doubt a setting reached the run only inside a question
    # ("shi bu shi X mei qi zuoyong?"); said, the same words mean it did not help
    not_applied_if_asked: _Literals | None = None
    # situation.yaml asking.presupposes: "is it normal that it OOMs?" asks about what it says happened
    presupposes: _Literals | None = None
    more_on_version: _Literals | None = None  # situation.yaml changes.more_on_version: more memory on one version
    broken_on: _Literals | None = None  # situation.yaml changes.broken_on: a version said not to work, beside failures
    libraries: _Literals | None = None  # situation.yaml changes.libraries: software only beside a version number
    # situation.yaml changes.not_version_names: words written right before a version that name no software
    not_version_names: frozenset[str] = frozenset()
    change_to: _Literals | None = None  # situation.yaml changes.change_to: between a setting's old and new value
    not_versions: _Literals | None = None  # situation.yaml changes.not_versions: version words naming no software
    own_trainer: _Literals | None = None  # situation.yaml own_trainer_words: a training loop of the user's own
    one_process: _Literals | None = None  # situation.yaml one_process_words: one process started
    critic: _Literals | None = None  # situation.yaml critic_words: the RL run trains a critic
    no_save: _Literals | None = None  # situation.yaml no_save_words: no checkpoint saved before it failed
    fixed_shapes_fit: _Literals | None = None  # situation.yaml fixed_shapes_fit_words: padded to one length it fits
    steady_inputs: _Literals | None = None  # situation.yaml steady_inputs_words: the same inputs every step
    engine_off: _Literals | None = None  # situation.yaml changes.engine_off: "without vLLM it trains"
    # situation.yaml step_number: a step counted where it failed ("OOM at step 180"), its interval and after words
    step_number: re.Pattern[str] | None = None
    step_interval: tuple[str, ...] = ()
    step_after: tuple[str, ...] = ()

    @staticmethod
    def of(kb: Knowledge) -> _Words:
        return kb.memo("situation-words", _compile)

    def script_phase(self, scripts: list[str]) -> tuple[str, str] | None:
        """The phase a program is from start to end, by its file name (``hf2mcore_qwen2.py``: a conversion)."""
        for phase, parts in self.scripts:
            for script in scripts:
                if any(part in script for part in parts):
                    return phase, f"{script}.py"
        return None

    def refused_phase(self, error: str) -> str | None:
        """The phase of a crash whose error line is a refusal: 'AssertionError: Gated delta net does not support
        context parallel for now' is a configuration check, not a failure of the pass it was raised in."""
        kind, sep, message = error.partition(":")
        kind = kind.strip().rsplit(" ", 1)[-1].rsplit(".", 1)[-1]  # '[rank0]: ValueError' / 'builtins.ValueError'
        if not sep or not message.strip():
            return None
        return next((phase for phase, types, said in self.refusals if kind in types and said.search(message)), None)

    def frame_phase(self, text: str, context: str | None = None) -> tuple[str, str] | None:
        """The most telling phase whose frame names ``text`` holds, unless ``context`` (default: the same text)
        holds one of that phase's ruling-out markers."""
        around = text if context is None else context
        names = set(_IDENTIFIER.findall(text))
        for phase, frames, unless in self.frames:
            hit = frames & names
            if hit and not any(marker in around for marker in unless):
                return phase, min(hit)
        return None


_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def _compile(kb: Knowledge) -> _Words:
    table = kb.tables.get("situation") or {}
    lists = {key: [(e["id"], _Literals(_both(e.get("words")))) for e in table.get(key) or [] if _both(e.get("words"))]
             for key in ("phases", "steps", "components", "trends", "processes", "places", "frameworks")}
    phases = {e["id"]: e for e in table.get("phases") or []}
    order = table.get("phase_priority") or list(phases)
    frames = [(pid, frozenset(phases[pid]["frames"]), tuple(phases[pid].get("unless") or ()))
              for pid in order if phases.get(pid, {}).get("frames")]
    scripts = [(pid, tuple(phases[pid]["scripts"])) for pid in order if phases.get(pid, {}).get("scripts")]
    log_phase = {lp: e["id"] for e in phases.values() for lp in e.get("log_phases") or []}
    changes = table.get("changes") or {}
    later = table.get("not_this_phase") or {}
    return _Words(lists, frames, scripts, tuple(order), log_phase, _Literals(_both(table.get("failure_words"))),
                  _Literals(_both(table.get("gpu_memory_words"))), _Literals(_both(table.get("gpu_memory_fine_words"))),
                  _Literals(_both(table.get("time_limit_words"))),
                  _Literals(_both(table.get("oom_denied_words"))),
                  _env_names_rx(table.get("diagnostic_env") or []),
                  frozenset(_normal(w).strip() for w in _both(table.get("engine_names"))),
                  _Literals(_both(changes.get("changed"))),
                  _Literals(_both(changes.get("tried"))),
                  _Literals(_both(changes.get("no_effect"))), _Literals(_both(changes.get("removed"))),
                  _Literals(_both(changes.get("compared"))),
                  _Literals(_both(changes.get("worked"))),
                  _Literals(_both(changes.get("upgraded"))),
                  _Literals(_both(changes.get("worked_before"))),
                  _Literals(_both(changes.get("config_unchanged"))),
                  _Literals(_both(changes.get("regressed"))),
                  _Literals(_both(changes.get("expected_release"))),
                  _Literals(_both(changes.get("owner_gone"))),
                  _Literals(_both(changes.get("same_process"))),
                  _Literals(_both(changes.get("freed_by_collect"))),
                  _Literals(_both(changes.get("fits_on"))),
                  _Literals(_both(changes.get("one_gpu"))), _Literals(_both(changes.get("several_gpus"))),
                  _Literals(_both(changes.get("kept"))),
                  _Literals(_both(changes.get("unchanged"))),
                  _Literals(_both(changes.get("forward_only"))), _Literals(_both(changes.get("more_than_expected"))),
                  _Literals(_both(changes.get("device_zero_crowded"))),
                  _Literals(_both(changes.get("some_samples"))),
                  tuple((g["id"], _Literals(_both(g.get("words")))) for g in changes.get("refused") or []),
                  _Literals(_both(changes.get("not_applied"))),
                  _Literals(_both(changes.get("worse"))),
                  _Literals(_both(changes.get("versions"))), _Literals(_both(changes.get("settings"))),
                  _endings(later.get("before"), latin_space=True), _endings(later.get("after")),
                  _endings(later.get("over"), latin_space=True), dict(later.get("still_ahead") or {}),
                  _endings(later.get("within")),
                  _endings(table.get("negations"), latin_space=True),
                  # a Latin word ends at a space ("is it " is not "is items"); Chinese words run on into the next
                  tuple(f"{w.strip()} " if w.strip()[-1:].isascii() else w.strip()
                        for w in _endings((table.get("asking") or {}).get("start"))),
                  _endings((table.get("asking") or {}).get("end")),
                  tuple(f"{w.strip()} " if w.strip()[-1:].isascii() else w.strip()
                        for w in _endings((table.get("asking") or {}).get("lead"))),
                  _Literals(_both(table.get("rl_words"))),
                  _Literals(_both(table.get("offline_words"))),
                  _Literals(_both(table.get("per_step_words"))),
                  _Literals(_both(changes.get("absent_before")) + _both(changes.get("absent_after"))),
                  _endings(_both(changes.get("absent_before")), latin_space=True),
                  _endings(_both(changes.get("absent_after"))),
                  tuple((g["id"], _word_rx(_both(g.get("words")))) for g in changes.get("absent_generic") or []),
                  tuple((g["id"], _word_rx(_both(g.get("words")))) for g in changes.get("tried_generic") or []),
                  _Literals(_both(changes.get("configured"))),
                  _Literals(list((table.get("asking") or {}).get("alternative") or [])),
                  tuple((pid, frozenset(phases[pid]["refusal"]["types"]), _Literals(phases[pid]["refusal"]["words"]))
                        for pid in order if (phases.get(pid) or {}).get("refusal")),
                  symptom=_Literals(_both(table.get("symptom_words"))),
                  lookalike=_Literals(_both(table.get("not_phase_words"))),
                  asking_within=_Literals(list((table.get("asking") or {}).get("within") or [])),
                  asking_regardless=_endings((table.get("asking") or {}).get("regardless")),
                  stages=_Literals(_both(table.get("stage_words"))),
                  megatron=_Literals(_both(table.get("megatron_words"))),
                  deepspeed=_Literals(_both(table.get("deepspeed_words"))),
                  fsdp=_Literals(_both(table.get("fsdp_words"))),
                  refusal=_Literals(_both(table.get("refusal_words"))),
                  hf_trainer=_Literals(_both(table.get("hf_trainer_words"))),
                  not_applied_if_asked=_Literals(_both(changes.get("not_applied_if_asked"))),
                  own_trainer=_Literals(_both(table.get("own_trainer_words"))),
                  presupposes=_Literals(list((table.get("asking") or {}).get("presupposes") or [])),
                  more_on_version=_Literals(_both(changes.get("more_on_version"))),
                  broken_on=_Literals(_both(changes.get("broken_on"))),
                  libraries=_Literals(_both(changes.get("libraries"))),
                  not_version_names=frozenset(w.lower() for w in _both(changes.get("not_version_names"))),
                  change_to=_Literals(_both(changes.get("change_to"))),
                  not_versions=_Literals(_both(changes.get("not_versions"))),
                  one_process=_Literals(_both(table.get("one_process_words"))),
                  critic=_Literals(_both(table.get("critic_words"))),
                  no_save=_Literals(_both(table.get("no_save_words"))),
                  fixed_shapes_fit=_Literals(_both(table.get("fixed_shapes_fit_words"))),
                  steady_inputs=_Literals(_both(table.get("steady_inputs_words"))),
                  engine_off=_Literals(_both(changes.get("engine_off"))),
                  step_number=_step_number_rx(_both((table.get("step_number") or {}).get("units"))),
                  step_interval=tuple(_both((table.get("step_number") or {}).get("interval"))),
                  step_after=tuple(_both((table.get("step_number") or {}).get("after"))))


def _env_names_rx(names: list[str]) -> re.Pattern[str]:
    """These environment variables, with the value written after them ("NCCL_DEBUG=INFO")."""
    alternation = "|".join(map(re.escape, names)) or "$^"
    return re.compile(rf"\b(?:{alternation})\b(?:\s*=\s*\S+)?")


_ORDINAL = "\u7b2c"  # the Chinese ordinal prefix: di 30 bu, the 30th step


def _step_number_rx(units: list[str]) -> re.Pattern[str] | None:
    """"step 180", "iteration 500", "30 steps", "30step", the Chinese "di 30 bu": the number in one of its groups."""
    if not units:
        return None
    unit = "|".join(re.escape(u) for u in sorted(units, key=len, reverse=True))
    return re.compile(rf"(?<![A-Za-z_])(?:{unit})\s*#?\s*(\d+)(?![\d.])|{_ORDINAL}?\s*(?<![\d.])(\d+)\s*(?:{unit})"
                      rf"(?![A-Za-z_])", re.IGNORECASE)


def _word_rx(words: list[str]) -> re.Pattern[str]:
    """Any of ``words`` as a whole word, any run of spaces, '_' or '-' between its parts."""
    parts = sorted((r"[\s_\-]+".join(map(re.escape, _SEPARATORS.split(w.strip()))) for w in words if w.strip()),
                   key=len, reverse=True)
    return re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(parts) + r")(?![A-Za-z0-9])", re.I)


def _endings(words: Iterable[str] | None, latin_space: bool = False) -> tuple[str, ...]:
    """Words compared with the end (or start) of a normal-form text; a Latin word keeps its leading space so that
    "no" does not end "piano"."""
    out = [_normal(w).strip() for w in words or []]
    return tuple(" " + w if latin_space and w[:1].isascii() else w for w in out if w)


def framework_named(text: str, kb: Knowledge) -> str | None:
    """The framework the user's words name (situation.yaml frameworks), None when none or several."""
    reading = _one("frameworks", _clauses(text), _Words.of(kb), failing_only=False) if text else None
    return reading.value if reading else None


# A launcher and the program it starts ("torchrun ... train.py", "python -m scripts.train", "deepspeed x.py"); a
# traceback's first frame names the program too ('File "pretraining.py", line 780, in <module>')
_LAUNCHED = re.compile(r"(?:^|[\s;&|/])(?:torchrun|python3?|deepspeed|accelerate\s+launch|colossalai\s+run|"
                       r"torch\.distributed\.(?:run|launch))\b[^\n]*?\s(?:-m\s+([\w.]+)|([\w./-]*[\w-]\.py))\b")
_ENTRY_FRAME = re.compile(r'File "([^"]+\.py)", line \d+, in <module>')
# Programs of Megatron-based stacks: Megatron-LM's and Pai-Megatron-Patch's pretrain_*.py, Bridge's and NeMo's recipes
_MEGATRON_PROGRAM = re.compile(r"megatron|nemo|bridge|pretrain_|recipes?/", re.IGNORECASE)


def _launched_programs(log_text: str | None) -> list[str]:
    """The programs the launch lines pasted with the log start, in order (a module's last part:
    "consolidate_fsdp_shards" for "python -m metaseq.scripts.consolidate_fsdp_shards")."""
    text = (log_text or "").replace("\\\n", " ")
    return [_script_name(next(g for g in m.groups() if g).rsplit(".", 1)[-1] if m.group(1) else m.group(2))
            for m in _LAUNCHED.finditer(text)]


def _done_programs(log_text: str | None, words: _Words) -> set[str]:
    """Phases of the programs a pasted run of commands launched before its last, when the last is none of them."""
    programs = _launched_programs(log_text)
    if len(programs) < 2 or words.script_phase(programs[-1:]):
        return set()
    return {hit[0] for hit in (words.script_phase([p]) for p in programs[:-1]) if hit}


def own_program(log_text: str | None, said: str, kb: Knowledge) -> bool:
    """The pasted launch command (or the traceback's first frame) starts a program of no Megatron-based stack
    ("torchrun ... fastvideo/v1/training/wan_training_pipeline.py", 'File "pretraining.py" ... in <module>') and
    nothing the user wrote or set names Megatron or a framework: the program trains with its own loop (DDP unless it
    says otherwise), not Megatron-Core."""
    text = (log_text or "").replace("\\\n", " ")
    # ...or the command the user typed into the question ("Command: python examples/wanvideo/train_wan_t2v.py --task
    # train ...", DiffSynth-Studio#563) when no log shows one
    found = (_LAUNCHED.search(text) or _ENTRY_FRAME.search(text)
             or _LAUNCHED.search(said.replace("\\\n", " ")))
    if not found:
        return False
    program = next(g for g in found.groups() if g)
    words = _Words.of(kb)
    everything = said + " " + text
    return not (_MEGATRON_PROGRAM.search(program) or (words.megatron is not None and words.megatron.search(everything))
                or _one("frameworks", _clauses(everything), words, failing_only=False))


def _own_trainer(framework: Reading | None, log_text: str | None, said: str, words: _Words,
                 kb: Knowledge) -> str | None:
    """A program of its own trains (own_program): with PyTorch FSDP where its words say so ("python
    ./train_fsdp_llama_8b.py ... with FSDP"), else its own loop ("own": DDP unless it says otherwise)."""
    if framework is not None or not own_program(log_text, said, kb):
        return None
    return "fsdp" if words.fsdp is not None and words.fsdp.search(said + " " + (log_text or "")) else "own"


def fsdp_named(text: str, kb: Knowledge) -> bool:
    """PyTorch FSDP named as the trainer (fsdp_words), with no Megatron word and no framework of ours named."""
    if not text:  # before the word lists: a diagnosis with no words need not compile them
        return False
    words = _Words.of(kb)
    if words.fsdp is None or not _named_in_use(text, words.fsdp, words):
        return False
    return not ((words.megatron is not None and words.megatron.search(text))
                or _one("frameworks", _clauses(text), words, failing_only=False))


def trainer_named(text: str, kb: Knowledge) -> str | None:
    """The trainer the user's words name when it is not Megatron-Core (deepspeed, hf, fsdp), else None."""
    if not text:
        return None
    words = _Words.of(kb)
    framework = _one("frameworks", _clauses(text), words, failing_only=False)
    return _trainer(framework, kb.tables.get("situation") or {}, text, words)


def _both(words: Mapping[str, Iterable[str]] | None) -> list[str]:
    return [str(w) for lang in ("en", "zh") for w in (words or {}).get(lang) or []]


_SEPARATORS = re.compile(r"[\s_\-]+")
_QUOTES = re.compile(r"[\"`\u2018\u2019\u201c\u201d]|'(?![a-z])|(?<![a-z])'")  # a quote sets no word apart: "'asleep'"
_ARTICLES = re.compile(r" (?:a|an|the|its|my|our|this|that)(?= )")


@lru_cache(maxsize=1024)  # a clause is compared with every word list of every situation field
def _normal(text: str) -> str:
    """Lower case, any run of spaces, '_' or '-' as one space, articles dropped, padded with spaces: the form both
    the vocabulary and the user's text are compared in ("saves a checkpoint" ~ "saves_checkpoint"); a class named
    for its role ends a word there ("DTensorPolicyWorker init" ~ "policy worker init")."""
    return _ARTICLES.sub("", " " + _SEPARATORS.sub(" ", _QUOTES.sub(" ", _ROLE_SUFFIX.sub(" ", text).lower())) + " ")


# the role a class is named for, at the end of its CamelCase name: DTensorPolicyWorker, ActorRolloutRefWorker
_ROLE_SUFFIX = re.compile(r"(?<=[a-z])(?=(?:Worker|Trainer|Actor)s?\b)")


@lru_cache(maxsize=1024)
def _heads(norm: str) -> frozenset[str]:
    """Every substring of one to three characters of a normal form (see ``_Literals.heads``)."""
    return frozenset(norm[i:i + n] for n in (1, 2, 3) for i in range(len(norm) - n + 1))


class _Literals:
    """A list of literal words, matched by plain substring search in the normal form (no regex to compile: the
    vocabulary has hundreds of words and a diagnosis reads a few sentences).  A word with ``JOIN`` (an ellipsis)
    in it is its parts in that order, each within ``GAP`` characters of the one before (``LATIN_GAP`` for English
    words): yizhi...shangsheng
    ("keeps...rising") reads a sentence with the memory named between them, and baocun...moxing ("save...model")
    reads "save the Megatron model", where Chinese puts the words a phrase is made of a few characters apart."""

    GAP = 16  # characters between two parts of a Chinese word
    LATIN_GAP = 24  # between two English words, longer: "saves a Hugging Face format checkpoint"
    JOIN = "\u2026"  # the horizontal ellipsis of situation.yaml's words

    def __init__(self, words: list[str]):
        self._said = tuple(words)  # indexed on first use: most lists are never searched in one diagnosis

    @cached_property
    def words(self) -> list[str]:
        """The plain words in the normal form, longest first (a longer match wins over one inside it)."""
        return sorted((w for w in self._normals if self.JOIN not in w), key=len, reverse=True)

    @cached_property
    def gapped(self) -> list[tuple[str, tuple[str, ...]]]:
        """(word, its parts) of the words with ``JOIN`` in them, longest first."""
        return sorted(((w, tuple(p.strip() for p in w.split(self.JOIN))) for w in self._normals if self.JOIN in w),
                      key=lambda g: len(g[0]), reverse=True)

    @cached_property
    def _normals(self) -> set[str]:
        join = self.JOIN
        normal = {_normal(w).strip() for w in self._said}
        return {f" {join} ".join(p.strip() for p in w.split(join)) if join in w else w for w in normal if w}

    @cached_property
    def heads(self) -> frozenset[str]:
        """The first three characters of every word (all of a shorter one): a text holding none of them holds
        none of the words, which is what almost every clause says of almost every list."""
        return frozenset(w[:3] for w in [*self.words, *(parts[0] for _, parts in self.gapped)])

    @cached_property
    def _index(self) -> tuple[dict[str, list[str]], dict[str, list[tuple[str, ...]]], dict[str, int],
                              dict[tuple[str, ...], int]]:
        """Per head, the words that start with it, in the order above: a text is searched only for the words whose
        head it holds (a few of the hundreds in a list), in the order the whole list would give them."""
        by_head: dict[str, list[str]] = {}
        for w in self.words:
            by_head.setdefault(w[:3], []).append(w)
        gapped_by_head: dict[str, list[tuple[str, ...]]] = {}
        for _, parts in self.gapped:
            gapped_by_head.setdefault(parts[0][:3], []).append(parts)
        return (by_head, gapped_by_head, {w: i for i, w in enumerate(self.words)},
                {parts: i for i, (_, parts) in enumerate(self.gapped)})

    @staticmethod
    def _bounded(norm: str, start: int, end: int, word: str) -> bool:
        """A Latin word end must not run on into a letter or digit."""
        head_ok = not (word[0].isascii() and word[0].isalnum() and norm[start - 1].isascii()
                       and norm[start - 1].isalnum())
        tail_ok = not (word[-1].isascii() and word[-1].isalnum() and end < len(norm)
                       and norm[end].isascii() and norm[end].isalnum())
        return head_ok and tail_ok

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """(start, end, word) of every match in ``_normal(text)``; a Latin word end must not run on into a letter
        or digit (an identifier's '_' became a space, so hf2mcore_qwen2.sh still names hf2mcore)."""
        norm = _normal(text)
        held = self.heads & _heads(norm)
        if not held:
            return []
        by_head, gapped_by_head, rank, gapped_rank = self._index
        out = []
        for word in sorted((w for h in held for w in by_head.get(h, ())), key=rank.__getitem__):
            start = norm.find(word)
            while start >= 0:
                end = start + len(word)
                if self._bounded(norm, start, end, word):
                    out.append((start, end, word))
                start = norm.find(word, start + 1)
        gapped = (p for h in held for p in gapped_by_head.get(h, ()))
        for parts in sorted(gapped, key=gapped_rank.__getitem__):
            out += self._gapped_spans(norm, parts)
        return out

    def _gapped_spans(self, norm: str, parts: tuple[str, ...]) -> list[tuple[int, int, str]]:
        out = []
        start = norm.find(parts[0])
        while start >= 0:
            end = start + len(parts[0])
            if self._bounded(norm, start, end, parts[0]):
                for part in parts[1:]:
                    gap = self.LATIN_GAP if part.isascii() and parts[0].isascii() else self.GAP
                    at = norm.find(part, end, end + gap + len(part))
                    if at < 0 or not self._bounded(norm, at, at + len(part), part):
                        break
                    end = at + len(part)
                else:
                    out.append((start, end, norm[start:end]))  # the user's own words, gap included
            start = norm.find(parts[0], start + 1)
        return out

    def search(self, text: str) -> bool:
        return bool(self.spans(text))


def _hits(key: str, clause: str, words: _Words, *, over: bool = False) -> list[tuple[str, str]]:
    """(value, matched words) in one clause; a match inside a longer match of another value is not one, and a phase
    or step said to come later or to be over ("before the log-prob pass", "after the update") is not the one that
    failed; a step still ahead may name the one it failed in ("before the first training step": before training).
    ``over``: only the phases or steps said to be over ("after every checkpoint save": what came just before)."""
    spans = []
    passed = []  # matches said to be later or over: a shorter word inside one ("after CUDA graph capture") is too
    norm = _normal(clause) if key in ("phases", "steps", "processes") else ""
    if key in ("phases", "places", "processes", "trends") and words.lookalike is not None:
        # a phase, place or process word inside drops ("ZeRO stage 0" is no pipeline stage 0; the setting
        # fsdp_cpu_ram_efficient_loading says nothing of the host's RAM running out)
        passed += [(start, end) for start, end, _ in words.lookalike.spans(clause)]
    for value, literals in words.lists.get(key, []):
        for start, end, said in literals.spans(clause):
            if norm and key != "processes" and norm[end:end + 1] == "(":  # a call in code ("pause()"), no phase
                continue
            head, tail = norm[:start].rstrip(), norm[end:].lstrip()
            # named right after an absence word, it is not there: "no dataloader changes" says no phase; "full-parameter
            # training, no vLLM" (StarsfieldAI/R1-V#18) shares the GPU with no engine
            if (key == "phases" or value == "colocated-engine") and head.endswith(words.absent_before):
                passed.append((start, end))
                continue
            if key == "processes":
                spans.append((start, end, value, said))
                continue
            if over:
                if norm and (head.endswith(words.over) or tail.startswith(words.over)):
                    spans.append((start, end, value, said))
                continue
            ahead = head.endswith(words.later_before) or tail.startswith(words.later_after)
            within = bool(norm) and tail.startswith(words.within) and not head.endswith(words.over)
            if within and key == "steps":  # "before the first iteration finishes": within the first iteration
                value = next((step for step, before in words.still_ahead.items() if before == value), value)
            opens_ahead = (" " + norm[start:end].strip()).startswith(words.later_before)  # "before the first step"
            if within and not ahead and not opens_ahead:  # "Step 1 finishes, then during step 2": that one is over
                passed.append((start, end))
                continue
            if not norm or not ahead or within:
                spans.append((start, end, value, said))
            elif (key == "steps" and value in words.still_ahead
                  and not (head.endswith(words.over) or tail.startswith(words.over))):
                spans.append((start, end, words.still_ahead[value], said))
            else:
                passed.append((start, end))
    kept = [h for h in spans if not any(o[0] <= h[0] and h[1] <= o[1] and (o[1] - o[0]) > (h[1] - h[0])
                                        for o in [*spans, *passed])]
    return [(value, said) for _, _, value, said in sorted(kept)]


# \u3002 \uff1b \uff01 \uff1f \uff0c: the Chinese full stop and the full-width ";", "!", "?", ","; \u4f46\u662f danshi
# "but", \u7136\u540e ranhou "then".
_CLAUSE = re.compile(r"(?:[.;!?](?=\s|$)|[\u3002\uff1b\uff01\uff1f\uff0c\n]|,\s|\bbut\b|\bthen\b"
                     r"|\u4f46\u662f|\u7136\u540e)")
_SENTENCE = re.compile(r"(?:[.;!?](?=\s|$)|[\u3002\uff1b\uff01\uff1f\n])")


_SETTING = re.compile(r"(?<![\w.\-])(?:--)?[A-Za-z_][\w.\-]*\s*[=\uff1d]\s*[^\s,;\uff0c\uff1b\u3001]+")
# a name written with its version ("sglang 0.5.1", "vllm==0.8.5"): an installed package, whatever it names
_PACKAGE_VERSION = re.compile(r"(?<![\w.-])[A-Za-z][\w.-]*\s*(?:[=<>~!]=?|\s)\s*v?\d+\.\d+(?:\.[\w.+-]+)?")
_FLAG = re.compile(r"(?<![\w\-])--[A-Za-z][\w\-]+")


def _unset_settings(clause: str) -> str:
    """A clause with its key=value settings and --flags blanked: they name a pass they configure, not one that ran."""
    return _FLAG.sub(" ", _SETTING.sub(" ", clause))


def _clauses(text: str) -> list[str]:
    """Clauses: what one failure word is said about ("we resumed, now the log prob pass OOMs" has two)."""
    return [c for c in _CLAUSE.split(text) if c and c.strip()]


_ERROR_NAME = re.compile(r"(?:[A-Za-z_]\w*\.)*(?P<name>[A-Za-z_]\w*(?:Error|Exception))\b")


def _error_from_a_try(sentences: list[str], error: str, words: _Words) -> bool:
    """The user names the log's error as what a workaround raised ("I tried moving the model to the CPU before
    saving, and then got AssertionError: ...", "I changed both to SHARDED_STATE_DICT ... then ran into RuntimeError"):
    a sentence that says something was tried or changed holds the error's name.  That error is the workaround's, not
    the run's first failure, which the user describes in their own words."""
    m = _ERROR_NAME.match(error.strip())
    if not m:
        return False
    name = m.group("name")
    return any(name in s and (words.tried.search(s) or words.changed.search(s)) for s in sentences)


def _sentences(text: str) -> list[str]:
    """Sentences: a setting and what the user says of it ("I tried X, no effect") stay together."""
    return [c for c in _SENTENCE.split(text) if c and c.strip()]


def _one(key: str, clauses: list[str], words: _Words, *, failing_only: bool = True,
         order: tuple[str, ...] = (), symptoms: bool = False, mates: frozenset[str] = frozenset()) -> Reading | None:
    """The value the words name: the one named in the same clause as a failure word; else the only one named
    (with ``failing_only=False``, else the first one named).  With an ``order`` (phases: the most telling
    first), several candidates resolve to the earliest in it: "the update ends, then vLLM wakes up and it
    OOMs" is a wake-up failure, whichever clause carries the failure word.  With ``symptoms``, a clause that says
    memory is higher than it should be ("resume uses more memory than before") places the value where no clause
    with a failure word names one.  ``mates``: clauses whose sentence has a failure word in another clause ("once
    validation begins, the task crashes"): they place the value before any clause of a sentence without one ("the
    whole run works well, including saving checkpoints")."""
    # (value, the words, 3 in a clause that says something failed, 2 in a sentence that does, 1 in a clause that
    # says memory is higher, else 0)
    hits: list[tuple[str, str, int]] = []
    for clause in clauses:
        if key in ("phases", "steps") and words.oom_denied.search(clause):
            continue  # "the model loaded without any out-of-memory report": that phase is not where it failed
        beside = 3 if words.failure.search(clause) else 2 if clause in mates else int(
            bool(symptoms and words.symptom and words.symptom.search(clause)))
        hits += [(value, said, beside) for value, said in _hits(key, clause, words)]
    # beside a failure word first, then in its sentence; beside a symptom only where no value stands near a failure
    near = next((found for found in (list(dict.fromkeys(v for v, _, b in hits if b == level)) for level in (3, 2, 1))
                 if found), [])
    named = list(dict.fromkeys(v for v, _, _ in hits))
    ranked = {v: i for i, v in enumerate(order)}
    if len(near) == 1:
        value = near[0]
    elif near and order:  # several beside the failure: the most telling ("wakes up for the next rollout")
        value = min(near, key=lambda v: ranked.get(v, len(ranked)))
    elif len(named) == 1 or (named and not failing_only):
        value = named[0]
    elif order and named and not near:  # none said to fail: the most telling of those named
        value = min(named, key=lambda v: ranked.get(v, len(ranked)))
    else:
        return None
    said = next(w for v, w, _ in hits if v == value)
    return Reading(value, [Clue(f"\u201c{said}\u201d", "words")])


def _framework_from_config(config_text: str | None, words: _Words) -> Reading | None:
    """The one framework whose own keys the config's settings use (situation.yaml frameworks words)."""
    if not config_text:
        return None
    named = {v: said for v, said in _hits("frameworks", config_text, words)}
    if len(named) != 1:
        return None
    (value, said), = named.items()
    return Reading(value, [Clue(said, "config")])


# a rollout engine's own settings ("actor_rollout_ref.rollout.tensor_model_parallel_size=4": vLLM's TP) name no
# Megatron trainer (ToolRL#39, a verl FSDP actor)
_ROLLOUT_SETTING = re.compile(r"\brollout\.[\w.]+\s*[=:]\s*\S+")


def _trainer(framework: Reading | None, table: Mapping[str, Any], text: str, words: _Words) -> str | None:
    """The trainer when it is not Megatron-Core: the framework's own (situation.yaml frameworks ``trainer``), the HF
    Trainer where the text names it (hf_trainer_words), DeepSpeed where the text names ZeRO (deepspeed_words), PyTorch
    FSDP (fsdp_words) or a loop of the user's own (own_trainer_words); None where the text names Megatron
    (megatron_words)."""
    if words.megatron is not None and words.megatron.search(_ROLLOUT_SETTING.sub(" ", text)):
        return None
    row = framework_row(table, framework.value if framework else None)
    if row.get("trainer"):
        return str(row["trainer"])
    # the HF Trainer named (Seq2SeqTrainer, TrainingArguments, its eval keys): its loop, whatever it shards with
    if words.hf_trainer is not None and words.hf_trainer.search(text):
        return "hf"
    # DeepSpeed ZeRO named and Megatron not ("ZeRO2 on 8 GPUs runs out of memory", zero_stage=3): a DeepSpeed trainer
    if words.deepspeed is not None and words.deepspeed.search(text):
        return "deepspeed"
    # PyTorch FSDP named and Megatron not ("Qwen2.5-32B with FSDP at 32K"): torch's sharding trainer - not where it
    # is named only to say it is off or to ask for it ("I am not using FSDP", "is there code to train it with FSDP?")
    if framework is None and words.fsdp is not None and words.fsdp.search(text):
        # ...and FSDP said to be off is a run that does not shard: PyTorch DDP (or the HF Trainer's), not Megatron
        return "fsdp" if _named_in_use(text, words.fsdp, words) else "own"
    # a loop of the user's own, no framework ("the training code is my own"): plain PyTorch
    return "own" if framework is None and words.own_trainer is not None and words.own_trainer.search(text) else None


def _megatron_evident(facts: Facts, framework: Reading | None, table: Mapping[str, Any], text: str,
                      words: _Words) -> bool:
    """Something the user gave says Megatron-Core trains: a Megatron word (megatron_words), a framework whose rows name
    no other trainer (Megatron Bridge, Megatron-LM, NeMo, slime, Pai-Megatron-Patch), a Bridge config or Megatron-LM
    arguments, a Megatron path in the log, or a tensor / pipeline / context-parallel layout.  Where nothing does, a
    knob only Megatron-Core has (selective recompute) is no advice for the program the user runs.  A Megatron path in
    the log ("megatron/core/...", pretrain_gpt.py) is a Megatron word."""
    if words.megatron is not None and words.megatron.search(text):
        return True
    if framework is not None:
        return not framework_row(table, framework.value).get("trainer")
    cfg = facts.config
    if cfg.source in ("bridge-yaml", "megatron-args"):
        return True
    layout = facts.question.layout
    # Megatron's sequence parallelism named (vocabulary.yaml topic sequence-parallel, in English or Chinese); a
    # framework's own Ulysses / ring kind names that framework, whose trainer row decided above
    if cfg.sequence_parallel or "sequence-parallel" in facts.question.topics:
        return True
    return any((vars(cfg).get(k) or layout.get(k) or 1) > 1 for k in (
        "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size"))


def _named_in_use(text: str, literals: _Literals, words: _Words) -> bool:
    """One of ``literals`` named in a clause that does not ask, and not said to be off there."""
    asking = _asking_clauses(text, words)
    for clause in _clauses(text):
        if clause in asking:
            continue
        norm = _normal(clause)
        if any(not _said_off(norm, start, end, words) for start, end, _ in literals.spans(clause)):
            return True
    return False


def _refused(text: str, words: _Words) -> list[str]:
    """Fixes the user says are not an option (situation.yaml changes.refused): more GPUs ("without adding GPUs",
    "bu jia ka").  A fix the user would rather not take ("I don't want optimizer offload, it is slow") stays an
    option: an expert still names it, with its cost, after the ones they can take (ms-swift#5980)."""
    return [fix for fix, said in words.refused if said.search(text)]


def _recompute_off(facts: Facts, kb: Knowledge, config_text: str | None, clauses: list[str], words: _Words) -> bool:
    """Activation recompute off and set on by nothing: the question says so ("mei you kai recompute", "no recompute")
    or a setting does (situation.yaml recompute_off_settings: "--gradient_checkpointing false" in a launch line,
    the config's or one pasted with the log, gradient_checkpointing=false in the settings).  Not where the user
    refuses it ("I don't want to turn on gradient checkpointing"): a rule leading with it would answer against
    their words."""
    if facts.config.recompute_granularity is not None:
        return False
    if words.refusal is not None and any(words.refusal.search(c) and _recompute_spans(c, kb) for c in clauses):
        return False
    return recompute_said_off(facts.question.layout, f"{facts.question.text or ''}\n{config_text or ''}", kb)


def recompute_said_off(layout: Mapping[str, Any], text: str, kb: Knowledge) -> bool:
    """The question's layout says recompute is off, or a setting in ``text`` turns it off (situation.yaml
    recompute_off_settings: "--gradient_checkpointing false", disable_gradient_checkpointing true)."""
    if "recompute_granularity" in layout and layout["recompute_granularity"] is None:
        return True
    spec = (kb.tables.get("situation") or {}).get("recompute_off_settings")
    return bool(spec and re.search(spec, text, re.IGNORECASE))


def framework_row(table: Mapping[str, Any], framework_id: str | None) -> Mapping[str, Any]:
    """situation.yaml's row of that framework ({} for none)."""
    return next((f for f in table.get("frameworks") or [] if framework_id and f.get("id") == framework_id), {})


_ASSIGNMENT = re.compile(r"(?:^|[\s;&|(])(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>\S*)")
# what may stand before an environment assignment on its line: nothing, "export", or other assignments
_SHELL_ASSIGNMENT_START = re.compile(r"^\s*(?:export\s+|(?:[A-Za-z_]\w*=\S*\s+)*)$"
                                     r"|\bexport\s+(?:[A-Za-z_]\w*=\S*\s+)*$")


def _env_case_mismatch(text: str, table: Mapping[str, Any]) -> str | None:
    """A shell assignment of a variable the program reads only by its upper-case name, written in another case
    ("export ... max_pixels=1024*28*28"): environment names are case-sensitive, so the value reaches nothing."""
    known = set(table.get("case_sensitive_env") or [])
    assigned = {m.group("name") for m in _ASSIGNMENT.finditer(text)}
    for m in _ASSIGNMENT.finditer(text):
        name = m.group("name")
        if name == name.upper() or name.upper() not in known:
            continue
        # a shell variable that sets the real one ("nproc_per_node=8 ... NPROC_PER_NODE=$nproc_per_node") is fine
        if name.upper() in assigned or re.search(rf"\$\{{?{re.escape(name)}\b", text):
            continue
        # ...and so is a config key listed in prose ("rollout_batch_size=512, max_pixels=4194304, 8 ka",
        # hiyouga/EasyR1#454): an environment assignment is exported, or opens its line before a command
        if not _SHELL_ASSIGNMENT_START.search(text[text.rfind("\n", 0, m.start()) + 1:m.start("name")]):
            continue
        return f"{name}={m.group('value')[:40]} (the program reads {name.upper()})"
    return None


def _recompute_spans(clause: str, kb: Knowledge) -> list[tuple[int, int]]:
    """Where the clause names activation recompute, under Megatron's or its trainers' names (gradient / activation
    checkpointing, zhong jisuan): vocabulary.yaml topic recompute, en and zh, compiled once per knowledge base."""
    def build(k: Knowledge) -> list[re.Pattern[str]]:
        topics = (k.tables.get("vocabulary") or {}).get("topics") or []
        keywords = next((t.get("keywords") or {} for t in topics if t.get("id") == "recompute"), {})
        return [re.compile(p, re.IGNORECASE) for lang in ("en", "zh") for p in keywords.get(lang) or []]

    return [(m.start(), m.end()) for rx in kb.memo("recompute-words", build) for m in rx.finditer(clause)]


def _host_report_before_a_kill(facts: Facts, table: Mapping[str, Any], log_text: str | None) -> Reading | None:
    """Host memory, where the log's last host-memory report (DeepSpeed's see_memory_usage "CPU Virtual Memory: used =
    63.96 GB, percent = 76.6%") shows the machine's RAM mostly used and the process is then killed with no GPU memory
    failure (Linly#35: ZeRO-3 offload of a 7B model on 80 GB of RAM, the GPU all but empty)."""
    spec = table.get("host_memory_report") or {}
    if not (log_text and spec) or facts.log.has_memory_failure:
        return None
    killed = facts.log.host_oom or bool(set(facts.log.signatures or ()) & set(spec.get("kills") or ()))
    reports = list(re.finditer(spec["regex"], log_text)) if killed else []
    if not reports or float(reports[-1].group("percent")) < float(spec["share"]) * 100:
        return None
    said = reports[-1].group(0)[:ERROR_CHARS]
    return Reading("host", [Clue(f"the last host-memory report before the kill: \u201c{said}\u201d", "log")])


def _process_from_log(facts: Facts, table: Mapping[str, Any]) -> Reading | None:
    """What shares the GPU, where the log's own failure says it (situation.yaml processes ``signatures``: vLLM's
    sleep-mode allocator failing is the colocated engine at a wake-up), when the user's words say nothing."""
    found = set(facts.log.signatures or ())
    row = next((p for p in table.get("processes") or [] if found & set(p.get("signatures") or ())), None)
    if row is None:
        return None
    return Reading(row["id"], [Clue(f"\u201c{sorted(found & set(row['signatures']))[0]}\u201d", "log")])


def _default_process(framework: Reading, table: Mapping[str, Any], only: str | None = None) -> Reading | None:
    """Where the framework runs its rollout engine unless told otherwise (situation.yaml default_process)."""
    row = framework_row(table, framework.value)
    if not row.get("default_process") or (only and row["default_process"] != only):
        return None
    return Reading(row["default_process"], [Clue(f"{framework.clues[0].text}: the framework's default", "config")])


def _places_engine(clauses: list[str], words: _Words) -> bool:
    """Some words say the engine shares the trainer's GPUs ("colocate", "sleep mode", "hybrid engine"), not only
    name it ("vLLM", "gpu_memory_utilization")."""
    return any(v == "colocated-engine" and _normal(w).strip() not in words.engine_names
               for c in clauses for v, w in _hits("processes", c, words))


def _process_from_words(clauses: list[str], said: list[str], words: _Words, gpu_fine: bool) -> Reading | None:
    """What shares the GPU, or which memory ran out: any clause may name it, but host memory does not count where
    the user says the GPU's memory ran out ("OOM on the 24 GB card - could I convert in CPU memory instead?").
    An engine said to run on GPUs of its own ("non-colocated: vLLM runs on a separate cluster") outranks the
    engine's name, wherever each is said; host memory named where the user says the GPU's memory is fine outranks
    the engine that shares the GPU."""
    # a job killed at its time limit was killed by the scheduler, not for memory ("hung until Slurm's time limit
    # killed it"): that clause names no memory at all
    clauses = [c for c in clauses if not words.time_limit.search(c)]
    said = [c for c in said if not words.time_limit.search(c)]
    separate = next(((v, w) for c in clauses for v, w in _hits("processes", c, words) if v == "separate-engine"), None)
    if separate:
        return Reading(separate[0], [Clue(f"\u201c{separate[1]}\u201d", "words")])
    reading = _one("processes", clauses, words, failing_only=False)
    if reading is not None and reading.value != "host" and gpu_fine:
        host = next((w for c in clauses for v, w in _hits("processes", c, words) if v == "host"), None)
        if host:  # "colocated ... GPU memory is fine, host RAM fills": the host is what ran out
            return Reading("host", [Clue(f"\u201c{host}\u201d", "words")])
    if reading is None or reading.value != "host":
        return reading
    # unless the GPU is said to be fine; a clause that asks ("is it GPU memory or host memory that ran out?")
    # says neither ran out
    if not gpu_fine and any(_says_gpu_failed(c, words) for c in said):
        return None
    # host memory only asked about ("is it GPU or host memory that ran out?") says neither ran out (``said``: the
    # clauses that do not ask)
    return reading if any(v == "host" for c in said for v, _ in _hits("processes", c, words)) else None


def _start_of_sentence(clause: str) -> bool:
    """The clause opens with the run, the job or the memory as its subject ("The run behaves exactly as before",
    "Memory stays the same"): what it says is of the change just made, not of a setting of its own."""
    return bool(_RUN_SUBJECT.match(clause))


_RUN_SUBJECT = re.compile(r"\s*(?:the\s+|my\s+|our\s+)?(?:run|job|training|memory|peak|usage|it)\b", re.IGNORECASE)


def _stated_only(sentence: str, words: _Words) -> str:
    """The sentence without its clauses that ask ("... and is disabling the distributed optimizer a supported way?"
    names a setting the user asks about, not one they took out)."""
    clauses = _clauses(sentence)
    kept = [c for c in clauses if not _asks(c, words)]
    return sentence if len(kept) == len(clauses) else ", ".join(kept)


def _asked(reading: Reading | None) -> Reading | None:
    """The same reading, its clues marked as read from a question the user asked."""
    return None if reading is None else Reading(reading.value, [Clue(c.text, "asked") for c in reading.clues])


def _asks(clause: str, words: _Words) -> bool:
    """The clause asks whether something is so ("is it a leak?", shi bu shi xiecun xielou, "... ma"): it does not
    say it is (situation.yaml asking), unless it asks whether what it says is normal ("is it normal that it OOMs?")."""
    said = f"{_normal(clause).strip()} "
    for lead in words.asking_lead:
        if said.startswith(lead):
            said = said[len(lead):]
            break
    if words.presupposes is not None and words.presupposes.search(clause):
        return False  # "is it normal that it OOMs?": it did
    return (said.startswith(words.asking_start) or said.rstrip().endswith(words.asking_end)
            or _asks_within(clause, words))


def _asks_within(clause: str, words: _Words) -> bool:
    """A question form inside the clause ("zheyang xiaqu hui bu hui OOM", will it OOM if this goes on?), unless
    "regardless" comes right before it ("wulun shi bu shi ..., dou OOM": it OOMs either way)."""
    if words.asking_within is None:
        return False
    norm = _normal(clause)
    return any(not norm[:start].rstrip().endswith(words.asking_regardless)
               for start, _, _ in words.asking_within.spans(clause))


def _asking_clauses(text: str, words: _Words) -> set[str]:
    """The clauses that ask: each that asks by itself, and every clause of a question that opens by asking and
    ends in a question mark ("shi bu shi baocun shi host neicun bugou, bei OOM le?": both halves ask)."""
    asking = {c for c in _clauses(text) if _asks(c, words)}
    for question in _QUESTION.findall(text):
        parts = _clauses(question)
        if parts and (_asks(parts[0].rstrip(_QUESTION_MARKS) + " ", words) or words.alternative.search(question)):
            asking.update(parts)
    return asking


# ASCII escapes keep this source ASCII (a scanner reads a non-ASCII file twice: raw and normalised)
_QUESTION_MARKS = "?\uff1f"  # ASCII and full-width
# a sentence that ends in a question mark (a full stop or exclamation mark, ASCII or CJK, ends a sentence before it)
_QUESTION = re.compile("[^\u3002\uff01\uff1f!?.\n]*[?\uff1f]")


def _says_gpu_failed(clause: str, words: _Words) -> bool:
    """The clause says something failed and names the GPU's memory, not as a denial ("it is not a CUDA OOM",
    bu shi xiancun bugou, "not a shortage of GPU memory")."""
    if not words.failure.search(clause):
        return False
    norm = _normal(clause)
    if _asks(clause, words):
        return False  # "is it GPU memory?" asks; it does not say so
    return any(not _ARTICLE_END.sub("", norm[:start].rstrip()).rstrip().endswith(words.negations)
               for start, _, _ in words.gpu_memory.spans(clause))


# "not a GPU VRAM OOM": between the negation and the memory's name may stand an article and the device's name
_ARTICLE_END = re.compile(r"(?i)(?:(?<![\w-])(?:an?|the|gpu|cuda|device)\s*)+$")


def _all(key: str, clauses: list[str], words: _Words) -> list[Reading]:
    found: dict[str, Reading] = {}
    for clause in clauses:
        for value, said in _hits(key, clause, words):
            found.setdefault(value, Reading(value, [Clue(f"\u201c{said}\u201d", "words")]))
    return list(found.values())


def _merge(first: list[Reading], then: list[Reading]) -> list[Reading]:
    seen = {r.value for r in first}
    return [*first, *(r for r in then if r.value not in seen)]


# An environment variable's name ("CUDA_VISIBLE_DEVICES") is a setting, not a version of CUDA.
_ENV_NAME = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")


# a release number (a sentence may end right after it: "OOMs in 0.8.1."), a commit hash beside the word "commit"
# ("on commit 3e5481fd", "after commit e3af337"), or a dated build's tag ("pjnl-20240503", "nightly-2026-04-28":
# lightning-thunder#439 fits on one nightly image and OOMs on the next)
# a quantity is no version: "7.81 GiB", "1.5x", "0.9 s" (an OOM message's figures beside the word "torch")
_VERSION = re.compile(r"(?<![\w.])v?(\d+\.\d+(?:\.\d+)?(?:\.post\d+|\.dev\d+|rc\d+)?)(?!\w|\.\w)"
                      r"(?!\s*(?:[KMGT]i?B\b|[KMGT]\b|%|x\b|\u00d7|s\b|ms\b|ns\b))"
                      r"|\bcommits?\s+([0-9a-f]{7,40})\b"
                      r"|(?<=[a-z][-_])(20\d\d-?[01]\d-?[0-3]\d)\b", re.I)


def _fewer_gpus_fit(clauses: list[str], words: _Words, kb: Knowledge) -> bool:
    """"Works with n_gpus_per_node=2, OOMs when n_gpus_per_node > 2": every count said to work is below every count
    said to fail (a clause that names a failure is a failing count, whatever else it says) - and the same model on
    both ("0.5B on one card runs, 7B on 8 cards fails" compares two models, not two GPU counts)."""
    fail_clauses = [c for c in clauses if words.failure.search(c)]
    fit_clauses = [c for c in clauses if not words.failure.search(c) and words.fits_on.search(c)]
    # a count said in words: "single-GPU training works, multi-GPU OOMs" (one, and more than one)
    failing = [n for c in fail_clauses for n in [*gpu_counts_in(c, kb), *([2] if words.several_gpus.search(c) else [])]]
    working = [n for c in fit_clauses for n in [*gpu_counts_in(c, kb), *([1] if words.one_gpu.search(c) else [])]]
    sizes = [set().union(*(model_sizes_in(c, kb) for c in group)) for group in (fit_clauses, fail_clauses)]
    if sizes[0] and sizes[1] and sizes[0] != sizes[1]:
        return False
    return bool(failing and working) and max(working) < min(failing)


def _two_versions(text: str, words: _Words) -> list[Reading]:
    """"3.12.4 OOMs, 3.10.3 runs fine": two versions of the software named, one said to have worked, is the stack
    moving under a config that fit, whether or not the user wrote the word 'upgrade'."""
    named: dict[str, str | None] = {}  # each version, with the name written right before it
    for m in _VERSION.finditer(text):
        owner = _NAME_BEFORE.search(text, max(0, m.start() - 24), m.start())
        name = owner.group(1).lower() if owner else None
        named.setdefault(m.group(1) or m.group(2) or m.group(3), None if name in words.not_version_names else name)
    # an environment listed ("Python 3.9, Transformers 4.40, PyTorch 2.1") names one version of each thing:
    # two versions of the same thing, or versions named by nothing, are what moved
    owners = [o for o in named.values() if o is not None]
    if len(named) >= 2 and len(owners) == len(named) and len(set(owners)) == len(owners):
        return []
    found = list(named)
    if len(found) < 2 or not (words.versions.search(text) or _names_software(text, words)):
        return []
    return [Reading("stack", [Clue(f"\u201c{found[0]}\u201d / \u201c{found[1]}\u201d", "words")])]


# a software name written right before its version ("Transformers 4.40", "torch==2.1", "vLLM v0.8.2")
_NAME_BEFORE = re.compile(r"([A-Za-z][A-Za-z\-_.]*[A-Za-z])\s*(?:==|=|:|\s)\s*v?$")


_BUILD_AFTER = 40  # characters from "works" / "OOMs" to the version it is said of ("works with the X image")


def _fits_on_one_build(text: str, words: _Words) -> Reading | None:
    """One version of the software said to work and another said to fail, each right after its verdict ("works with
    the pjnl-20240503 image and goes OOM with pjnl-20240504", lightning-thunder#439): the stack moved under a setup
    that fit, whichever word ('upgrade', 'regression') the user did or did not write."""
    if not _names_software(text, words):
        return None
    norm = text.lower()
    versions = [(m.start(), m.group(1) or m.group(2) or m.group(3)) for m in _VERSION.finditer(norm)]
    if len(set(v for _, v in versions)) < 2:
        return None

    def said(literals: _Literals) -> set[str]:
        ends = [m.end() for w in literals.words
                for m in re.finditer(rf"\b{re.escape(w)}\b" if w.isascii() else re.escape(w), norm)]
        return {v for at, v in versions if any(0 <= at - end <= _BUILD_AFTER for end in ends)}

    fit = said(words.fits_on)
    failed = said(words.failure) | (said(words.broken_on) if words.broken_on is not None else set())
    fit_only, failed_only = fit - failed, failed - fit
    if not fit_only or not failed_only:
        return None
    fit, failed = sorted(fit_only)[0], sorted(failed_only)[0]
    return Reading("stack", [Clue(f"\u201c{fit}\u201d / \u201c{failed}\u201d", "words")])


# a release number and the memory figure written right after it ("2.0.0+cu118: 6802MiB", "torch 2.0 uses 7gb VRAM")
_VERSION_FIGURE = re.compile(r"(?<![\w.])v?(\d+\.\d+(?:\.\d+)?)(?!\w|\.\w)(?!\s*[KMGT]i?B\b)"
                             r"[^\n]{0,30}?(?<![\w.])(\d+(?:\.\d+)?)\s*(MiB|GiB|MB|GB)\b", re.I)


def _more_memory_on_newer(text: str, more: float) -> Reading | None:
    """Two versions of the software, each beside the memory the same run took on it, the newer taking more: the stack
    moved under a setup that fit (pytorch#97712: "1.13.1+cu117: 5515MiB, 2.0.0+cu118: 6802MiB")."""
    unit = {"mib": 2**20, "gib": 2**30, "mb": 1e6, "gb": 1e9}
    figures: dict[tuple[int, ...], float] = {}
    for m in _VERSION_FIGURE.finditer(text):
        figures.setdefault(tuple(int(x) for x in m.group(1).split(".")), float(m.group(2)) * unit[m.group(3).lower()])
    if len(figures) < 2:
        return None
    oldest, newest = min(figures), max(figures)
    if figures[newest] < figures[oldest] * more:
        return None
    names = [".".join(map(str, v)) for v in (oldest, newest)]
    return Reading("stack", [Clue(f"\u201c{names[0]}\u201d / \u201c{names[1]}\u201d", "words")])


QUOTE_AROUND = 32  # characters of the user's sentence kept on each side of the words that were read


def _first_word(clause: str, literals: _Literals) -> tuple[int, int]:
    """Where in ``clause`` the first of ``literals`` stands as a word ("TE" is not the end of "step"); the whole
    clause when none is found as typed."""
    low = clause.lower()
    hits = []
    for word in (w.strip() for w in literals.words):
        edge = r"\b" if word[:1].isascii() else ""
        m = re.search(f"{edge}{re.escape(word)}{edge if word[-1:].isascii() else ''}", low) if word else None
        if m:
            hits.append((m.start(), m.end()))
    return min(hits) if hits else (0, len(clause))


def _quote(clause: str, start: int, end: int) -> str:
    """The user's words around ``clause[start:end]``: enough to recognise the sentence, not the whole message."""
    lo, hi = max(0, start - QUOTE_AROUND), min(len(clause), end + QUOTE_AROUND)
    return ("\u2026" if lo else "") + clause[lo:hi].strip() + ("\u2026" if hi < len(clause) else "")


_NUMBER_AFTER = re.compile(r"\W{0,3}(?:\w{1,3}\W{0,2})?\d")  # "X=2", "X to 2", "X shezhi wei 2": a value set
_UNCHANGED_AFTER = 24  # characters after a setting's name where "we used before" says it kept its value
_GLOBAL_BATCH = re.compile(r"(?i)global|\u5168\u5c40")  # "global batch size", quanju: not the batch one GPU runs


_TAKEN_OUT_GAP = 3  # characters between a removal word and the setting it names ("turned off X", "guandiao X")


def _taken_out(clause: str, spans: list[tuple[str, int, int]], words: _Words,
               kb: Knowledge) -> list[tuple[str, int, int]]:
    """The settings a removal word names right after it, recompute included under its trainers' names (gradient /
    activation checkpointing: vocabulary.yaml topic recompute), where the clause also names others it keeps."""
    named = list(spans) + [("full-recompute", start, end) for start, end in _recompute_spans(clause, kb)]
    lower = clause.lower()  # the word list's spans are in its normalised text: find each word in the clause itself
    ends = []
    for _, _, said in words.removed.spans(clause):
        word = said.strip().lower()
        if (at := lower.find(word)) >= 0:
            ends.append(at + len(word))
    return [sp for sp in named if any(0 <= sp[1] - end <= _TAKEN_OUT_GAP for end in ends)]


def _changes(clauses: list[str], kb: Knowledge, words: _Words, *, agent: bool = False
             ) -> tuple[list[Reading], list[Reading], list[Reading], list[Reading], list[Reading]]:
    """Settings named in a clause that says they were changed, tried, did nothing, were taken out, or made the run
    fit; an upgrade word with a version word says the software stack moved.  A setting the user took out is not one
    they tried: it is what held the memory down before, and the first thing to put back.  One the user says made it
    fit ("it works if I reduce the micro-batch") is what the answer confirms and prices first."""
    changed: dict[str, Reading] = {}
    tried: dict[str, Reading] = {}
    no_effect: dict[str, Reading] = {}
    removed: dict[str, Reading] = {}
    worked: dict[str, Reading] = {}
    source = "agent" if agent else "words"
    before = ""  # the clause before: what "this fixed it" / "zheyang jiejue le" refers to
    for clause in clauses:
        previous, before = before, clause
        is_change, is_try, useless, took_out, moved, fits = (bool(rx.search(clause)) for rx in (
            words.changed, words.tried, words.no_effect, words.removed, words.upgraded, words.worked))
        # a removal word inside a setting's own name removes nothing ("use_remove_padding True", DeepEyes#17)
        took_out = took_out and bool(words.removed.search(_SNAKE_CASE.sub(" ", clause)))
        if words.compared.search(clause):  # "with or without X, the peak is the same": tried both ways, not removed
            took_out, is_try = False, True
        if not (is_change or is_try or useless or took_out or moved or fits):
            continue
        quote = _quote(clause, *_first_word(clause, words.versions if moved else words.settings))
        from .recognize import fix_recognizer  # only where a sentence says something was changed or tried

        spans = [(m.ident, m.start, m.end) for m in fix_recognizer(kb).find(clause)]
        off = words.engine_off.spans(clause) if fits and words.engine_off is not None else []
        if off:  # "trains without vLLM" (bu shiyong vllm): the engine's share is what the run could not hold
            spans.append(("shrink-colocated-engine", off[0][0], off[0][1]))
        if not spans and (is_change or fits):  # no fix's wording, but a setting's own name given a number
            from .names import fixes_named  # ("set micro_train_batch_size to 2: OOM")

            moves = [] if fits else words.changed.spans(clause)
            spans = [sp for sp in fixes_named(clause, kb) if _NUMBER_AFTER.match(clause, sp[2])
                     and (fits or _said_of(sp, moves, clause))]
        if not spans and took_out:  # a setting's own name switched off ("ba gradient_checkpointing guandiao")
            from .names import fixes_named  # right beside the removal word: "the same as when it is turned off"

            offs = words.removed.spans(clause)  # refers to no setting by name
            spans = [sp for sp in fixes_named(clause, kb) if any(
                -_BESIDE <= r0 - sp[2] <= _BESIDE or -_BESIDE <= sp[1] - r1 <= _BESIDE for r0, r1, _ in offs)]
        # "set X=2, Y=20480. That fixed the OOM." - unless that clause said X did nothing ("batch 2 ye yiyang; huan
        # Branchformer jiu bu hui OOM": what fits is the other change, which names no fix)
        # ...and "I added max_pixels=602112 and SIZE_FACTOR=8. But these two parameters have no effect" (ms-swift#2785):
        # a clause naming no setting that points back ("these two parameters") means what the clause before set
        # ...and "I added expandable_segments: true. The run behaves exactly as before" (llm-foundry PR 1088):
        # a sentence that says nothing changed, right after the one that set something, is about what it set
        points_back = ((fits and not useless and not words.no_effect.search(previous))
                       or (useless and not took_out and bool(words.changed.search(previous))
                           and (bool(words.settings.search(clause)) or _start_of_sentence(clause))))
        if not spans and previous and points_back:
            spans = [(m.ident, m.start, m.end) for m in fix_recognizer(kb).find(previous)]
            quote_from = previous
        else:
            quote_from = clause
        if not spans and (is_try or useless) and not took_out:  # "changing the batch size didn't help"
            spans = [(fix_id, m.start(), m.end()) for fix_id, rx in words.tried_generic for m in rx.finditer(clause)
                     if not _GLOBAL_BATCH.search(clause, max(0, m.start() - 8), m.start())]
        if quote_from is clause:
            spans = _left_values(clause, spans, words)
            if not took_out:  # "how do I fix it without lowering the batch size?": kept as it is, not tried
                spans = [sp for sp in spans if not _KEPT_AS_IS.search(clause, 0, sp[1])]
        if is_change and not (is_try or useless or took_out or fits):  # "the X we used before": X did not change
            spans = [sp for sp in spans if not words.unchanged.search(clause[sp[2]:sp[2] + _UNCHANGED_AFTER])]
        if took_out:  # what the removal word itself names ("offload le, guandiao activation_checkpointing")
            spans = _taken_out(clause, spans, words, kb) or spans
        for fix_id in dict.fromkeys(f for f, _, _ in spans):
            _, start, end = next(sp for sp in spans if sp[0] == fix_id)
            reading = Reading(fix_id, [Clue(f"\u201c{_quote(quote_from, start, end)}\u201d", source)])
            if took_out:
                removed.setdefault(fix_id, reading)
                continue
            if fits and not useless:
                worked.setdefault(fix_id, reading)
                continue
            if is_try or useless:
                tried.setdefault(fix_id, reading)
            else:
                changed.setdefault(fix_id, reading)
            if useless:
                no_effect.setdefault(fix_id, reading)
        # (a question naming no setting - "was there a change that makes FSDP use more memory?" - says none did
        # nothing; "is recompute not taking effect?" still asks about one that did not apply)
        asks_other = _asks(clause, words) and not words.not_applied.search(clause)
        if useless and not took_out and not no_effect and words.settings.search(clause) and not asks_other:
            no_effect.setdefault("setting", Reading("setting", [Clue(f"\u201c{quote}\u201d", source)]))
        # "after updating verl": a framework that moved is a version change too
        software = _names_software(_ENV_NAME.sub(" ", clause), words) or any(
            literals.search(clause) for _, literals in words.lists.get("frameworks", [])) or (
            moved and _upgraded_to_a_version(clause, words))
        if moved and software:
            changed.setdefault("stack", Reading("stack", [Clue(f"\u201c{quote}\u201d", source)]))
    return (list(changed.values()), list(tried.values()), list(no_effect.values()), list(removed.values()),
            list(worked.values()))


# "without (lowering) the X", "bu jiangdi X": the setting right after is kept as it is (PixArt-sigma PR 102);
# "with and without X" tried it both ways
_KEPT_AS_IS = re.compile(r"(?:(?<!and )(?<!or )\b(?:without|w/o)\s+(?:\w+ing\s+)?(?:the\s+|my\s+|our\s+|a\s+)?|"
                         "\u4e0d(?:\u964d\u4f4e|\u51cf\u5c0f|\u8c03\u5c0f|\u6539|\u52a8)\\s*)$", re.IGNORECASE)


# a number with a unit is a size or a rate, not a version ("moved to 4.5 GB")
_UNIT_AFTER = re.compile(r"\s*(?:[KMGT]i?B|[KMGT]\b|%|x\b|times\b|seconds?\b|s\b)", re.IGNORECASE)


def _upgraded_to_a_version(clause: str, words: _Words) -> bool:
    """An upgrade word with a version number a few words after it ("after upgrading Lightning from 2.5.x to 2.6.0",
    Lightning-AI/pytorch-lightning#21611): what moved is software, whatever its name - the list of names can never
    hold every package, but nothing else is upgraded to "2.6.0"."""
    norm = _normal(clause)
    for _, end, _ in words.upgraded.spans(clause):
        for m in _VERSION.finditer(norm, end, min(len(norm), end + _UPGRADE_REACH)):
            if not _UNIT_AFTER.match(norm, m.end()):
                return True
    return False


_UPGRADE_REACH = 48  # characters after the upgrade word: "upgrading pytorch lightning from 2.5.x to 2.6.0"


def _names_software(text: str, words: _Words) -> bool:
    """The text names software that can change version: a version word, or a library beside a version number."""
    if words.versions.search(_software_words(text, words)):
        return True
    return bool(words.libraries is not None and words.libraries.search(text) and _VERSION.search(text))


def _software_words(text: str, words: _Words) -> str:
    """The text with the phrases that hold a version word and name no software blanked out (situation.yaml
    changes.not_versions: "CUDA OOM", "CUDA graphs"), positions kept."""
    if words.not_versions is None:
        return text
    for start, end, _ in words.not_versions.spans(text):
        text = text[:start] + " " * (end - start) + text[end:]
    return text


def _add_change(changed: list[Reading], reading: Reading) -> None:
    """A change read a second way (the words, then the versions compared) is still one change."""
    if not any(r.value == reading.value for r in changed):
        changed.append(reading)


def _worked_before(text: str, words: _Words) -> bool:
    """The same setup ran before.  "Same config" / "jiaoben wo mei gai" (I did not change the script) says so only
    beside something that moved (an upgrade, a version, a change): alone it says the published script runs as it is
    (cooper#6: "the repository script, unchanged, OOMs - did you run it like this?")."""
    spans = words.worked_before.spans(text)
    if not spans:
        return False
    unchanged = words.config_unchanged.spans(text) if words.config_unchanged is not None else []
    if any(not any(u0 <= s0 and s1 <= u1 for u0, u1, _ in unchanged) for s0, s1, _ in spans):
        return True  # "used to work", "zhiqian neng pao": said outright
    return bool(words.changed.search(text) or words.upgraded.search(text)
                or _names_software(text, words))


_SNAKE_CASE = re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b")  # snake_case names: use_remove_padding
_BESIDE = 6  # characters between a setting's name and the removal word that switches it off ("X guandiao", "disable X")
_SET_BEFORE = 24  # characters from a change word to the setting it moves ("when I increase per_device_...")


def _said_of(span: tuple[str, int, int], moves: list[tuple[int, int, Any]], clause: str) -> bool:
    """A change or fit word moves this named setting: right before its name, or between its name and its value
    ("X gaicheng 2"). A setting listed with its value in a pasted config ("kai le recompute, src_length 2048,
    per_device_train_batch_size 4") is stated, not changed: the change word there belongs to another setting."""
    value = _NUMBER_AFTER.match(clause, span[2])
    value_end = value.end() if value else span[2]
    return any(0 <= span[1] - end <= _SET_BEFORE or span[2] <= start < value_end
               for start, end in _in_clause(clause, moves))


def _in_clause(clause: str, spans: list[tuple[int, int, Any]]) -> list[tuple[int, int]]:
    """Word spans found in ``_normal(clause)`` placed back in the clause: where the word itself occurs nearest to
    its normalised place (the normal form pads, folds separators and drops articles, so offsets drift)."""
    low, out = clause.lower(), []
    for start, end, word in spans:
        hits = [m.start() for m in re.finditer(re.escape(str(word).strip()), low)] if str(word).strip() else []
        at = min(hits, key=lambda h: abs(h - (start - 1)), default=max(0, start - 1))
        out.append((at, at + (len(str(word).strip()) if hits else end - start)))
    return out


def _left_values(clause: str, spans: list[tuple[str, int, int]], words: _Words) -> list[tuple[str, int, int]]:
    """Drop the fixes named by a setting's old value: in "device_map="auto" gaicheng device_map="cuda:0"" (changed
    to) the key is set again after the change word, so the value before it is the one the user left, not tried."""
    if words.change_to is None or not spans:
        return spans
    for start, end, _ in words.change_to.spans(clause):
        after = _SETTING.match(clause[end:].lstrip())
        if after is None:
            continue
        key = re.split(r"\s*[=\uff1d]", after.group(0), maxsplit=1)[0].lstrip("-")
        left = [m for m in _SETTING.finditer(clause, 0, start) if m.group(0).lstrip("-").startswith(key)]
        if left:
            old_start, old_end = left[-1].span()
            return [sp for sp in spans if not (old_start <= sp[1] < old_end)]
    return spans


# a setting as people write it: an environment variable, a --flag or a key=value
_SETTING_TOKEN = re.compile(_ENV_NAME.pattern + "|" + _FLAG.pattern)
# an error's own hint at a debugging setting ("run with NCCL_DEBUG=INFO for details", "consider passing
# CUDA_LAUNCH_BLOCKING=1"): boilerplate of the library that raised it, not a setting the run depends on
_SETTING_HINT = re.compile(
    r"\((?:run|rerun|re-run)\s+with[^)]*\)|(?:consider passing|compile with|for debugging)[^.;\n]*", re.I)


def _setting_stated(sentences: list[str], words: _Words, sit: Situation) -> tuple[bool, list[str]]:
    """Whether the user names a setting they set, changed, tried, or that makes the error go away, or the crash's
    error names one (for a crash that is no memory failure, what that setting did in the process is the first
    check), and the environment variables so named (what that check prints).

    A set-word says a setting is named by itself ("I configured the NCCL transport"); a change / try / works-with
    word needs the setting written as one (a fix's words, an environment variable, a --flag, key=value)."""
    stated = any(r.value != "stack" for r in [*sit.changed, *sit.tried, *sit.worked_with])
    texts: list[str] = []
    for clause in sentences:
        clause = words.diagnostic_env.sub(" ", clause)  # "added NCCL_DEBUG=INFO, still nothing": a look, no setting
        set_word = bool(words.configured.search(clause))
        changed = any(rx.search(clause) for rx in (words.changed, words.tried, words.worked, words.no_effect))
        if set_word or (changed and (_SETTING_TOKEN.search(clause) or _SETTING.search(clause))):
            stated = True
            texts.append(clause)
    if sit.error:
        error = _SETTING_HINT.sub(" ", sit.error)
        stated = stated or bool(_SETTING_TOKEN.search(error))
        texts.append(error)
    names = [n for t in texts for n in _ENV_NAME.findall(t)]
    return stated, list(dict.fromkeys(names))[:_MAX_ENV_NAMED]


_MAX_ENV_NAMED = 6  # a check line, not a dump of every variable the message quotes


def _absent(clauses: list[str], kb: Knowledge, words: _Words, known: set[str]) -> list[Reading]:
    """Memory settings the user says are not on: a fix named right after "no" / "without" / meiyou kai (one word
    may stand between: "sets no Megatron recompute options") or right before "isn't set" / "is off" / meikai.
    Such a setting is the first lever to turn on, at its cost.  Recognizers leave some names alone (a bare
    "recompute" or PYTORCH_CUDA_ALLOC_CONF names no one fix); situation.yaml absent_generic says which fix such a
    name is when it is said to be off.  ``known``: fixes already read as taken out or as what made it fit."""
    found: dict[str, Reading] = {}
    for clause in clauses:
        if not words.absent_any.search(clause) or words.compared.search(clause):  # kai bu kai X: both ways, not off
            continue
        from .recognize import fix_recognizer  # only where a clause has a word that says something is off

        spans = [(m.ident, m.start, m.end) for m in fix_recognizer(kb).find(clause)]
        spans += [(fix_id, m.start(), m.end()) for fix_id, rx in words.absent_generic for m in rx.finditer(clause)]
        for fix_id, start, end in spans:
            if fix_id in found or fix_id in known or not _said_off(clause, start, end, words):
                continue
            found[fix_id] = Reading(fix_id, [Clue(f"\u201c{_quote(clause, start, end)}\u201d", "words")])
    return list(found.values())


def _said_off(clause: str, start: int, end: int, words: _Words) -> bool:
    """The words just before ``clause[start:end]`` (one word may stand between) end with an absent_before word, or
    those just after (one word may stand between) start with an absent_after word."""
    before = _normal(clause[:start]).rstrip()
    heads = (before, before.rsplit(" ", 1)[0] if " " in before.strip() else "")
    if any(h and (h.endswith(w) if not w.startswith(" ") else (" " + h).endswith(w))
           for h in heads for w in words.absent_before):
        return True
    after = _normal(clause[end:]).lstrip()
    tails = (after, after.split(" ", 1)[1] if " " in after.strip() else "")
    return any(t.startswith(w) and (not w[-1:].isascii() or t[len(w):len(w) + 1] in ("", " "))
               for t in tails for w in words.absent_after)
