"""A plan says how many layouts score what its first scores: the order among them is only the tie order, so an
answer that shows "layout 1" among 18 equal ones must not read as a recommendation of that one."""

from __future__ import annotations

import json
import math

import pytest
from memtune import knowledge
from memtune.cli import main
from memtune.estimator.models import preset
from memtune.inputs.gpu import lookup_gpu
from memtune.planner.search import PlanRequest, plan
from memtune.render.plan import to_markdown

# Llama3-8B on one GB200 NVL72 tray: every cost the model charges hides (DP inside NVLink, short layers graphed or
# not host-bound), so many layouts score 1.0
ARGS = ["plan", "--model", "llama3-8b", "--gpu", "GB200", "--gpus", "8", "--seq-length", "4096",
        "--global-batch-size", "128"]


def _request(kb, top):
    return PlanRequest(base=preset("llama3-8b", kb), gpu=lookup_gpu("GB200", kb), gpus=8, seq_length=4096,
                       global_batch_size=128, top=top)


@pytest.fixture(scope="module")
def every(kb):
    return plan(_request(kb, None), kb)


def test_all_counts_the_fitting_layouts_tied_with_the_first(every):
    scores = [lay.relative_throughput for lay in every.layouts]
    tied = sum(1 for s in scores if math.isclose(s, scores[0], rel_tol=1e-9))
    assert every.tie_scope == "fitting" and every.tied_with_first == tied > 1
    assert scores[tied] < scores[0]  # the block ends at the first lower score: ties, not near-ties
    assert all(math.isclose(s, scores[0], rel_tol=1e-9) for s in scores[:tied])


def test_top_counts_the_valid_block_which_holds_the_fitting_one(kb, every):
    top = plan(_request(kb, 3), kb)
    assert top.tie_scope == "valid"
    assert top.layouts[0].relative_throughput == every.layouts[0].relative_throughput
    assert top.tied_with_first >= every.tied_with_first  # every fitting tie is a valid one


@pytest.mark.parametrize("lang, words", [("en", "a convention, not a recommendation"), ("zh", "只是约定")])
def test_markdown_says_the_tie_order_is_not_a_recommendation(capsys, lang, words):
    assert main([*ARGS, "--top", "2", "--lang", lang]) == 0
    out = capsys.readouterr().out
    assert words in out and out.index(words) < out.index("### 1:")


def test_json_carries_the_count_and_its_scope(capsys):
    assert main([*ARGS, "--all", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    kb = knowledge.load()
    rows, at = data["all"]["rows"], data["all"]["columns"].index("relative_throughput")
    tied = sum(1 for r in rows if math.isclose(r[at], rows[0][at], rel_tol=1e-9))
    assert data["tied_with_first"] == {"count": tied, "among": "fitting"}
    # the sentence is there only for a tie: the same answer with layout 1 alone at its score has none
    alone = to_markdown({**data, "all": None, "tied_with_first": {"count": 1, "among": "fitting"}}, kb)
    assert "a convention, not a recommendation" not in alone and "### 1:" in alone


def test_html_page_carries_the_same_sentence(tmp_path, capsys):
    out = tmp_path / "plan.html"
    assert main([*ARGS, "--top", "2", "--html", str(out)]) == 0
    capsys.readouterr()
    assert "a convention, not a recommendation" in out.read_text(encoding="utf-8")
