"""How the scorer reads the misreadings that writers j, k and l (issue 26) showed, one test per class.

Each answer text is a sentence or block from a real labelled answer (benchmarks/answers/<id>.yaml, named in the
test); the scenario inputs are the ones that answer was written for, cut to the settings that matter.  The
scorer is the shipped one (knowledge/fixes.yaml and zh/fixes.yaml recognisers, grading.yaml), because these
classes are about what the knowledge base recognises as well as how an answer is read.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.score import Scorer  # noqa: E402

EXPANDABLE_ON = {"env": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}}


@pytest.fixture(scope="module")
def scorer() -> Scorer:
    return Scorer.from_kb()


# -- a setting the run already has is not a new recommendation -------------------------------------------------

def test_prose_about_a_setting_the_run_already_has_is_not_advice(scorer):
    # b-019: a recap of what the user runs, written as the setting itself
    text = "- tried TP1/EP8 and TP2/EP8, MBS 4 and MBS 2, with `expandable_segments:True`\n"
    assert "expandable-segments" not in scorer.read_markdown(text, EXPANDABLE_ON).recommended
    # without the inputs saying so, the same words are all the scorer has to go on
    assert "expandable-segments" in scorer.read_markdown(text, {"env": {}}).recommended


def test_an_export_in_prose_is_a_command_even_when_the_run_has_the_value(scorer):
    # c-027: set after CUDA initialised, the fix is exporting it where it takes effect
    text = "改法：在启动命令里先 `export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` 再 `torchrun ...`。\n"
    assert scorer.read_markdown(text, EXPANDABLE_ON).first_fix == "expandable-segments"


# -- several flags in one block: the fix is the setting whose value changes -------------------------------------

def test_a_parallel_size_written_lower_is_not_its_increase(scorer):
    # k-009: at TP8 PP4, "TP4 PP8" is a pipeline increase that keeps 32 GPUs, not a TP increase
    text = ("**Option A — go to PP8 (I'd start here).** On 32 GPUs that means TP4 PP8:\n\n"
            "```bash\n--tensor-model-parallel-size 4 --pipeline-model-parallel-size 8\n```\n")
    inputs = {"config": {"model": {"tensor_model_parallel_size": 8, "pipeline_model_parallel_size": 4}}}
    answer = scorer.read_markdown(text, inputs)
    assert answer.first_fix == "increase-pp"
    assert "increase-tp" not in answer.recommended


def test_a_companion_written_off_beside_the_fix_is_part_of_the_fix(scorer):
    # k-020: moe_pad_expert_input_to_capacity: false next to a capacity factor is token dropping, not against it
    text = ("## 方案一（我会先试这个）：限制每个 expert 的 token 数\n\n```yaml\nmodel:\n"
            "  moe_expert_capacity_factor: 1.25\n  moe_token_drop_policy: probs\n"
            "  moe_pad_expert_input_to_capacity: false\n```\n\n"
            "## 方案二：把整个 MoE 层纳入选择性重计算\n\n```yaml\nmodel:\n  recompute_granularity: selective\n"
            "  recompute_modules: [moe]\n```\n")
    answer = scorer.read_markdown(text, {"config": {"model": {"recompute_granularity": "selective"}}})
    assert answer.first_fix == "moe-token-drop"
    assert "moe-token-drop" not in answer.avoided
