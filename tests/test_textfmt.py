"""Placeholder filling in knowledge-base sentences."""

from memtune.textfmt import fill, human


def test_units():
    assert human(3 * 2**30, "gib") == "3.00 GiB"
    assert human(189.91 * 2**20, "gib") == "189.91 MiB"  # as PyTorch prints it: the user finds it in the message
    assert human(0, "gib") == "0.00 GiB"
    assert human(58.8e9, "gb") == "58.8 GB"
    assert human(20 * 2**20, "mib") == "20 MiB"
    assert human(0.375, "pct") == "37.5 %"
    assert human(18.0, "num") == "18" and human(16.5, "num") == "16.5"
    assert human(["a", "b"], "list") == "a, b"
    assert human(True, None) == "true"


def test_unknown_fact_renders_question_mark_not_a_number():
    assert fill("free {log.free_bytes|gib} of {gpu.name}", {"gpu.name": "H100"}) == "free ? of H100"


def test_text_without_placeholders_and_braces_in_code_survive():
    assert fill("set {\"a\": 1}", {}) == "set {\"a\": 1}"


def test_default_stands_in_for_an_unknown_fact_only():
    line = "model.pipeline_model_parallel_size={derived.next_pp|int:<2 x current PP>}"
    assert fill(line, {"derived.next_pp": 8}) == "model.pipeline_model_parallel_size=8"
    assert fill(line, {}) == "model.pipeline_model_parallel_size=<2 x current PP>"
