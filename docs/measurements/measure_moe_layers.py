#!/usr/bin/env python3
"""Measure activation memory kept for backward by Megatron-Core layers (local spec, no TE).

Single process, world size 1, TP=PP=EP=1, BF16.  For every configuration one JSON line per
measured target goes to $OUT/moe_layers.jsonl (written as soon as it is measured), and a table
is printed at the end.

Per row (bytes, from torch.cuda.memory_allocated / max_memory_allocated):
  kept_bytes              allocated after forward (output kept, graph alive) - allocated before
                          (inputs, params, rotary table already allocated)
  output_bytes            size of the forward output (part of kept_bytes)
  kept_minus_output_bytes kept_bytes - output_bytes  (= what autograd saved + side buffers)
  fwd_peak_bytes          max allocated during forward - allocated before (transient peak)
  bwd_peak_bytes          max allocated during backward - allocated just before backward
                          (the upstream grad tensor is allocated before that point)
  bwd_peak_from_fwd_bytes max allocated during backward - allocated before forward
  param_bytes / param_grad_bytes  parameters of the measured module / grads made in backward
                          (param grads are allocated inside backward, so they are part of
                          bwd_peak; subtract them for the activation-only view; the input's
                          .grad is also allocated in backward)
  extra.saved             storages autograd saved during forward (identity saved_tensors_hooks),
                          unique, excluding params and inputs, with the 12 largest
  extra.tokens            routed rows / min / max tokens per expert seen by the experts
  extra.ref               reference sizes (s*b*h bf16, b*heads*s*s bf16, routed rows ...)
Rows: moe_layer = whole TransformerLayer (unfused local attention keeps s^2 tensors!),
moe_block = MoELayer alone (router+dispatch+experts+combine), attention = SelfAttention alone.
Warm-up fwd+bwd at the largest MBS happens before any measurement of a built layer.

Environment:
  OUT                 output folder (default .)
  MEASURE_BUDGET_S    stop starting new configurations after this many seconds (default 300)
  MEASURE_JIT=compile keep Megatron's torch.compile jit_fuser (default: dynamo disabled, eager;
                      the fused SwiGLU / cross-entropy autograd Functions save the same tensors
                      in eager mode, only transient peaks differ)
  MEASURE_SMOKE=1     CPU smoke test with tiny dims and gloo (no memory numbers)
  MEASURE_ONLY=a,b    only run configs whose name contains one of these substrings
"""
import os

SMOKE = os.environ.get("MEASURE_SMOKE") == "1"
JIT_MODE = os.environ.get("MEASURE_JIT", "eager")
if JIT_MODE != "compile":
    # Megatron's jit_fuser is torch.compile for torch>=2.2; compiling dozens of dynamic-shape
    # variants would eat the time budget and needs a C compiler for triton.  Disable dynamo.
    os.environ["TORCHDYNAMO_DISABLE"] = "1"
os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "1")

import dataclasses
import gc
import json
import sys
import tempfile
import time
import traceback
import types
import warnings
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch
import torch.nn.functional as F

warnings.filterwarnings("ignore")

T0 = time.time()
BUDGET_S = float(os.environ.get("MEASURE_BUDGET_S", "300"))
OUT_DIR = os.environ.get("OUT") or "."
OUT_FILE = os.path.join(OUT_DIR, "moe_layers.jsonl")
ONLY = [s for s in os.environ.get("MEASURE_ONLY", "").split(",") if s]
DEVICE = torch.device("cpu") if SMOKE else torch.device("cuda", 0)
MiB = 1024 * 1024


def log(msg: str) -> None:
    print(f"[{time.time() - T0:7.1f}s] {msg}", flush=True)


# --------------------------------------------------------------------------------------------
# grouped_gemm shim: the legacy GroupedMLP (the only expert module with moe_act recompute
# outside TE) needs the `grouped_gemm` package.  If it is absent, provide a pure-torch
# replacement with the same autograd contract as grouped_gemm.ops.gmm: saves (a, b, batch_sizes)
# for backward, returns a new [tokens, n] tensor.
# --------------------------------------------------------------------------------------------
def _gmm_loop(a, b, batch_sizes, trans_b):
    sizes = [int(x) for x in batch_sizes.tolist()]
    n = b.shape[1] if trans_b else b.shape[2]
    out = a.new_empty(a.shape[0], n)
    start = 0
    for i, m in enumerate(sizes):
        if m:
            w = b[i].t() if trans_b else b[i]
            torch.matmul(a[start:start + m], w, out=out[start:start + m])
        start += m
    return out


