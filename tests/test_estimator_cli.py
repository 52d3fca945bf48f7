"""``memtune estimate`` end to end: sources, formats, modes and bad input."""

from __future__ import annotations

import json

import pytest
from memtune.cli import main

LAYOUT = ["--model", "llama3-8b", "--set", "tensor_model_parallel_size=2", "--set", "pipeline_model_parallel_size=2",
          "--set", "sequence_parallel=true", "--set", "seq_length=4096", "--set", "use_distributed_optimizer=true",
          "--world-size", "16", "--global-batch-size", "64"]


def run(capsys, *args):
    code = main(["estimate", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_has_every_stage_and_the_summary(capsys):
    code, out, _ = run(capsys, *LAYOUT, "--format", "json", "--gpu", "H100")
    assert code == 0
    d = json.loads(out)
    assert [s["pp_rank"] for s in d["stages"]] == [0, 1]
    assert d["layout"]["dp"] == 4 and d["layout"]["num_microbatches"] == 16
    assert d["summary"]["peak_bytes"] == d["peak_bytes"] and d["summary"]["capacity_ratio"] > 0
    assert d["gpu"]["capacity_bytes"] > 70e9


def test_markdown_table_and_zh(capsys):
    code, out, _ = run(capsys, *LAYOUT)
    assert code == 0 and out.startswith("## ") and out.count("\n| ") >= 3
    code, out, _ = run(capsys, *LAYOUT, "--format", "text", "--lang", "zh")
    assert code == 0 and "假设" in out


def test_bridge_mode(capsys):
    code, out, _ = run(capsys, *LAYOUT, "--mode", "bridge", "--format", "json")
    d = json.loads(out)
    assert code == 0 and d["mode"] == "bridge"
    assert d["bridge"]["total_bytes"] == d["bridge"]["weight_and_optimizer_bytes"] + d["bridge"]["activation_bytes"]


def test_hf_config_and_section_overrides(capsys, tmp_path):
    hf = tmp_path / "config.json"
    hf.write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": 1024, "intermediate_size": 4096,
                              "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 4,
                              "vocab_size": 32000, "tie_word_embeddings": True}))
    code, out, _ = run(capsys, "--hf-config", str(hf), "--set", "model.seq_length=2048", "--dp", "2", "--format",
                       "json")
    assert code == 0
    assert json.loads(out)["parameters"]["total"] > 1e8


@pytest.mark.parametrize("args, message", [
    (["--model", "gpt-5", "--set", "seq_length=8"], "unknown model"),
    (["--model", "llama3-8b"], "seq_length"),
    (["--model", "llama3-8b", "--set", "seq_length=4096", "--set", "pipeline_model_parallel_size=5"], "divide"),
    (["--model", "llama3-8b", "--set", "no_such_field=1"], "--set"),
    (["--hf-config", "/nonexistent/config.json"], "no such file"),
])
def test_bad_input_exits_2_with_one_line(capsys, args, message):
    code, _, err = run(capsys, *args)
    assert code == 2 and message in err and err.count("\n") == 1


def test_text_estimate_draws_a_bar_per_stage_against_the_capacity(capsys):
    """In a terminal the picture is text: one bar per pipeline stage, the GPU's usable capacity marked |."""
    from conftest import SKILL
    from memtune import cli as memtune_cli

    config = SKILL / "examples" / "llama3-70b-sft-config.yaml"
    assert memtune_cli.main(["estimate", "--config", str(config), "--gpu", "H100", "--format", "text"]) == 0
    bar_lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  PP ")]
    assert len(bar_lines) == 4 and all("|" in line and "█" in line for line in bar_lines)
    assert memtune_cli.main(["estimate", "--config", str(config), "--format", "markdown"]) == 0
    assert "█" not in capsys.readouterr().out  # Markdown keeps the table only
