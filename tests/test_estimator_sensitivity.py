"""``memtune estimate`` says how far each assumed setting moves the peak (issue 25: "assumed fp8_param_gather off; on:
-6.1 GiB"): the other value is estimated, and what moves the peak by more than estimator.yaml sensitivity-share of
it is reported, largest move first."""

from __future__ import annotations

import json

from memtune.cli import main

LAYOUT_ONLY = ["--model", "llama3-70b", "--set", "tensor_model_parallel_size=4", "--set",
               "pipeline_model_parallel_size=4", "--set", "virtual_pipeline_model_parallel_size=5", "--set",
               "seq_length=4096", "--world-size", "32", "--global-batch-size", "32", "--gpu", "H100"]


def _estimate(capsys, *args):
    assert main(["estimate", *args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_an_assumed_distributed_optimizer_is_priced_the_other_way(capsys):
    d = _estimate(capsys, *LAYOUT_ONLY)
    dist = {s["setting"]: s for s in d["sensitivity"]}["use_distributed_optimizer"]
    assert dist["assumed"] is True and dist["other"] is False
    # the mechanism: off, every data-parallel rank keeps the whole optimizer state of its stage (DP 2 here)
    optimizer = next(s for s in d["stages"] if s["pp_rank"] == d["peak_stage"])["optimizer_bytes"]
    assert abs(dist["delta_bytes"] - optimizer) < 0.01 * optimizer
    moves = [abs(s["delta_bytes"]) for s in d["sensitivity"]]
    assert moves == sorted(moves, reverse=True)


def test_what_the_run_states_is_not_an_assumption(capsys):
    d = _estimate(capsys, *LAYOUT_ONLY, "--set", "use_distributed_optimizer=true", "--set", "sequence_parallel=true")
    assert not {s["setting"] for s in d["sensitivity"]} & {"use_distributed_optimizer", "sequence_parallel"}


def test_an_unstated_fp8_parameter_gather_is_priced_in_an_fp8_run(capsys):
    d = _estimate(capsys, *LAYOUT_ONLY, "--set", "fp8=hybrid")
    gather = next(s for s in d["sensitivity"] if s["setting"] == "fp8_param_gather")
    assert gather["assumed"] is None and gather["other"] is True and gather["delta_bytes"] < 0
    # without FP8 the setting moves nothing, so it is not reported
    d = _estimate(capsys, *LAYOUT_ONLY)
    assert "fp8_param_gather" not in {s["setting"] for s in d["sensitivity"]}


def test_the_text_answer_says_it_in_both_languages(capsys):
    assert main(["estimate", *LAYOUT_ONLY]) == 0
    assert "Assumed use_distributed_optimizer on; off, the peak would be" in capsys.readouterr().out
    assert main(["estimate", *LAYOUT_ONLY, "--lang", "zh"]) == 0
    assert "假设 use_distributed_optimizer 为开；若为关" in capsys.readouterr().out