class _ShimGMM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, batch_sizes, trans_b):
        ctx.save_for_backward(a, b, batch_sizes)
        ctx.trans_b = trans_b
        return _gmm_loop(a, b, batch_sizes, trans_b)

    @staticmethod
    def backward(ctx, grad):
        a, b, batch_sizes = ctx.saved_tensors
        grad = grad.contiguous()
        agrad = _gmm_loop(grad, b, batch_sizes, not ctx.trans_b)
        bgrad = torch.zeros_like(b)
        start = 0
        for i, m in enumerate(int(x) for x in batch_sizes.tolist()):
            if m:
                ai, gi = a[start:start + m], grad[start:start + m]
                bgrad[i] = gi.t() @ ai if ctx.trans_b else ai.t() @ gi
            start += m
        return agrad, bgrad, None, None


def install_grouped_gemm_shim() -> bool:
    try:
        import grouped_gemm  # noqa: F401
        return False
    except ImportError:
        pass
    mod = types.ModuleType("grouped_gemm")
    mod.ops = types.SimpleNamespace(
        gmm=lambda a, b, batch_sizes, trans_b=False: _ShimGMM.apply(a, b, batch_sizes, trans_b)
    )
    mod.backend = types.SimpleNamespace()
    mod.__shim__ = True
    sys.modules["grouped_gemm"] = mod
    return True


GG_SHIM = install_grouped_gemm_shim()


def install_cpu_smoke_patches() -> None:
    """Only for MEASURE_SMOKE=1 on a CPU-only torch: let CUDA-only calls in Megatron pass."""
    import contextlib

    class _Dummy:
        def __init__(self, *a, **k):
            pass

        def __getattr__(self, name):
            return lambda *a, **k: _Dummy()

    torch.cuda.current_device = lambda: "cpu"
    torch.cuda.Stream = _Dummy
    torch.cuda.Event = _Dummy
    torch.cuda.current_stream = lambda *a, **k: _Dummy()
    torch.cuda.stream = lambda *a, **k: contextlib.nullcontext()
    torch.cuda.synchronize = lambda *a, **k: None


if SMOKE:
    install_cpu_smoke_patches()

# Megatron imports (after the shim and the dynamo switch)
import megatron.core  # noqa: E402
from megatron.core import parallel_state, tensor_parallel  # noqa: E402
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec  # noqa: E402
from megatron.core.transformer.spec_utils import build_module  # noqa: E402
from megatron.core.transformer.transformer_config import TransformerConfig  # noqa: E402
from megatron.core.models.common.embeddings.rotary_pos_embedding import (  # noqa: E402
    RotaryEmbedding,
)

try:
    from megatron.core.fusions.fused_cross_entropy import fused_vocab_parallel_cross_entropy
except Exception as _e:  # pragma: no cover
    fused_vocab_parallel_cross_entropy = None
    FUSED_CE_IMPORT_ERROR = repr(_e)
else:
    FUSED_CE_IMPORT_ERROR = None

# megatron-core 0.16.1 without TransformerEngine: moe_utils.RouterGatingLinearFunction reads
# the module global `te_general_gemm`, which is only defined when TE imports -> NameError.
# Define it as None so the torch.mm fallback in the same function is taken.
import megatron.core.transformer.moe.moe_utils as _moe_utils  # noqa: E402

PATCHES = []
if not hasattr(_moe_utils, "te_general_gemm"):
    _moe_utils.te_general_gemm = None
    PATCHES.append("moe_utils.te_general_gemm=None (missing without TE)")

# megatron-core 0.16.1 without TE: CheckpointWithoutOutput(fp8=False) sets self.fp8 = (fp8 is
# not None) == True, so CheckpointWithoutOutputFunction always calls TE's FP8GlobalStateManager
# / activation_recompute_forward / fp8_autocast -> NameError (breaks moe_act recompute).
# Provide no-op stand-ins that behave like "fp8 disabled".
import contextlib  # noqa: E402

import megatron.core.tensor_parallel.random as _tp_random  # noqa: E402

if not getattr(_tp_random, "HAVE_TE", True):

    class _NoFP8:
        @staticmethod
        def is_fp8_enabled():
            return False

        @staticmethod
        def get_fp8_recipe():
            return None

    _tp_random.FP8GlobalStateManager = _NoFP8
    _tp_random.activation_recompute_forward = lambda *a, **k: contextlib.nullcontext()
    _tp_random.fp8_autocast = lambda *a, **k: contextlib.nullcontext()
    PATCHES.append("tensor_parallel.random: no-op FP8GlobalStateManager/"
                   "activation_recompute_forward/fp8_autocast (missing without TE)")

