"""How the scorer reads the misreadings that writers ay (a chat transcript between the agent and the user), az (an
architecture decision record) and ba (a list of lines marked + - ? ~ = ! #) showed: written 2026-12-06, first read
57.9 / 45.0 / 73.3 % (verdict / id / violations) on 599d6c4, then learned.

Each answer text is a line or block from a real labelled answer (benchmarks/answers/<id>.yaml, named in the test).
The classes: in a pasted exchange the user's turns ("**User:** ...", "用户：...") restate or ask and only the agent's
turns advise, "Agent (final):" being the plan; an ADR's "Alternatives considered" are the options not taken, and a
label's value that opens on a verdict ("X — rejected: ...") argues against X; in a signed list each line's sign files
it ("+" do, "-" don't, "?" check, "~" only if / later, "=" keep, "!" cost, "#" cause), which Markdown would blur
("+" and "-" are both bullets to it, "#" a heading).
"""

from __future__ import annotations


def test_the_users_turns_in_a_transcript_advise_nothing(scorer):
    # ay-016
    text = ("**User:** So do I need expandable segments, a smaller batch, or more GPUs?\n\n"
            "**Agent (final):** None of those: convert with the target parallelism across the GPUs instead of "
            "loading the whole model on one device.\n")
    answer = scorer.read_markdown(text)
    assert not {"expandable-segments", "reduce-micro-batch", "add-gpus"} & set(answer.recommended)


def test_an_adrs_alternatives_are_the_options_not_taken(scorer):
    # az-007
    text = ("## Decision\nPin vLLM to 0.13.\n\n## Alternatives considered\n"
            "- **`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`** — rejected: incompatible with the sleep-mode "
            "CuMem allocator.\n"
            "- **Lower `--gpu-memory-utilization`** — rejected for the same reason.\n")
    answer = scorer.read_markdown(text)
    assert "expandable-segments" in answer.avoided and "expandable-segments" not in answer.recommended
    assert "shrink-colocated-engine" not in answer.recommended


def test_a_value_that_opens_on_rejected_argues_against_its_label(scorer):
    # az-014 shape, outside any section
    answer = scorer.read_markdown("Lower the micro batch — rejected: no training step runs in this script.\n")
    assert "reduce-micro-batch" in answer.avoided and answer.first_fix is None


def test_each_signed_line_is_filed_by_its_sign(scorer):
    # ba-005, ba-007
    text = ("# the model state does not fit\n"
            "! 70B x 16 B ~ 1.1 TB vs 32 x 80 GB\n"
            "? first: find the first rank that dies and where\n"
            "+ then offload optimizer state to CPU:\n"
            "  ```python\n  GeminiPlugin(precision=\"fp16\", offload_optim_frac=1.0)\n  ```\n"
            "~ only if offload is too slow: increase pipeline parallelism\n"
            "= micro-batch size 1: keep\n"
            "- expandable_segments: nothing here says fragmentation\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "find-first-failing-rank"
    assert "optimizer-cpu-offload" in answer.recommended and "increase-pp" not in answer.recommended
    assert "expandable-segments" in answer.avoided and "reduce-micro-batch" not in answer.recommended


def test_plain_bullets_and_headings_are_no_signs(scorer):
    text = "# Fix\n\n- Lower the micro-batch to 1.\n- Keep the global batch.\n"
    assert scorer.read_markdown(text).first_fix == "reduce-micro-batch"
