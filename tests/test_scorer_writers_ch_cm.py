"""How the scorer reads what writers ch / ck (a troubleshooting matrix with the user's row marked "you are here"),
ci / cl (the same advice in English and Chinese) and cj / cm (an anti-checklist of don'ts closed by one "Do:" line)
showed: 120 answers written and labelled blind on 2026-12-06, first read 55.7 / 45.8 / 89.2 % (verdict / id /
violations) on dbe3466.

The classes: a matrix row marked "<- you are here" / "👉 你在这里" is the advice, its fix column only, and every
other row a situation the user is not in; a closing "Do:" / "要做的：" line is where the advice starts.
"""

from __future__ import annotations


def test_the_marked_row_of_a_matrix_is_the_advice(scorer):
    # ch-020 (writer ch): the marked row's symptom names the engine share, its fix column the stale processes
    text = ("| 症状 | 可能原因 | 检查 | 修复 |\n|---|---|---|---|\n"
            "| 训练 update 阶段 OOM | 激活放不下 | 峰值随 micro batch 变化 | 降 micro batch |\n"
            "| 👉 你在这里：vLLM 启动检查 gpu_memory_utilization 时报空闲显存不足 | 残留进程占着显存 | nvidia-smi | "
            "杀掉残留进程 |\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "kill-stale-processes"
    assert "reduce-micro-batch" not in answer.recommended and "shrink-colocated-engine" not in answer.recommended


def test_an_anti_checklist_advises_from_its_do_line(scorer):
    # cj-001 (writer cj)
    text = ("- 别去调 micro batch——GPU 那边根本没报错，降 micro batch 只影响显存。\n"
            "- 别加卡——主机内存不会因此变多。\n\n"
            "要做的：先按步记录每个进程的 RSS，看是谁在涨。\n")
    answer = scorer.read_markdown(text)
    assert "reduce-micro-batch" not in answer.recommended and answer.first_fix == "track-memory-per-step"