if SMOKE:  # CPU smoke test: the default causal mask is built with device="cuda"
    import megatron.core.fusions.fused_softmax as _fs
    import megatron.core.transformer.utils as _tu

    def _cpu_causal_mask(sq):
        return torch.triu(torch.ones(sq, sq), diagonal=1).bool()

    _tu.get_default_causal_mask = _fs.get_default_causal_mask = _cpu_causal_mask


# --------------------------------------------------------------------------------------------
# rows and output
# --------------------------------------------------------------------------------------------
@dataclass
class Row:
    name: str
    kind: str  # meta | moe_layer | moe_block | attention | dense_layer | dense_mlp | ce
    config: dict
    mbs: Optional[int] = None
    status: str = "ok"  # ok | error | unsupported | skipped_time
    error: Optional[str] = None
    before_bytes: Optional[int] = None
    kept_bytes: Optional[int] = None
    output_bytes: Optional[int] = None
    kept_minus_output_bytes: Optional[int] = None
    fwd_peak_bytes: Optional[int] = None
    bwd_peak_bytes: Optional[int] = None
    bwd_peak_from_fwd_bytes: Optional[int] = None
    after_bwd_minus_before_bytes: Optional[int] = None
    param_bytes: Optional[int] = None
    param_grad_bytes: Optional[int] = None
    fwd_ms: Optional[float] = None
    bwd_ms: Optional[float] = None
    extra: dict = field(default_factory=dict)
    elapsed_s: Optional[float] = None


ROWS = []
DIST_INFO: dict = {}


def emit(row: Row) -> None:
    row.elapsed_s = round(time.time() - T0, 1)
    ROWS.append(row)
    with open(OUT_FILE, "a") as f:
        f.write(json.dumps(dataclasses.asdict(row), default=str) + "\n")
        f.flush()
    mib = lambda v: "-" if v is None else f"{v / MiB:.0f}"  # noqa: E731
    msg = (f"{row.status:11s} {row.name:48s} mbs={row.mbs} kept={mib(row.kept_bytes)}MiB "
           f"kept-out={mib(row.kept_minus_output_bytes)} fwdpk={mib(row.fwd_peak_bytes)} "
           f"bwdpk={mib(row.bwd_peak_bytes)} pgrad={mib(row.param_grad_bytes)}")
    if row.error:
        msg += " | " + row.error.strip().splitlines()[-1][:200]
    log(msg)


def print_table() -> None:
    hdr = (f"{'name':50s} {'mbs':>3s} {'status':11s} {'kept':>8s} {'kept-out':>8s} "
           f"{'fwd_pk':>8s} {'bwd_pk':>8s} {'p_grad':>8s} {'saved':>8s} {'fwd_ms':>7s}  (MiB)")
    print("\n" + hdr + "\n" + "-" * len(hdr), flush=True)
    f = lambda v: "-" if v is None else f"{v / MiB:8.0f}"  # noqa: E731
    for r in ROWS:
        if r.kind == "meta":
            continue
        print(f"{r.name:50s} {str(r.mbs or ''):>3s} {r.status:11s} {f(r.kept_bytes)} "
              f"{f(r.kept_minus_output_bytes)} {f(r.fwd_peak_bytes)} {f(r.bwd_peak_bytes)} "
              f"{f(r.param_grad_bytes)} {f(r.extra.get('saved', {}).get('saved_unique_bytes'))} "
              f"{('-' if r.fwd_ms is None else f'{r.fwd_ms:7.1f}')}",
              flush=True)


def time_left() -> bool:
    return time.time() - T0 < BUDGET_S


# --------------------------------------------------------------------------------------------
# memory helpers
# --------------------------------------------------------------------------------------------
def sync() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def allocated() -> int:
    return torch.cuda.memory_allocated() if DEVICE.type == "cuda" else 0


def peak() -> int:
    return torch.cuda.max_memory_allocated() if DEVICE.type == "cuda" else 0


def reset_peak() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.reset_peak_memory_stats()


def cleanup() -> None:
    gc.collect()
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def module_param_bytes(module: torch.nn.Module) -> int:
    return sum(nbytes(p) for p in module.parameters())


def zero_grads(module: torch.nn.Module, *tensors) -> None:
    for p in module.parameters():
        p.grad = None
    for t in tensors:
        if isinstance(t, torch.Tensor):
            t.grad = None


