"""How the scorer reads the misreadings writer n (issue 26, a dev batch read once before any change) showed.

One test per class, each built from a sentence of a real labelled answer (benchmarks/answers/<id>.yaml, named in
the test), with a boundary case beside it so that the reading cannot pass by ignoring the words altogether.
"""

from __future__ import annotations

NONE: dict = {"env": {}}


def test_a_zh_cue_after_the_setting_says_it_cannot_help(scorer):
    # n-004, n-012, n-017: "X 不用试" / "X 帮不上" / "X 也解决不了这部分"
    for text in ("- expandable_segments 不用试，它对常驻的优化器状态没有作用。\n",
                 "所以不是碎片，expandable_segments 帮不上。\n",
                 "- 没必要为此加卡，expandable_segments 也解决不了这部分。\n"):
        answer = scorer.read_markdown(text, NONE)
        assert "expandable-segments" not in answer.recommended
        assert "expandable-segments" in answer.avoided


def test_a_dont_ends_its_list_with_or(scorer):
    # n-011: one "don't" for three things, the last joined by "or"
    text = "**Don't** lower the micro-batch, add full recompute or add GPUs - training-side knobs only delay the OOM.\n"
    answer = scorer.read_markdown(text, NONE)
    assert not set(answer.recommended) & {"reduce-micro-batch", "full-recompute", "add-gpus"}
    # without the "or", the clause after the comma is the advice
    answer = scorer.read_markdown("Don't lower the micro-batch, add full recompute instead.\n", NONE)
    assert "full-recompute" in answer.recommended


def test_a_do_first_label_inside_a_paragraph_decides_the_first_fix(scorer):
    # n-024: the fix named first is not the first thing to do
    text = ("The fix will most likely be chunking the log-prob/entropy computation, but **do first**: confirm that "
            "the last stage really is the first rank to fail and not a cascade from another stage.\n")
    assert scorer.read_markdown(text, NONE).first_fix == "find-first-failing-rank"


def test_a_dash_after_a_short_label_is_a_label(scorer):
    # n-007: "**Do first** - confirm ..." then "**Then** - set the allocator"
    text = ("**Do first** - confirm what the failing B200/B300 ranks actually ran with:\n"
            "```bash\ntr '\\0' '\\n' < /proc/<trainer pid>/environ | grep PYTORCH_CUDA_ALLOC_CONF\n```\n\n"
            "**Then** - set the allocator for these GPUs:\n"
            "```python\ncfg.env_vars[\"PYTORCH_CUDA_ALLOC_CONF\"] = \"expandable_segments:True\"\n```\n")
    answer = scorer.read_markdown(text, NONE)
    assert answer.first_fix == "confirm-setting-applied"
    assert "expandable-segments" in answer.recommended


def test_a_fix_named_as_the_cause_is_not_advice(scorer):
    # n-003: "caused by sequence packing" explains the OOM
    text = "This is an activation-capacity problem caused by sequence packing, not something exotic.\n"
    assert "sequence-packing" not in scorer.read_markdown(text, NONE).recommended
    assert "sequence-packing" in scorer.read_markdown("Turn on sequence packing.\n", NONE).recommended


def test_an_exception_is_not_advice(scorer):
    # n-007: "it is on for all cases except Megatron FSDP / nccl_ub"
    text = "After #3781 expandable segments are on for all cases except Megatron FSDP / nccl_ub.\n"
    assert "megatron-fsdp" not in scorer.read_markdown(text, NONE).recommended


def test_framework_spellings_of_a_fix(scorer):
    # n-003: NeMo-RL's activation_checkpointing is full recompute; n-027: miles' --low-memory-resume
    text = "```yaml\npolicy:\n  megatron_cfg:\n    activation_checkpointing: true\n```\n"
    assert scorer.read_markdown(text, NONE).first_fix == "full-recompute"
    assert scorer.read_markdown("Add `--low-memory-resume` to the resumed run.\n", NONE).first_fix \
        == "memory-efficient-optimizer-load"
