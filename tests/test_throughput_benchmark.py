"""benchmarks/throughput.py: the planner's throughput model against published runs, and ``planner.search.score``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from memtune import cli
from memtune.commands.plan import request_from_args
from memtune.planner.search import score

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import throughput  # noqa: E402
from benchmarks.recipe_agreement import load  # noqa: E402


@pytest.fixture(scope="module")
def recipes():
    return {r["id"]: r for r in load(None)[0]}


def test_cases_resolve(kb, recipes):
    """Every extra run starts from a known recipe, reads a published figure and converts it with a published row."""
    for c in yaml.safe_load(throughput.CASES.read_text(encoding="utf-8"))["cases"]:
        assert c["recipe"] in recipes, c["id"]
        if c.get("step_time_ms"):
            assert c["step_time_ms"] > 0 and c["source"]["url"].startswith("https://"), c["id"]
            continue
        assert kb.get("measurements", c["measurement"])[c["arm"]]["tflops_per_gpu"] > 0, c["id"]
        assert any(m.get("tokens_per_sec_per_gpu") for m in recipes[c["tokens_from"]]["measured"]), c["id"]


def test_fitted_on_names_runs_that_exist(kb, recipes):
    """A costs.yaml constant solved on a run names it, so the benchmark can report that run apart."""
    cases = {c["id"] for c in throughput.recipe_cases(list(recipes.values()))}
    cases |= {c["id"] for c in yaml.safe_load(throughput.CASES.read_text(encoding="utf-8"))["cases"]}
    measurements = {m["id"] for m in kb.tables["measurements"]["measurements"]}
    named = [(c["id"], run) for c in kb.tables["costs"]["costs"] for run in c.get("fitted_on") or []]
    assert named
    for cost, run in named:
        assert run in cases or run in recipes or run in measurements, (cost, run)


def test_score_is_the_factor_the_plan_ranks_the_layout_by(kb, recipes):
    """``score`` prices a config's own layout with the same costs the search ranks it by."""
    case = next(c for c in throughput.measured_cases(recipes, kb) if c["id"] == "pr3107-baseline")
    args = cli.build_parser().parse_args([*throughput.plan_args(case), "--top", "1"])
    request = request_from_args(args, kb)
    from memtune.planner.search import plan

    ref = plan(request, kb).reference
    scored = score(request, kb)
    assert ref is not None and scored is not None
    assert scored.relative_throughput == pytest.approx(ref.relative_throughput, rel=1e-12)
    assert scored.options["recompute"] == ref.recompute == "selective-core-attn"
    assert {r.cost for r in scored.reasons} == {r.cost for r in ref.reasons}


def test_a_config_without_a_layout_has_no_score(kb):
    args = cli.build_parser().parse_args(["plan", "--model", "llama3-8b", "--gpu", "H100", "--gpus", "8",
                                          "--seq-length", "8192", "--global-batch-size", "128"])
    assert score(request_from_args(args, kb), kb) is None


def test_benchmark_reports_fitted_runs_apart(capsys):
    """The runs a constant was solved on are counted apart, so the held-out error is not flattered by them."""
    assert throughput.main(["--only", "pr3107", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {r["id"]: r for r in data["rows"]}
    assert set(rows) == {"pr3107-baseline", "pr3107-pp8", "pr3107-tp8", "pr3107-recompute-mlp",
                         "pr3107-recompute-mlp-core-attn"}
    assert "host-bound" in rows["pr3107-tp8"]["fit"] and not rows["pr3107-pp8"]["fit"]
    families = {s["family"]: s for s in data["summary"]}
    assert families["fitted on"]["cases"] + families["held out"]["cases"] == families["all"]["cases"] == 5
    assert all(r["status"] == "ok" and r["predicted"] > 0 for r in rows.values())


def test_the_plans_error_band_is_the_models_measured_error(kb, recipes):
    """costs.yaml throughput-error is the held-out mean error this benchmark measures, per class: a change to the
    model that moves it must move what plans call indistinguishable."""
    cases = throughput.recipe_cases(list(recipes.values())) + throughput.measured_cases(recipes, kb)
    rows = [throughput.evaluate(c, kb, throughput.fitted_on(kb)) for c in cases]
    measured = throughput.bands(rows)
    stored = kb.get("costs", "throughput-error")["params"]
    assert set(measured) == set(stored) == {"dense", "moe"}
    for cls, value in measured.items():
        assert stored[cls] == pytest.approx(value, abs=0.0005), cls


def test_score_and_the_plans_reference_agree_when_vpp_is_unset(kb, recipes):
    """A config that sets PP but no VPP runs without interleaving: the plan's reference and ``score`` both price
    VPP 1 (a MoE recipe with PP 4 and no VPP)."""
    recipe = recipes["gpt-oss-120b-pretrain-h100-64gpu-bf16"]
    assert recipe["layout"]["pipeline_model_parallel_size"] > 1
    assert not recipe["layout"]["virtual_pipeline_model_parallel_size"]
    case = {"id": recipe["id"], "recipe": recipe, "set": [], "tokens": 1.0, "source": "", "moe": True}
    request = request_from_args(cli.build_parser().parse_args([*throughput.plan_args(case), "--top", "1"]), kb)
    from memtune.planner.search import plan

    ref, scored = plan(request, kb).reference, score(request, kb)
    assert ref is not None and scored is not None and ref.vpp == 1
    assert scored.relative_throughput == pytest.approx(ref.relative_throughput, rel=1e-12)