class SavedTensorCounter:
    """Identity saved_tensors_hooks that records the storages autograd saves during forward.

    Bytes are storage sizes at save time, unique per storage, excluding parameters and the
    given inputs.  (Storages later freed by CheckpointWithoutOutput still count here; the
    memory_allocated delta shows the effect of the discard.)"""

    def __init__(self, exclude_ptrs: set):
        self.exclude = exclude_ptrs
        self.storages: dict = {}
        self.count = 0

    def pack(self, t):
        self.count += 1
        try:
            st = t.untyped_storage()
            ptr = st.data_ptr()
            if ptr not in self.exclude and ptr not in self.storages:
                self.storages[ptr] = (st.nbytes(), str(t.dtype).replace("torch.", ""),
                                      list(t.shape))
        except Exception:
            pass
        return t

    @staticmethod
    def unpack(t):
        return t

    def summary(self) -> dict:
        items = sorted(self.storages.values(), key=lambda v: -v[0])
        return {"saved_unique_bytes": sum(v[0] for v in items), "saved_calls": self.count,
                "saved_unique_storages": len(items),
                "saved_top": [{"bytes": b, "dtype": d, "shape": sh} for b, d, sh in items[:12]]}


def storage_ptrs(module: torch.nn.Module, inputs: tuple) -> set:
    ptrs = {p.untyped_storage().data_ptr() for p in module.parameters()}
    ptrs |= {t.untyped_storage().data_ptr() for t in inputs if isinstance(t, torch.Tensor)}
    return ptrs


def measure(row: Row, forward: Callable[[], torch.Tensor], module: torch.nn.Module,
            inputs: tuple) -> None:
    """Fill row with kept/peak numbers of one forward + backward.  inputs already allocated."""
    zero_grads(module, *inputs)
    cleanup()
    reset_peak()
    before = allocated()
    counter = SavedTensorCounter(storage_ptrs(module, inputs))
    t0 = time.time()
    with torch.autograd.graph.saved_tensors_hooks(counter.pack, counter.unpack):
        out = forward()
    sync()
    t1 = time.time()
    row.extra["saved"] = counter.summary()
    del counter
    after = allocated()
    fwd_peak = peak()
    row.before_bytes = before
    row.kept_bytes = after - before
    row.output_bytes = nbytes(out)
    row.kept_minus_output_bytes = row.kept_bytes - row.output_bytes
    row.fwd_peak_bytes = fwd_peak - before
    row.fwd_ms = round((t1 - t0) * 1000, 2)

    grad = torch.randn_like(out) * 1e-3
    sync()
    reset_peak()
    before_bwd = allocated()
    t2 = time.time()
    out.backward(grad)
    sync()
    row.bwd_ms = round((time.time() - t2) * 1000, 2)
    row.bwd_peak_bytes = peak() - before_bwd
    row.bwd_peak_from_fwd_bytes = peak() - before
    del out, grad
    sync()
    row.after_bwd_minus_before_bytes = allocated() - before
    row.param_bytes = module_param_bytes(module)
    row.param_grad_bytes = sum(nbytes(p.grad) for p in module.parameters() if p.grad is not None)
    row.extra["global_buffer_bytes"] = global_buffer_bytes()
    zero_grads(module, *inputs)


def global_buffer_bytes() -> int:
    try:
        buf = parallel_state.get_global_memory_buffer().buffer
        return sum(nbytes(t) for t in buf.values())
    except Exception:
        return -1


def warmup(forward: Callable[[], torch.Tensor], module: torch.nn.Module, inputs: tuple) -> None:
    """One fwd+bwd so cuBLAS workspaces, cached masks, aux-loss tracker are allocated."""
    out = forward()
    out.backward(torch.ones_like(out))
    del out
    zero_grads(module, *inputs)
    cleanup()


def error_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-3000:]


# --------------------------------------------------------------------------------------------
# model pieces
# --------------------------------------------------------------------------------------------
QWEN3_30B = dict(hidden_size=2048, num_attention_heads=32, num_query_groups=4, kv_channels=128,
                 ffn_hidden_size=6144, num_moe_experts=128, moe_router_topk=8,
                 moe_ffn_hidden_size=768, seq=4096, rotary_base=1000000)
LLAMA8B = dict(hidden_size=4096, num_attention_heads=32, num_query_groups=8, kv_channels=128,
               ffn_hidden_size=14336, seq=4096, rotary_base=500000)
