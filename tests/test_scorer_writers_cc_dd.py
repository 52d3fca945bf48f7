"""How the scorer reads the misreadings that writers cc (an IDE-style agent working in the user's repository) and dd
(a Chinese forum / blog answer) showed: the second and third of issue 26's batch bb-cc-dd, held unlearned for a
session (first read 54.5 / 59.1 / 81.8 % and 66.7 / 45.5 / 72.7 % verdict / id / violations).

Each answer text is a sentence or block from a real labelled answer (benchmarks/answers/<id>.yaml, named in the
test).  The classes: a clause after ";" that opens on "they" still speaks of the list before it; a Chinese sentence
that closes on 不用去动 / 不沾边 / 管不到; headings 别试了 / 亲测没用; the unchanged context lines of a diff; a fix
said only as the fallback ("如果 ... 还是高，再 ...") is not the first thing the user is told to do; and spellings
(del + gc.collect() in a converter, a single-threaded save, "the resolved config shows", 先确认 ... 实际 ..., 逐步把显存
记下来, 打印每张卡的显存占用, 放到两台机器上).
"""

from __future__ import annotations


def test_a_clause_after_a_semicolon_that_opens_on_they_speaks_of_the_list(scorer):
    # cc-017
    text = ("Micro-batch, recompute, allocator settings and the distributed optimizer are all training-time GPU knobs; "
            "they don't run during conversion.\n")
    answer = scorer.read_markdown(text)
    assert "distributed-optimizer" in answer.avoided and not answer.recommended


def test_a_chinese_sentence_closing_on_leave_it_or_unrelated_is_against_what_it_lists(scorer):
    # cc-004, dd-014
    for text, fix in [
        ("另外 micro batch、重计算、激活 offload、`expandable_segments` 都是训练侧的开关，管不到 SGLang 这次 "
         "`cuMemCreate`，不用去动。", "expandable-segments"),
        ("`expandable_segments`、调 micro batch、减 dataloader worker——这是 CPU 单进程转换，这些都不沾边。",
         "expandable-segments"),
    ]:
        answer = scorer.read_markdown(text + "\n")
        assert fix in answer.avoided and fix not in answer.recommended, text


def test_headings_that_say_do_not_bother_are_advice_against(scorer):
    # dd-020, dd-014
    for heading in ["## 亲测没用", "## 别试了"]:
        text = f"{heading}\n- `expandable_segments:True`：不是碎片，开了只是晚几个 step 爆。\n"
        answer = scorer.read_markdown(text)
        assert "expandable-segments" in answer.avoided and not answer.recommended, heading


def test_a_diffs_context_lines_restate_the_script(scorer):
    # cc-013: --offload-train is an unchanged line; the change is the engine's static fraction
    text = ("- [ ] 先把 SGLang 的静态显存比例调小，给 trainer 恢复留出余量：\n\n"
            "```diff\n --colocate \\\n --offload-train \\\n-  --sglang-mem-fraction-static 0.7 \\\n"
            "+  --sglang-mem-fraction-static 0.55 \\\n```\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "shrink-colocated-engine" and "offload-trainer-states" not in answer.recommended


def test_a_fix_said_only_as_the_fallback_is_not_the_first_fix(scorer):
    # cc-020: the first step (a code change no fix id names) comes before it
    text = ("- [ ] 升级到包含 SkyRL PR #1751 的版本，或者在本地照着改：保持 logits 为打包 / CP 分片形式。\n"
            "- [ ] 改完之后如果 entropy 那一步还是高，再对 logprob / entropy 按序列分块计算（logits chunking）。\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix is None and "logits-chunking" in answer.recommended
    # behind a fix the answer does name, the fallback is still recommended, second
    answer = scorer.read_markdown("Set `recompute_granularity: selective`. If it still OOMs after that, switch to "
                                  "full recompute.\n")
    assert answer.first_fix == "selective-recompute" and "full-recompute" in answer.recommended


def test_spellings_of_fixes_from_an_ide_agent_and_a_forum_answer(scorer):
    for case, text, fix in [
        ("cc-003", "- [ ] Pick up the converter version that does `del hf_model; gc.collect()` after conversion and "
                   "after each saved shard.", "checkpoint-save-memory"),
        ("cc-006", "- [ ] Make the save single-threaded on Arm.", "checkpoint-save-memory"),
        ("cc-009", "- [ ] Set both fields, then confirm the warning is gone from the log and the resolved config "
                   "shows `False` for both.", "confirm-setting-applied"),
        ("dd-013", "1）**先确认 decoder layer 实际看到的序列长度**。", "confirm-setting-applied"),
        ("dd-020", "第一步先别猜，**逐层 / 逐步把显存记下来**，确认涨的是 allocated 还是 reserved。",
         "track-memory-per-step"),
        ("cc-004", "- [ ] 在调用 `resume_memory_occupation` 之前打印每张卡的显存占用，贴给我。",
         "track-memory-per-step"),
        ("dd-022", "1）把 sharding 拆开，放到两台机器上分别做不同的 TP rank。", "add-gpus"),
    ]:
        assert scorer.read_markdown(text + "\n").first_fix == fix, case


def test_a_converter_loop_that_drops_each_copy_is_the_save_memory_fix(scorer):
    # dd-014: 边用边释放 ("free each as you go") says it; the diff frees each shard list in the conversion loop
    text = ("一、**短期：边用边释放（就是你说的 del v，方向是对的）**\n\n"
            "```diff\n for k, v in mid_state.items():\n     state_dict[k] = torch.cat(v, dim=...)\n+    del v\n"
            "+    mid_state[k] = None     # 把这一项引用也丢掉\n+    gc.collect()\n```\n")
    assert scorer.read_markdown(text).first_fix == "checkpoint-save-memory"
    # cc-017: the shards the converter concatenates, then the copies dropped
    text = ("```diff\n     wq = torch.concat([s[\"attention.wq.weight\"] for s in shards], dim=0)\n"
            "     qkv = rearrange_qkv(wq, wk, wv, n_heads, n_kv_heads)\n+    del wq, wk, wv\n+    gc.collect()\n```\n")
    assert scorer.read_markdown(text).first_fix == "checkpoint-save-memory"
    # an RL weight sync that drops its state dict is no save
    text = "```python\nsd = model.state_dict()\nengine.update_weights(sd)\ndel sd\ngc.collect()\n```\n"
    assert scorer.read_markdown(text).first_fix != "checkpoint-save-memory"
