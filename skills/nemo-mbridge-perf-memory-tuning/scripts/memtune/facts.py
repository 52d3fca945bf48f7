"""Typed facts: the one vocabulary shared by inputs, estimator, rules and renderer.

Every input parser returns one of these dataclasses; nothing else crosses a stage
boundary.  The rule engine never sees the classes: it sees ``Facts.flatten()``,
a flat ``{"log.reserved_unallocated_bytes": 3.2e10, ...}`` mapping whose keys
are the names that ``knowledge/rules.yaml`` conditions may use.  ``None`` means
"unknown" (the evidence did not say) and is different from ``False``.

The list of fact names with their meaning lives in ``knowledge/facts.yaml``;
``memtune kb validate`` checks every rule names only declared facts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any


@dataclass
class OomEvent:
    """One memory-failure (or crash) signal found in a log, with its numbers in bytes."""

    signature: str  # id from knowledge/signatures.yaml
    kind: str  # allocator | cuda | nccl | cublas | cudnn | triton | host | config-error | crash
    line: int  # 1-based line number where the signal starts
    text: str  # the (joined, prefix-stripped) message, clipped to a sane length
    rank: int | None = None
    format: str | None = None  # PyTorch message format id, allocator messages only
    requested_bytes: float | None = None
    capacity_bytes: float | None = None
    free_bytes: float | None = None
    allocated_bytes: float | None = None  # "allocated by PyTorch" / "already allocated"
    reserved_bytes: float | None = None  # reserved in total (old formats) or derived
    reserved_unallocated_bytes: float | None = None
    private_pool_bytes: float | None = None
    process_bytes: float | None = None  # "this process has X in use" (incl. non-PyTorch)
    other_process_bytes: float | None = None  # sum of "Process N has X" lines
    other_process_count: int = 0
    allowed_bytes: float | None = None
    truncated: bool = False
    constraint: str | None = None  # constraints.yaml id, for config-error events
    phase: str | None = None  # training phase read from the traceback / progress lines
    weak: bool = False  # consistent with memory exhaustion but with other common causes
    frames: list[str] = field(default_factory=list)  # its traceback, outermost first: "function code-line"
    entry: str | None = None  # the file of its traceback's '<module>' frame: the program that was running
    # a host kill's own figures as its line prints them (signatures.py TEXT_GROUPS): what the node had and held
    figures: dict[str, str] = field(default_factory=dict)


@dataclass
class MemoryReport:
    """The latest periodic memory report of one rank (Megatron-LM / Bridge ``report_memory``), in bytes.

    A list of these stays out of ``Facts.flatten`` (like ``events``): rules see the
    ``stats.*`` summary of them, not one fact per rank.
    """

    rank: int | None  # global rank the line names (or its launcher prefix); None = unknown
    line: int
    iteration: int | None = None
    allocated_bytes: float | None = None
    max_allocated_bytes: float | None = None
    reserved_bytes: float | None = None
    max_reserved_bytes: float | None = None
    active_bytes: float | None = None
    max_active_bytes: float | None = None
    inactive_bytes: float | None = None  # inactive split: free inside partly used blocks
    max_inactive_bytes: float | None = None
    device_used_bytes: float | None = None  # whole-device use (NVML), non-PyTorch memory included
    alloc_retries: int | None = None  # cudaMalloc retries after flushing the cache
    alloc_count: int | None = None


@dataclass
class LogFacts:
    """What a training log says, reduced to the numbers rules reason over."""

    provided: bool = False
    lines: int = 0
    events: list[OomEvent] = field(default_factory=list)
    has_memory_failure: bool = False
    oom_kind: str | None = None  # kind of the primary (first memory) event
    kinds: list[str] = field(default_factory=list)
    signatures: list[str] = field(default_factory=list)
    pytorch_format: str | None = None
    # numbers of the primary allocator event (bytes)
    requested_bytes: float | None = None
    capacity_bytes: float | None = None
    free_bytes: float | None = None
    allocated_bytes: float | None = None
    reserved_bytes: float | None = None
    reserved_unallocated_bytes: float | None = None
    private_pool_bytes: float | None = None
    process_bytes: float | None = None
    other_process_bytes: float | None = None
    other_process_count: int = 0
    # derived
    fragmentation_ratio: float | None = None  # reserved-unallocated / reserved
    non_pytorch_bytes: float | None = None  # process - reserved
    outside_cache_bytes: float | None = None  # capacity - free - reserved: the CUDA context, non-PyTorch and others
    graph_pool_ratio: float | None = None  # private pools / allocated
    rank: int | None = None  # rank of the first memory failure
    ranks_failed: list[int] = field(default_factory=list)
    phase: str | None = None  # init | forward | backward | optimizer | checkpoint-load | checkpoint-save
    host_oom: bool = False
    nccl_timeout: bool = False
    crash: bool = False  # a Python exception / fatal error that is not a memory failure
    first_error: str | None = None
    constraint_errors: list[str] = field(default_factory=list)  # constraints.yaml ids
    truncated: bool = False
    memory_reports: list[MemoryReport] = field(default_factory=list)  # latest per rank, ordered by rank
    theoretical_bytes: dict[str, float] = field(default_factory=dict)  # "Theoretical memory footprints" parts
    env: dict[str, str] = field(default_factory=dict)  # memory-relevant variables the log shows exported
    host_oom_confirmed: bool = False  # an OOM-killer / cgroup line, not only a SIGKILL or a shm bus error
    host_figures: dict[str, str] = field(default_factory=dict)  # the host kill's figures, as printed
    memory_failure_weak: bool = False  # every memory signal is ambiguous (SIGKILL, cuDNN status, ...)
    first_error_rank: int | None = None
    snapshot_path: str | None = None  # memory snapshot Bridge dumped on OOM
    frames: list[str] = field(default_factory=list)  # traceback of the primary failure: "function code-line"
    entry_script: str | None = None  # the program that traceback starts in (its '<module>' frame's file)
    cut_continuation: str | None = None  # a comment line that ends a pasted backslash-continued launch command
    report_series: list[tuple[int, float]] = field(default_factory=list)  # (iteration, allocated) of one rank


@dataclass
class EnvFacts:
    """Environment variables that change memory behaviour; None = not known."""

    provided: bool = False
    variables: dict[str, str] = field(default_factory=dict)
    alloc_conf: str | None = None  # effective PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF
    alloc_options: dict[str, str] = field(default_factory=dict)
    expandable_segments: bool | None = None
    allocator_backend: str | None = None
    nccl_graph_register: str | None = None
    avoid_record_streams: str | None = None
    alloc_conf_var: str | None = None  # the variable PyTorch reads alloc_conf from
    alloc_conf_ignored: list[str] = field(default_factory=list)  # other *ALLOC_CONF variables, set but not read
    alloc_conf_unknown: list[str] = field(default_factory=list)  # option names PyTorch does not know
    alloc_conf_invalid: list[str] = field(default_factory=list)  # option:value pairs PyTorch rejects


@dataclass(eq=False, repr=False)  # ~150 fields: generated __eq__/__repr__ cost start-up time and nothing uses them
class TrainingConfig:
    """A Bridge / Megatron-LM training layout normalised to one shape.

    Field names follow Megatron-Core / Bridge attribute names so that a rule,
    a fix's ``apply`` text and the user's config all say the same word.
    """

    provided: bool = False
    source: str | None = None  # bridge-yaml | overrides | megatron-args | question | hf-config
    model_name: str | None = None
    task: str | None = None  # pretrain | sft | lora
    gpu_arch: str | None = None  # the GPU's architecture (gpus.yaml arch): what Transformer Engine keeps of FP8 weights
    # parallelism
    tensor_model_parallel_size: int | None = None
    pipeline_model_parallel_size: int | None = None
    virtual_pipeline_model_parallel_size: int | None = None
    context_parallel_size: int | None = None
    expert_model_parallel_size: int | None = None
    expert_tensor_parallel_size: int | None = None
    data_parallel_size: int | None = None
    world_size: int | None = None
    sequence_parallel: bool | None = None
    account_for_embedding_in_pipeline_split: bool | None = None
    account_for_loss_in_pipeline_split: bool | None = None
    num_layers_in_first_pipeline_stage: int | None = None
    num_layers_in_last_pipeline_stage: int | None = None
    pipeline_model_parallel_layout: str | None = None
    # batch
    micro_batch_size: int | None = None
    global_batch_size: int | None = None
    seq_length: int | None = None
    # architecture
    num_layers: int | None = None
    hidden_size: int | None = None
    ffn_hidden_size: int | None = None
    num_attention_heads: int | None = None
    num_query_groups: int | None = None
    kv_channels: int | None = None
    vocab_size: int | None = None
    padded_vocab_size: int | None = None
    make_vocab_size_divisible_by: int | None = None
    gated_linear_unit: bool | None = None
    share_embeddings_and_output_weights: bool | None = None
    num_moe_experts: int | None = None
    moe_router_topk: int | None = None
    moe_ffn_hidden_size: int | None = None
    moe_shared_expert_intermediate_size: int | None = None
    moe_layer_freq: Any = None
    mtp_num_layers: int | None = None
    multi_latent_attention: bool | None = None
    q_lora_rank: int | None = None
    kv_lora_rank: int | None = None
    qk_head_dim: int | None = None
    qk_pos_emb_head_dim: int | None = None
    v_head_dim: int | None = None
    # read by the memory estimator (None = the Megatron-Core / Bridge default)
    should_pad_vocab: bool | None = None
    activation_func: str | None = None  # silu | gelu | squared_relu | quick_gelu
    normalization: str | None = None  # RMSNorm | LayerNorm
    add_bias_linear: bool | None = None
    add_qkv_bias: bool | None = None
    qk_layernorm: bool | None = None
    position_embedding_type: str | None = None  # rope | learned_absolute | yarn | none
    max_position_embeddings: int | None = None
    hidden_dropout: float | None = None
    attention_dropout: float | None = None
    attention_backend: str | None = None  # auto | flash | fused | unfused | local
    transformer_impl: str | None = None  # transformer_engine | local (local = unfused attention)
    moe_latent_size: int | None = None
    moe_grouped_gemm: bool | None = None
    moe_token_dispatcher_type: str | None = None
    moe_router_force_load_balancing: bool | None = None  # benchmark routing: every expert gets the same tokens
    moe_expert_capacity_factor: float | None = None  # tokens per expert capped at this x the balanced share
    moe_pad_expert_input_to_capacity: bool | None = None  # ... and padded up to it
    hybrid_layer_pattern: str | None = None  # Mamba hybrids: M mamba, * attention, - MLP, E MoE
    mamba_num_heads: int | None = None
    mamba_head_dim: int | None = None
    mamba_state_dim: int | None = None
    mamba_num_groups: int | None = None
    microbatch_group_size_per_vp_stage: int | None = None
    num_distributed_optimizer_instances: int | None = None
    gradient_accumulation_fusion: bool | None = None
    activation_offload_fraction: float | None = None
    # recompute / offload
    recompute_granularity: str | None = None  # None | selective | full
    recompute_method: str | None = None  # uniform | block
    recompute_num_layers: int | None = None
    recompute_modules: list[str] | None = None
    cpu_offloading: bool | None = None
    cpu_offloading_num_layers: int | None = None
    fine_grained_activation_offloading: bool | None = None
    offload_modules: list[str] | None = None
    optimizer_cpu_offload: bool | None = None
    optimizer_offload_fraction: float | None = None
    # optimizer / precision / DDP
    optimizer: str | None = None  # adam | sgd | muon ...
    use_distributed_optimizer: bool | None = None
    use_megatron_fsdp: bool | None = None
    use_torch_fsdp2: bool | None = None  # Megatron-LM --use-torch-fsdp2: torch fully_shard, params + grads + optimizer
    data_parallel_sharding_strategy: str | None = None
    use_precision_aware_optimizer: bool | None = None
    main_grads_dtype: str | None = None
    exp_avg_dtype: str | None = None
    exp_avg_sq_dtype: str | None = None
    grad_reduce_in_fp32: bool | None = None
    bf16: bool | None = None
    fp16: bool | None = None
    fp8: str | None = None  # e4m3 | hybrid | None
    fp8_recipe: str | None = None  # delayed | tensorwise | mxfp8 | blockwise
    fp8_param_gather: bool | None = None
    fp4: str | None = None  # e2m1 | None
    reuse_grad_buf_for_mxfp8_param_ag: bool | None = None
    cross_entropy_loss_fusion: bool | None = None
    cross_entropy_fusion_impl: str | None = None
    # CUDA graphs / comms
    cuda_graph_impl: str | None = None  # none | local | transformer_engine
    cuda_graph_scope: list[str] | None = None
    use_nccl_ub: bool | None = None
    tp_comm_overlap: bool | None = None
    overlap_moe_expert_parallel_comm: bool | None = None  # EP all-to-all overlap (comm_overlap section)
    # PEFT
    peft: str | None = None  # lora | dora | canonical_lora | None
    peft_dim: int | None = None
    peft_target_modules: list[str] | None = None
    sequence_parallel_input_regather: bool | None = None
    # checkpoint / data
    async_save: bool | None = None
    use_persistent_ckpt_worker: bool | None = None  # Bridge default True
    ckpt_format: str | None = None
    load_optim: bool | None = None
    num_workers: int | None = None
    record_memory_history: bool | None = None
    env_vars: dict[str, str] = field(default_factory=dict)  # Bridge ConfigContainer.env_vars (defaults)
    warnings: list[str] = field(default_factory=list)  # unknown / malformed keys, with location
    assumed: list[str] = field(default_factory=list)  # fields filled with Bridge recipe defaults, not stated
    approximate_shape: str | None = None  # preset whose shape stands in for a model the presets lack
    from_preset: list[str] = field(default_factory=list)  # architecture fields taken from a models.yaml preset


# The fields without which a config has no model shape to estimate (a model name fills them from its preset).
ARCHITECTURE_FIELDS = ("num_layers", "hidden_size", "num_attention_heads")


@dataclass
class GpuFacts:
    """The GPU the run used, from knowledge/gpus.yaml or the OOM message."""

    name: str | None = None
    capacity_bytes: float | None = None  # usable capacity as cudaMemGetInfo reports it
    nominal_gb: float | None = None
    arch: str | None = None  # hopper | blackwell | ampere | ada
    nvlink_domain: int | None = None  # GPUs in one NVLink domain (8 HGX, 72 NVL72, 1 PCIe-only)
    hardware: dict[str, Any] | None = None  # gpus.yaml hardware: dense TFLOP/s, link GB/s (the planner's traffic costs)
    inferred_from: str | None = None  # name | capacity | typed-size | unknown
    candidates: list[str] = field(default_factory=list)  # gpus.yaml ids that fit an inferred capacity
    count: int | None = None  # "8x H800": how many the user named with it
    typed: str | None = None  # the text as the user typed it, when it was not a known name alone
    assumption: str | None = None  # what the tool assumed to read it (said in the answer)


@dataclass
class QuestionFacts:
    """What the user's free-text question reveals."""

    provided: bool = False
    text: str = ""
    lang: str = "en"  # en | zh
    model_name: str | None = None
    model_size_b: float | None = None  # billions of parameters in a model name that is not a preset ("GPT-30B")
    model_vocab: int | None = None  # the named model family's vocabulary (vocabulary.yaml family_vocab)
    # the most elements of one tensor the user writes out: a shape "[19345706, 128]", "numel 2,476,250,368" or a
    # product "16*4096*8*4096" (past 2**31 a kernel indexing in int32 overflows)
    largest_numel: int | None = None
    # a batch size written bare ("batch size 4", "bs=8"), neither global nor per device: in the fine-tuning scripts
    # people run it is each GPU's (a global one is named so: "global batch size", "gbs")
    batch_size: int | None = None
    topics: list[str] = field(default_factory=list)  # e.g. lora, sequence-parallel, fp8, checkpoint
    memory_bytes: float | None = None  # what was in use when it failed, as quoted ("OOMs at 58.8 GB")
    # every figure in order: {bytes, role, at}; role is request | reserved-unallocated | reserved | allocated |
    # deficit | headroom | free | capacity | peak | oom | None; a card's size as stated also has nominal_gb
    memory_figures: list[dict[str, Any]] = field(default_factory=list)
    num_gpus: int | None = None
    gpu_name: str | None = None
    gpu_nominal_gb: float | None = None  # the card size the user states ("8x 80 GB GPUs", "A100-40GB"), named or not
    layout: dict[str, Any] = field(default_factory=dict)  # TrainingConfig field -> value (None = stated off)
    mentioned_fixes: list[str] = field(default_factory=list)  # fixes.yaml ids the question names (recognizers)
    env: dict[str, Any] = field(default_factory=dict)  # EnvFacts field -> value the user stated
    # settings, flags, environment variables, classes and files the user names: {text (with the value written beside
    # it, as typed), name, key (the name compared across spellings: no leading dashes, "-" as "_", lower case)}
    named: list[dict[str, Any]] = field(default_factory=list)
    # what RL framework keys say of the log-prob pass (vocabulary.yaml rl_batch): role -> value
    # (logprob_micro_batch, logprob_tokens, prompt_length, response_length, total_length)
    rl_batch: dict[str, int] = field(default_factory=dict)

    def figure(self, role: str, *, last: bool = False) -> float | None:
        """The bytes of the first (or last) memory figure the question quotes in ``role``."""
        found = [f["bytes"] for f in self.memory_figures if f.get("role") == role]
        return (found[-1] if last else found[0]) if found else None