VOCAB = 151936
if SMOKE:
    QWEN3_30B = dict(hidden_size=64, num_attention_heads=4, num_query_groups=2, kv_channels=16,
                     ffn_hidden_size=96, num_moe_experts=8, moe_router_topk=2,
                     moe_ffn_hidden_size=32, seq=32, rotary_base=1000000)
    LLAMA8B = dict(hidden_size=64, num_attention_heads=4, num_query_groups=2, kv_channels=16,
                   ffn_hidden_size=112, seq=32, rotary_base=500000)
    VOCAB = 1000


def make_config(dims: dict, moe: Optional[dict] = None, recompute: Optional[list] = None
                ) -> TransformerConfig:
    kw = dict(
        num_layers=1,
        hidden_size=dims["hidden_size"],
        num_attention_heads=dims["num_attention_heads"],
        num_query_groups=dims["num_query_groups"],
        kv_channels=dims["kv_channels"],
        ffn_hidden_size=dims["ffn_hidden_size"],
        normalization="RMSNorm",
        layernorm_epsilon=1e-6,
        gated_linear_unit=True,
        activation_func=F.silu,
        add_bias_linear=False,
        add_qkv_bias=False,
        qk_layernorm=bool(moe),
        bf16=True,
        params_dtype=torch.bfloat16,
        attention_dropout=0.0,
        hidden_dropout=0.0,
        bias_activation_fusion=True,  # Megatron's fused (weighted) SwiGLU autograd Function
        masked_softmax_fusion=False,  # needs compiled kernels
        bias_dropout_fusion=False,
        apply_rope_fusion=False,
        persist_layer_norm=False,
        gradient_accumulation_fusion=False,
        use_cpu_initialization=SMOKE,
        tensor_model_parallel_size=1,
        pipeline_model_parallel_size=1,
        sequence_parallel=False,
    )
    if recompute:
        kw.update(recompute_granularity="selective", recompute_modules=list(recompute))
    if moe:
        kw.update(
            num_moe_experts=dims["num_moe_experts"],
            moe_router_topk=dims["moe_router_topk"],
            moe_ffn_hidden_size=dims["moe_ffn_hidden_size"],
            expert_model_parallel_size=1,
            moe_token_dispatcher_type=moe["dispatcher"],
            moe_grouped_gemm=moe["grouped"],
            moe_router_load_balancing_type="aux_loss",
            moe_aux_loss_coeff=1e-3,
            moe_router_force_load_balancing=moe["force_lb"],
            moe_permute_fusion=False,
        )
    return TransformerConfig(**kw)


def build_layer(cfg: TransformerConfig, num_experts: Optional[int], grouped: bool,
                qk_layernorm: bool) -> torch.nn.Module:
    spec = get_gpt_layer_local_spec(num_experts=num_experts, moe_grouped_gemm=grouped,
                                    qk_layernorm=qk_layernorm, normalization="RMSNorm")
    layer = build_module(spec, config=cfg, layer_number=1)
    # torch.nn.RMSNorm is built in fp32 on CPU; Megatron's Float16Module casts all to bf16.
    layer = layer.to(device=DEVICE).bfloat16()
    layer.train()
    return layer


def make_rope(dims: dict) -> torch.Tensor:
    rope = RotaryEmbedding(kv_channels=dims["kv_channels"], rotary_percent=1.0,
                           rotary_base=dims["rotary_base"], use_cpu_initialization=SMOKE)
    return rope(dims["seq"]).to(DEVICE)


def hidden_input(dims: dict, mbs: int) -> torch.Tensor:
    return torch.randn(dims["seq"], mbs, dims["hidden_size"], device=DEVICE,
                       dtype=torch.bfloat16, requires_grad=True)


def use_fused_weighted_swiglu(layer: torch.nn.Module) -> None:
    """Legacy GroupedMLP applies a jit_fuser'd plain function (eager: saves extra
    intermediates); TEGroupedMLP with bias_activation_fusion uses the weighted SwiGLU autograd
    Function.  Use the latter so the grouped rows mirror the TE grouped-GEMM path."""
    from megatron.core.fusions.fused_bias_swiglu import weighted_bias_swiglu_impl

    experts = layer.mlp.experts
    experts.activation_func_with_probs = (
        lambda x, probs: weighted_bias_swiglu_impl(x, None, probs))


