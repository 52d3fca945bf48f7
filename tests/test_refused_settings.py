"""Settings Megatron-Core refuses are refused here too, in one line (adversarial review, issue 28 item 6).

``recompute_granularity=bogus`` (and a bogus recompute_method, cuda_graph_impl, cuda_graph_scope module, fp8
format or fp8 recipe) used to be estimated as if it were a run; Megatron-Core raises on each at startup, so the
estimate described nothing.  ``compare --at`` with a 5,000-digit number ended in exit 3.
"""

from __future__ import annotations

import pytest
from conftest import SHARED, SKILL
from memtune.cli import main
from memtune.inputs.config import ALLOWED_VALUES

CONFIG = SKILL / "examples" / "llama3-70b-sft-config.yaml"


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("memtune: error: ") and "\n" not in err and "internal error" not in err, err
    return err


@pytest.mark.parametrize("key, value, allowed", [
    ("recompute_granularity", "bogus", "full, selective"),
    ("recompute_method", "bogus", "uniform, block"),
    ("cuda_graph_impl", "bogus", "none, local, transformer_engine, full_iteration"),
    ("cuda_graph_scope", "[attn, bogus]", "attn, mlp, moe"),
    ("fp8", "bogus", "e4m3, hybrid"),
    ("fp8_recipe", "bogus", "delayed, tensorwise, mxfp8, blockwise, custom"),
    ("recompute_granularity", "FULL", "full, selective"),  # Megatron-Core compares exactly
])
@pytest.mark.parametrize("command", ["estimate", "check"])
def test_a_value_megatron_core_refuses_names_file_line_key_and_the_allowed_values(command, key, value, allowed,
                                                                                   tmp_path, capsys):
    text = CONFIG.read_text(encoding="utf-8").replace("  sequence_parallel: true\n",
                                                      f"  sequence_parallel: true\n  {key}: {value}\n")
    config = tmp_path / "run.yaml"
    config.write_text(text, encoding="utf-8")
    line = text.splitlines().index(f"  {key}: {value}") + 1
    assert main([command, "--config", str(config)]) == 2
    err = _one_line(capsys)
    bad = "bogus" if "bogus" in value else value
    assert f"{config}:{line}: model.{key}: '{bad}' is not one of" in err
    assert allowed in err and "Megatron-Core" in err


def test_an_override_and_a_megatron_lm_flag_are_checked_the_same_way(tmp_path, capsys):
    assert main(["estimate", "--config", str(CONFIG), "--set", "model.cuda_graph_impl=bogus"]) == 2
    assert "model.cuda_graph_impl: 'bogus' is not one of" in _one_line(capsys)
    script = tmp_path / "run.sh"
    script.write_text("torchrun pretrain_gpt.py --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
                      "--seq-length 4096 --micro-batch-size 1 --recompute-granularity full "
                      "--recompute-method bogus --recompute-num-layers 1\n", encoding="utf-8")
    assert main(["estimate", "--config", str(script)]) == 2
    assert f"{script}:1: --recompute-method: 'bogus' is not one of uniform, block" in _one_line(capsys)


def test_every_allowed_value_is_accepted_and_a_dumped_enum_is_read_by_its_name(tmp_path, capsys):
    from memtune.inputs.config import coerce

    for key, values in ALLOWED_VALUES.items():
        for value in values:
            coerce(key, [value] if key == "cuda_graph_scope" else value, "x")
    dumped = [{"_target_": "megatron.core.transformer.enums.CudaGraphScope", "_args_": [2]},
              {"_target_": "megatron.core.transformer.enums.CudaGraphModule", "_args_": [2]}, "CudaGraphScope.moe"]
    assert coerce("cuda_graph_scope", dumped, "x") == ["attn", "mlp", "moe"]
    assert main(["estimate", "--config", str(CONFIG), "--set", "model.recompute_granularity=selective"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("at", ["9" * 5000, "step:" + "9" * 5000, "9" * 20 + "us"])
def test_compare_at_with_a_number_past_any_trace_is_one_line(at, capsys):
    snapshots = SHARED / "fixtures" / "snapshots"
    if not snapshots.is_dir():
        pytest.skip("../shared is not beside this checkout")
    a = snapshots / "cs336-a2-memory_ctx128_forward.pickle"
    b = snapshots / "cs336-a2-memory_ctx128_fullstep.pickle"
    assert main(["compare", str(a), str(b), "--at", at]) == 2
    err = _one_line(capsys)
    assert "--at" in err and "past any trace" in err and len(err) < 300


def test_compare_at_is_checked_before_the_snapshots_are_read(snapshot_files, capsys):
    pickles = sorted(p for p in snapshot_files.values() if str(p).endswith(".pickle"))
    assert main(["compare", str(pickles[0]), str(pickles[0]), "--at", "step:" + "9" * 5000]) == 2
    assert "past any trace" in _one_line(capsys)