@dataclass
class Facts:
    """Everything known about one situation; ``flatten`` feeds the rule engine."""

    log: LogFacts = field(default_factory=LogFacts)
    env: EnvFacts = field(default_factory=EnvFacts)
    config: TrainingConfig = field(default_factory=TrainingConfig)
    gpu: GpuFacts = field(default_factory=GpuFacts)
    question: QuestionFacts = field(default_factory=QuestionFacts)
    estimate: dict[str, Any] = field(default_factory=dict)  # estimator summary, see estimator/
    snapshot: dict[str, Any] = field(default_factory=dict)  # snapshot summary, see inputs/snapshot
    stats: dict[str, Any] = field(default_factory=dict)  # memory_stats summary, see inputs/stats
    derived: dict[str, Any] = field(default_factory=dict)  # cross-field facts, see derive.py

    def flatten(self) -> dict[str, Any]:
        """Dotted-name view for rule conditions; lists of dataclasses are left out."""
        flat: dict[str, Any] = {}
        for f in fields(self):
            _flatten_into(flat, f.name, vars(self)[f.name])
        return flat

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _flatten_into(flat: dict[str, Any], prefix: str, value: Any) -> None:
    if is_dataclass(value):
        for f in fields(value):
            _flatten_into(flat, f"{prefix}.{f.name}", vars(value)[f.name])
    elif isinstance(value, dict) and prefix.count(".") == 0:
        for key, sub in value.items():
            _flatten_into(flat, f"{prefix}.{key}", sub)
    elif isinstance(value, list) and value and is_dataclass(value[0]):
        return
    else:
        flat[prefix] = value