def tokens_per_expert_hook(store: dict):
    def hook(module, args, kwargs):
        tpe = args[1] if len(args) > 1 else kwargs.get("tokens_per_expert")
        if tpe is not None:
            t = torch.as_tensor(tpe).float()
            store.update(routed_tokens=int(t.sum()), max_tokens_per_expert=int(t.max()),
                         min_tokens_per_expert=int(t.min()), permuted_rows=int(args[0].shape[0]))
    return hook


def ref_sizes(dims: dict, mbs: int) -> dict:
    s, h = dims["seq"], dims["hidden_size"]
    a = dims["num_attention_heads"]
    d = {"sbh_bf16_bytes": s * mbs * h * 2, "s2_per_head_bf16_bytes": mbs * a * s * s * 2}
    if "num_moe_experts" in dims:
        k, f = dims["moe_router_topk"], dims["moe_ffn_hidden_size"]
        d.update(routed_rows=s * mbs * k, routed_h_bf16_bytes=s * mbs * k * h * 2,
                 routed_ffn_bf16_bytes=s * mbs * k * f * 2,
                 router_logits_fp32_bytes=s * mbs * dims["num_moe_experts"] * 4)
    return d


# --------------------------------------------------------------------------------------------
# configurations
# --------------------------------------------------------------------------------------------
def run_moe_config(name: str, moe: dict, recompute: Optional[list], mbs_list, measure_attn: bool,
                   measure_block: bool = True) -> None:
    dims = QWEN3_30B
    cfg_dict = dict(model="qwen3_30b_a3b_layer", **dims, **moe, recompute_granularity=(
        "selective" if recompute else None), recompute_modules=recompute,
        expert_impl=("GroupedMLP(legacy)" + ("+grouped_gemm_shim" if GG_SHIM else "")
                     + "+fused_weighted_swiglu") if moe["grouped"] else "SequentialMLP",
        jit=JIT_MODE, spec="get_gpt_layer_local_spec", attention="DotProductAttention(unfused)",
        moe_aux_loss_coeff=1e-3, moe_router_load_balancing_type="aux_loss",
        moe_permute_fusion=False, bias_activation_fusion=True)
    try:
        cfg = make_config(dims, moe=moe, recompute=recompute)
    except Exception as exc:  # e.g. moe_act recompute without grouped gemm
        emit(Row(name=name, kind="moe_layer", config=cfg_dict, status="unsupported",
                 error=error_text(exc)))
        return
    layer = None
    try:
        layer = build_layer(cfg, dims["num_moe_experts"], moe["grouped"], qk_layernorm=True)
        if moe["grouped"]:
            use_fused_weighted_swiglu(layer)
        cfg_dict["experts_class"] = type(layer.mlp.experts).__name__
        cfg_dict["dispatcher_class"] = type(layer.mlp.token_dispatcher).__name__
        cfg_dict["norm_class"] = type(layer.input_layernorm).__name__
        tpe: dict = {}
        layer.mlp.experts.register_forward_pre_hook(tokens_per_expert_hook(tpe), with_kwargs=True)
        rope = make_rope(dims)
        log(f"built {name}: {cfg_dict['experts_class']} / {cfg_dict['dispatcher_class']} "
            f"params={module_param_bytes(layer) / MiB:.0f}MiB")
        # Warm up at the largest MBS: DotProductAttention keeps a persistent global buffer of
        # b*heads*s*s elements that only grows; sizing it first keeps it out of every delta.
        x = hidden_input(dims, max(mbs_list))
        warmup(lambda: layer(x, attention_mask=None, rotary_pos_emb=rope)[0], layer, (x,))
        del x
    except Exception as exc:
        emit(Row(name=name, kind="moe_layer", config=cfg_dict, status="error",
                 error=error_text(exc)))
        del layer
        cleanup()
        return

    targets = [("layer", "moe_layer", lambda x: layer(x, attention_mask=None,
                                                       rotary_pos_emb=rope)[0], layer)]
    if measure_block:
        targets.append(("moe", "moe_block", lambda x: layer.mlp(x)[0], layer.mlp))
    if measure_attn:
        targets.append(("attn", "attention", lambda x: layer.self_attention(
            x, attention_mask=None, rotary_pos_emb=rope)[0], layer.self_attention))
    for mbs in mbs_list:
        for tname, kind, fwd, module in targets:
            row = Row(name=f"{name}/{tname}", kind=kind, config=cfg_dict, mbs=mbs,
                      extra={"ref": ref_sizes(dims, mbs)})
            if not time_left():
                row.status = "skipped_time"
                emit(row)
                continue
            try:
                x = hidden_input(dims, mbs)
                tpe.clear()
                measure(row, lambda: fwd(x), module, (x,))
                if kind != "attention":
                    row.extra["tokens"] = dict(tpe)
                del x
            except Exception as exc:
                row.status, row.error = "error", error_text(exc)
            zero_grads(layer)
            cleanup()
            emit(row)
    del layer, rope
    cleanup()


