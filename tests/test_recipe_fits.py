"""benchmarks/recipe_fits.py: every Bridge recipe's own config reaches the estimator, and its layout strings read."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import recipe_fits  # noqa: E402
from benchmarks.recipe_agreement import load  # noqa: E402


def test_python_list_layouts_become_megatron_strings():
    """Bridge writes DeepSeek-V3's layout as a Python list of stages; Megatron-Core's string has one '|' per stage."""
    text = "[[embedding]+[decoder]*4] + [[decoder]*4]*14 + [[decoder]+[mtp]+[loss]]  (16 stages = PP4*VP4)"
    layout = recipe_fits.layout_string(text)
    stages = layout.split("|")
    assert len(stages) == 16
    assert stages[0] == "Etttt" and stages[-1] == "tmL" and set(stages[1:-1]) == {"tttt"}
    assert layout.count("t") == 61  # DeepSeek-V3's decoder layers
    assert recipe_fits.layout_string("Et|(tt|)*30mL") == "Et|(tt|)*30mL"
    assert recipe_fits.layout_string(None) is None


def test_every_recipe_is_estimated_and_counted_only_when_it_ran_as_published():
    """No recipe is lost to a refused setting (a benchmark that silently skips cases would look better than it is),
    and a recipe whose published rows used another layout is shown but not counted."""
    usable, _ = load(None)
    rows = [recipe_fits.evaluate(r) for r in usable]
    assert len(rows) >= 20
    assert [r["id"] for r in rows if r["status"] != "ok"] == []
    assert all(r["ratio"] > 0 and r["capacity_gib"] > 0 for r in rows)
    ran = {r["id"]: r["ran"] for r in rows}
    assert ran["llama31-405b-pretrain-b200-128gpu-fp8cs"] is False  # published with TP4 PP8 CP2 VP8, not the recipe
    assert ran["llama3-70b-sft-h100-32gpu-fp8cs"] is True
    summary = recipe_fits.render(rows).splitlines()[-1]
    assert f"of {sum(ran.values())} that ran as published" in summary
