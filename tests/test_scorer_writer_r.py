"""How the scorer reads the misreadings writer r's answers showed (six answers for the new shard-preprocessing fix,
labelled blind to the scorer; first read: first-fix id 4/6, violations 5/6).

One test per class, each from a sentence of a real labelled answer (benchmarks/answers/<id>.yaml), with a boundary
case beside it so that the reading cannot pass by ignoring the words.
"""

from __future__ import annotations

NONE: dict = {"env": {}}  # no inputs beside the answer (the scorer fixture is conftest's)


def test_i_would_not_is_advice_against(scorer):
    # r-002: the answer rejects sharding in the first person
    text = ("I would not split the dataset into shards and blend them — you end up managing a dozen prefixes and "
            "weights in `--data-path` for what is really a worker-count problem.\n")
    answer = scorer.read_markdown(text, NONE)
    assert "shard-preprocessing" not in answer.recommended and "shard-preprocessing" in answer.avoided
    # "would not" about the run, not the advice: the fix after it is still recommended
    answer = scorer.read_markdown("Split the corpus into 8 shards; one index for all of it would not fit.\n", NONE)
    assert "shard-preprocessing" in answer.recommended


def test_zh_split_the_corpus_into_parts_is_sharding(scorer):
    # r-003: "cut the corpus into several parts and tokenize each"
    answer = scorer.read_markdown("结论：把语料切分成多份分别 tokenize，训练时再按权重混合。\n", NONE)
    assert answer.first_fix == "shard-preprocessing"
    assert scorer.read_markdown("结论：语料太大了，内存不够。\n", NONE).first_fix is None


def test_zh_micro_batch_named_before_its_verb(scorer):
    # r-005: "ba micro batch tiaoxiao" (make the micro batch smaller), the setting before the verb
    answer = scorer.read_markdown("2. 把 micro batch 调小，global batch 保持不变。\n", NONE)
    assert "reduce-micro-batch" in answer.recommended
    assert "reduce-micro-batch" not in scorer.read_markdown("2. 把 global batch 调小。\n", NONE).recommended