def run_dense_control() -> None:
    dims = LLAMA8B
    name = "dense_llama8b_like"
    cfg_dict = dict(model=name, **dims, jit=JIT_MODE, spec="get_gpt_layer_local_spec",
                    attention="DotProductAttention(unfused)", bias_activation_fusion=True,
                    attention_softmax_in_fp32=None)
    layer = None
    try:
        cfg = make_config(dims)
        cfg_dict["attention_softmax_in_fp32"] = cfg.attention_softmax_in_fp32
        layer = build_layer(cfg, None, False, qk_layernorm=False)
        cfg_dict["norm_class"] = type(layer.input_layernorm).__name__
        rope = make_rope(dims)
        x = hidden_input(dims, 1)
        warmup(lambda: layer(x, attention_mask=None, rotary_pos_emb=rope)[0], layer, (x,))
        del x
    except Exception as exc:
        emit(Row(name=name, kind="dense_layer", config=cfg_dict, status="error",
                 error=error_text(exc)))
        del layer
        cleanup()
        return
    targets = [
        ("layer", "dense_layer", lambda x: layer(x, attention_mask=None, rotary_pos_emb=rope)[0],
         layer),
        ("attn", "attention", lambda x: layer.self_attention(
            x, attention_mask=None, rotary_pos_emb=rope)[0], layer.self_attention),
        ("mlp", "dense_mlp", lambda x: layer.mlp(x)[0], layer.mlp),
    ]
    for tname, kind, fwd, module in targets:
        row = Row(name=f"{name}/{tname}", kind=kind, config=cfg_dict, mbs=1,
                  extra={"ref": ref_sizes(dims, 1)})
        try:
            x = hidden_input(dims, 1)
            measure(row, lambda: fwd(x), module, (x,))
            del x
        except Exception as exc:
            row.status, row.error = "error", error_text(exc)
        cleanup()
        emit(row)
    del layer, rope
    cleanup()


class _Identity(torch.nn.Module):
    pass


def run_ce_control() -> None:
    s, b, v = QWEN3_30B["seq"], 1, VOCAB
    tp_group = parallel_state.get_tensor_model_parallel_group()
    variants = [("ce_vocab_parallel", lambda lg, tg: tensor_parallel.vocab_parallel_cross_entropy(
        lg, tg))]
    if fused_vocab_parallel_cross_entropy is not None:
        variants.append(("ce_fused_native", lambda lg, tg: fused_vocab_parallel_cross_entropy(
            lg, tg, tp_group)))
    else:
        emit(Row(name="ce_fused_native", kind="ce", config={}, status="unsupported",
                 error=FUSED_CE_IMPORT_ERROR))
    dummy = _Identity()
    for name, fn in variants:
        cfg_dict = dict(seq=s, mbs=b, vocab=v, logits_dtype="bf16", layout="[s,b,V]", jit=JIT_MODE)
        row = Row(name=name, kind="ce", config=cfg_dict, mbs=b,
                  extra={"ref": {"logits_bf16_bytes": s * b * v * 2,
                                 "logits_fp32_bytes": s * b * v * 4}})
        try:
            logits = torch.randn(s, b, v, device=DEVICE, dtype=torch.bfloat16,
                                 requires_grad=True)
            target = torch.randint(0, v, (s, b), device=DEVICE)
            warmup(lambda: fn(logits, target), dummy, (logits,))
            measure(row, lambda: fn(logits, target), dummy, (logits,))
            del logits, target
        except Exception as exc:
            row.status, row.error = "error", error_text(exc)
        cleanup()
        emit(row)


def moe(dispatcher: str, force_lb: bool = False, grouped: bool = False) -> dict:
    return dict(dispatcher=dispatcher, force_lb=force_lb, grouped=grouped)


