"""A plan lists what its non-layout choices change besides memory and throughput (issue 9): checkpoint format,
host memory, the constraints an option brings."""

from __future__ import annotations

import contextlib
import io

from memtune import cli, knowledge

KB = knowledge.load()
# Override keys that change something a user must know beyond speed and memory.
SIDE_EFFECT_KEYS = ("checkpoint.", "optimizer.optimizer_cpu_offload=true", "model.cpu_offloading=true",
                    "optimizer.use_distributed_optimizer=false")


def _options():
    from memtune.planner.options import load

    return [opt for group in load(KB).options.values() for opt in group]


def test_every_option_with_a_side_effect_says_what_it_changes():
    rows = {row["id"]: row for group in KB.tables["costs"]["options"].values() for row in group}
    for opt in _options():
        if any(o.startswith(SIDE_EFFECT_KEYS) for o in opt.overrides):
            text = rows[opt.id].get("consequences")
            assert text and text["en"] and text["zh"], opt.id


def test_a_plan_with_megatron_fsdp_names_the_checkpoint_format():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["plan", "--model", "llama3-70b", "--gpu", "H100", "--gpus", "64", "--seq-length", "8192",
                         "--global-batch-size", "256", "--top", "400"]) == 0
    text = out.getvalue()
    sections = text.split("\n### ")[1:]
    fsdp = [s for s in sections if "megatron-fsdp" in s.split("\n", 1)[0]]
    plain = [s for s in sections if "megatron-fsdp" not in s.split("\n", 1)[0] and "offload" not in s.split("\n", 1)[0]]
    assert fsdp and all("fsdp_dtensor" in s.split("Bridge overrides")[0] for s in fsdp)
    assert plain and not any("Also changes" in s for s in plain)
