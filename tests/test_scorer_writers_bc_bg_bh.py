"""How the scorer reads what writers bc (a runbook of commands with STOP / GO / SKIP gates), bg (what you did vs
what I'd do) and bh (the failure told as a story, then "So:") showed: written 2026-12-06 as the session's final unseen
batch, first read 71.0 / 60.0 / 88.3 % (verdict / id / violations) on d0611eb, with bf (a second runbook writer,
70.0 / 50.0 / 85.0 %); one class learned at the end of the session, the rest left for the next.

The class: an account told first, then "So: ..." / "所以：...": what came before is the story of the run (the
settings it has, what was tried), and the advice starts at the "So:".
"""

from __future__ import annotations


def test_an_account_told_first_advises_only_from_its_so(scorer):
    # bh-001 (writer bh, a story of the failure then "So:"): the story's settings describe the run
    text = ("Then the rollout phase begins. The optimizer is offloaded during inference, so this is the phase that "
            "sets your peak.\n\n"
            "So: first lower the micro-batch to 1, then compare the peak again.\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "reduce-micro-batch" and "optimizer-cpu-offload" not in answer.recommended


def test_a_you_vs_me_table_advises_from_its_second_column(scorer):
    # bg-009 (writer bg, "what you did vs what I'd do"): the first column restates the run
    text = ("| You | Me | Why |\n|---|---|---|\n"
            "| Ran with expandable_segments on | Resume with micro_batch_size halved (keep global_batch_size) "
            "| headroom |\n"
            "| Distributed optimizer | Keep it | not the problem |\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "reduce-micro-batch" and "expandable-segments" not in answer.recommended