def config_plan():
    """(name, callable) in priority order; the time guard cuts from the end."""
    mbs_all = [1, 2] if SMOKE else [1, 2, 4]
    plan = [
        ("ce", run_ce_control),
        ("dense", run_dense_control),
        ("moe_seq_a2a_aux", lambda n: run_moe_config(n, moe("alltoall"), None, mbs_all, True)),
        ("moe_seq_a2a_aux_moeact", lambda n: run_moe_config(
            n, moe("alltoall"), ["moe_act"], mbs_all, False)),
        ("moe_grp_a2a_aux", lambda n: run_moe_config(
            n, moe("alltoall", grouped=True), None, mbs_all, False)),
        ("moe_grp_a2a_aux_moeact", lambda n: run_moe_config(
            n, moe("alltoall", grouped=True), ["moe_act"], mbs_all, False)),
        ("moe_seq_a2a_forcelb", lambda n: run_moe_config(
            n, moe("alltoall", force_lb=True), None, mbs_all, False)),
        ("moe_seq_ag_aux", lambda n: run_moe_config(n, moe("allgather"), None, mbs_all, False)),
        ("moe_seq_ag_forcelb", lambda n: run_moe_config(
            n, moe("allgather", force_lb=True), None, mbs_all, False)),
        ("moe_grp_a2a_forcelb_moeact", lambda n: run_moe_config(
            n, moe("alltoall", force_lb=True, grouped=True), ["moe_act"], mbs_all, False)),
        ("moe_grp_ag_aux_moeact", lambda n: run_moe_config(
            n, moe("allgather", grouped=True), ["moe_act"], mbs_all, False)),
    ]
    return plan


# --------------------------------------------------------------------------------------------
# setup and main
# --------------------------------------------------------------------------------------------
def init_distributed() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.set_device(DEVICE)
    backends = ["gloo"] if SMOKE else ["nccl", "gloo"]
    for i, backend in enumerate(backends):
        store_file = tempfile.NamedTemporaryFile(prefix="mc_pg_", delete=False).name
        os.unlink(store_file)
        try:
            torch.distributed.init_process_group(
                backend=backend, init_method=f"file://{store_file}", rank=0, world_size=1)
            DIST_INFO["backend"] = backend
            break
        except Exception as exc:
            DIST_INFO[f"{backend}_error"] = repr(exc)[:500]
            log(f"init_process_group({backend}) failed: {exc!r}")
            if torch.distributed.is_initialized():
                torch.distributed.destroy_process_group()
            if i == len(backends) - 1:
                raise
    parallel_state.initialize_model_parallel(
        tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
        expert_model_parallel_size=1, create_gloo_process_groups=False)
    if DEVICE.type == "cuda":
        tensor_parallel.model_parallel_cuda_manual_seed(1234)
    else:  # CPU smoke test: no CUDA RNG states to fork
        import contextlib

        import megatron.core.tensor_parallel.random as _tr

        tensor_parallel.get_cuda_rng_tracker().fork = lambda *a, **k: contextlib.nullcontext()
        _tr._get_cuda_rng_state = lambda *a, **k: None
        _tr._set_cuda_rng_state = lambda *a, **k: None
    torch.manual_seed(1234)


def meta_row() -> Row:
    info = dict(megatron_core=getattr(megatron.core, "__version__", "?"), torch=torch.__version__,
                python=sys.version.split()[0], jit=JIT_MODE, grouped_gemm_shim=GG_SHIM,
                patches=PATCHES, dist=DIST_INFO,
                smoke=SMOKE, budget_s=BUDGET_S,
                torchdynamo_disable=os.environ.get("TORCHDYNAMO_DISABLE"))
    if DEVICE.type == "cuda":
        prop = torch.cuda.get_device_properties(DEVICE)
        info.update(gpu=prop.name, gpu_total_bytes=prop.total_memory,
                    cuda=torch.version.cuda, capability=f"{prop.major}.{prop.minor}")
    return Row(name="meta", kind="meta", config=info)


def main() -> int:
    os.makedirs(OUT_DIR, exist_ok=True)
    open(OUT_FILE, "w").close()
    try:
        init_distributed()
    except Exception as exc:
        emit(Row(name="init", kind="meta", config={}, status="error", error=error_text(exc)))
        print_table()
        return 1
    emit(meta_row())
    for name, fn in config_plan():
        if ONLY and not any(o in name for o in ONLY):
            continue
        if not time_left():
            emit(Row(name=name, kind="skipped", config={}, status="skipped_time"))
            continue
        log(f"=== {name}")
        try:
            fn(name) if fn.__code__.co_argcount == 1 else fn()
        except Exception as exc:  # never stop the run
            emit(Row(name=name, kind="error", config={}, status="error", error=error_text(exc)))
        cleanup()
    print_table()
    log(f"wrote {OUT_FILE}")
    try:
        parallel_state.destroy_model_parallel()
        torch.distributed.destroy_process_group()
    except Exception:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
