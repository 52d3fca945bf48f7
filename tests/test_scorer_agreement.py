"""The free-text scorer against the labelled answer set (benchmarks/answers, labelled blind to the scorer).

The floors are the agreement last measured over the whole set: a change to the scorer never lowers them; a new batch
of answers, learned, moves them to what the larger set reads (each move is said below).  The goal stated in issue 8
is 95 % on first-fix verdicts and on violations.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import FULL_SWEEPS, read_yaml

ROOT = Path(__file__).resolve().parents[1]
SKILL = ROOT / "skills" / "nemo-mbridge-perf-memory-tuning"  # the folder users install
sys.path.insert(0, str(ROOT))

from benchmarks import agreement  # noqa: E402
from benchmarks.scenario import load_scenarios  # noqa: E402
from benchmarks.score import Scorer  # noqa: E402

# Over all 259 answers (writer g's six, written for issue 24's memory-growth cases, came in at id 83.3 % /
# violations 83.3 %; writer h's five, for its conversion cases, at id 100 % / violations 80 %: read by nobody while
# the scorer was built).  Old scorer on the first 248: verdict 0.7788,
# violations 0.7863, id 0.6815.  Issue 8's target, held as its own test below.
TARGET = {"first_fix_verdict": 0.95, "violations": 0.95}
# re-measured when writer i's 9 answers (the three new fixes first) joined the set: violations 96.1 -> 95.9 %.
# Writers j, k and l (66 answers by three kinds of agent, 39 in Chinese, read by nobody before) came in at 75.0 %
# verdict / 72.7 % id / 89.4 % violations on their first read: the whole set fell to the floors below.
# After learning their misreadings (one mechanism per class, tests/test_scorer_writers_jkl.py) the whole set reads
# 96.9 % / 92.6 % / 97.3 %; writers j-l are development data now (100 % on each), not a held-out measure.
# Writer n (30, a dev batch read once, then learned: tests/test_scorer_writer_n.py) and writers o, p and q (66 by
# three kinds of agent - terse CLI, verbose chat, helper-quoting IDE - 31 in Chinese, the final unseen batch, first
# read after writer n's changes at 81.0 % verdict / 69.7 % id / 86.4 % violations) joined.  Writer r (6 answers for
# the new shard-preprocessing fix, first read 4/6 id / 5/6 violations, then learned: tests/test_scorer_writer_r.py)
# joined at 5/6 / 6/6, no earlier answer's reading changed: the id floor moved down with the set, not the scorer.
# Writers o, p and q learned in turn (tests/test_scorer_writers_opq.py: headings that carry their label and first
# action, a table's verdict column, a fix named again in the sentence that argued against it, "is the next step",
# and these agents' spellings): the whole set reads 97.9 % / 94.1 % / 96.6 % (o-q: 95.2-100 % verdict); writers
# o-q are development data now, and the next unseen batch is the measure.
# Writers s, t and u (66 answers by the same three kinds of agent, 36 in Chinese, the next unseen batch) came in
# at 69.3 % verdict / 59.1 % id / 87.9 % violations on their first read (the whole set of 506 fell to 93.9 % /
# 89.5 % / 95.5 %); learned (tests/test_scorer_writers_stu.py), the whole set reads the floors below and s-u
# read 83.9 % / 81.8 % / 93.9 %: development data now, like every batch before them.
# Writer w (22 answers, a maintainer-style GitHub reply, 10 in Chinese; the first of the third unseen batch, v w x)
# came in at 76.2 % / 68.2 % / 50.0 %; learned (tests/test_scorer_writers_vwx.py), w reads 100 % / 95.5 % / 95.5 %
# and the whole set of 528 read 96.6 % / 93.2 % / 96.8 %.  Writer v (22, a Chinese-first CLI agent, 15 in Chinese)
# came in at 77.3 % / 77.3 % / 77.3 %; learned, v reads 86.4 % on all three and the whole set of 550 read 96.3 % /
# 92.9 % / 96.4 %.  Writer x's 22 answers were lost before they were learned (they never entered this folder).
# Writers y (22, a senior engineer in a team chat, 8 in Chinese) and z (22, a report-style agent with options
# tables, 6 in Chinese) came in at 63.6 / 59.1 / 81.8 % and 72.7 / 59.1 / 54.5 %; learned
# (tests/test_scorer_writers_yz.py), y reads 95.5 / 95.5 / 100 % and z 95.5 / 90.9 / 100 %, and the whole set of
# 594 the floors below (the verdict floor falls from 96.3 %: the new answers' remaining misses, not a regression).
# Writer aa (22, a Chinese-first chat assistant, held for a session) came in at 63.6 / 54.5 / 77.3 %, writer bb
# (22, a terse maintainer in an issue thread, 7 in Chinese) at 75.0 / 54.5 / 63.6 %; learned
# (tests/test_scorer_writers_aa_bb.py) they read 77.3 / 72.7 / 95.5 % and 91.7 / 86.4 / 100 %, and the whole set
# of 638 read 95.4 / 92.2 / 96.7 %.
# Writers cc (22, an IDE-style agent, 7 in Chinese) and dd (22, a Chinese forum answer), the rest of that batch, held
# a session, came in at 54.5 / 59.1 / 81.8 % and 66.7 / 45.5 / 72.7 %; learned (tests/test_scorer_writers_cc_dd.py)
# they read 90.9 / 90.9 / 95.5 % and 93.3 / 72.7 / 100 %, and the whole set of 682 the floors below.  One earlier
# answer's verdict changed (z-003: its first step, ColossalAI's gemini, has no recognizer, and the fallback the scorer
# had taken as first by luck is, read as a fallback, no first fix).
# Writers ee (team chat), ff (SRE runbook) and gg (hedging assistant), 66 answers, 24 in Chinese, the next unseen
# batch, came in at 57.1 / 53.0 / 69.7 % (ee 64.7 / 63.6 / 86.4, ff 41.7 / 45.5 / 77.3, gg 60.0 / 50.0 / 45.5 %);
# learned (tests/test_scorer_writers_ee_ff_gg.py) they read 70.6 / 68.2 / 86.4, 75.0 / 77.3 / 90.9 and
# 80.0 / 68.2 / 90.9 %, and the whole set of 748 the floors below: the verdict floor falls under 95 % with their
# remaining misses (mostly first steps no fix id names, and fixes' spellings not yet known), no earlier answer's
# reading fell.
# Writers hh (a tutor), ii (a config code review) and jj (an edited Q&A answer with struck-through advice), 66 answers,
# 24 in Chinese, the next unseen batch, came in at 52.2 / 42.4 / 53.0 %; learned (tests/test_scorer_writers_hh_ii_jj.py)
# they read 58.7 / 57.6 / 87.9 %, and the whole set of 814 the floors below (one earlier answer, a-011, now agrees).
# Writers kk (a triage bot), ll (a maintainer's triage comment) and mm (a vendor support email), 60 answers, 24 in
# Chinese, the session's last unseen batch, came in at 57.5 / 55.0 / 85.0 %; learned
# (tests/test_scorer_writers_kk_ll_mm.py) they read 57.5 / 58.3 / 91.7 %, and the whole set of 874 0.8953 / 0.9531 /
# 0.8547.
# Writers nn (a terse terminal agent), oo (a blog / wiki article) and pp (a pair programmer thinking aloud), 60 answers,
# 36 in Chinese, held a session, came in at 66.7 / 61.7 / 66.7 %; learned (tests/test_scorer_writers_nn_oo_pp.py) they
# read 79.5 / 83.3 / 91.7 %, and the whole set of 934 0.8954 / 0.9507 / 0.8587 (no earlier answer fell; seven rose).
# Writers qq (notebook cells, advice in comments), rr (a decision tree, a verdict table, "My pick") and ss (a maintainer
# replying inline in the issue thread), 60 answers, 41 in Chinese, the next unseen batch, came in at
# 81.7 / 70.0 / 86.7 %; learned (tests/test_scorer_writers_qq_rr_ss.py) they read 88.3 / 81.7 / 95.0 %, and the whole
# set of 994 0.8958 / 0.9507 / 0.8581 (no earlier answer fell; three rose).
# Writers tt (a patch-first coding agent), uu (a code-switching team chat with 【推荐】 tags) and vv (a diagnostician:
# checks first, then "What I'd do"), 60 answers, 41 in Chinese, the next unseen batch, came in at 76.7 / 68.3 / 90.0 %;
# learned (tests/test_scorer_writers_tt_uu_vv.py) they read 85.0 / 78.3 / 98.3 %, and the whole set of 1054 the
# floors 0.896 / 0.9526 / 0.8548 (no earlier answer fell; three rose).
# Writers ww (an incident write-up), xx (a terse expert reply) and yy (a teaching assistant ending on an order), 60
# answers, 37 in Chinese, held unlearned at first, came in at 73.3 / 60.0 / 86.7 %; learned
# (tests/test_scorer_writers_ww_xx_yy.py) they read 83.3 / 78.3 / 90.0 %, and the whole set of 1114 the floors below
# 0.8942 / 0.9506 / 0.8537 (no earlier answer fell; five rose).
# Writers zz (a FAQ page), ab (a code reviewer's inline comments) and ac (slide-deck bullets), 60 answers, 40 in
# Chinese, the session's last unseen batch, came in at 73.3 / 60.0 / 78.3 %; learned
# (tests/test_scorer_writers_zz_ab_ac.py) they read 85.0 / 71.7 / 83.3 %, and the whole set of 1174 the floors below:
# violations fall under 95 % with ac's remaining misses (no earlier answer fell).
# Writers ad (a Markdown checklist), ae (explicit hypotheses) and af (a customer-support reply), 55 answers, 33 in
# Chinese, held unlearned for a session, came in at 76.4 / 67.3 / 85.5 %; learned
# (tests/test_scorer_writers_ad_ae_af.py) they read 76.4 / 72.7 / 94.5 %, and the whole set of 1229 the floors
# below (no earlier answer fell; one rose).
# Writers ag (a community post with emoji markers), ah (an experiment ladder: Try 1 / Try 2) and ai (a JSON / YAML
# answer block), 60 answers, 24 in Chinese, came in at 73.7 / 48.3 / 90.0 %; learned
# (tests/test_scorer_writers_ag_ah_ai.py) they read 73.7 / 61.7 / 98.3 %, and the whole set of 1289 the floors
# below (no earlier answer fell; one rose). Many of their first fixes have no id (labelled null), so the verdict
# covers only 19 of the 60.
# Writers aj (ranked options scored out of ten), ak (a keep / change / don't-touch review table and a flowchart) and
# al (release notes: Changed / Not changed (on purpose)), 60 answers, 24 in Chinese, the session's last unseen batch,
# came in at 78.3 / 68.3 / 78.3 %; learned (tests/test_scorer_writers_aj_ak_al.py) they read 81.7 / 71.7 / 98.3 %,
# and the whole set of 1349 the floors below (no earlier answer fell; one rose).
# Writers am (a bilingual engineer), an (GitHub alert blocks and collapsed sections) and ao (an interviewing agent
# with a default plan), 60 answers, 24 in Chinese, the final unseen batch of 2026-12-05, came in at
# 53.3 / 30.0 / 81.7 %; learned (tests/test_scorer_writers_am_an_ao.py) they read 75.0 / 65.0 / 91.7 %, and the
# whole set of 1409 the floors below (no earlier answer fell).
# Writers ap (a pasted chat thread with a consensus), aq (P0 / P1 / P2 ticket items) and ar (a conclusion-first
# report), 60 answers, 26 in Chinese, the session's last unseen batch, came in at 63.3 / 51.7 / 76.7 %; learned
# (tests/test_scorer_writers_ap_aq_ar.py) they read 63.3 / 53.3 / 88.3 % (most remaining misses are fixes named in
# words no recogniser knows), and the whole set of 1469 the floors below (no earlier answer fell).
# Writers as (a linter-style report), at (Observation / Inference / Action triples) and au (a speech-to-text voice
# message), 60 answers, 26 in Chinese, held unlearned for a session, came in at 51.7 / 40.0 / 66.7 %; learned
# (tests/test_scorer_writers_as_at_au.py) they read 58.3 / 53.3 / 85.0 %, and the whole set of 1529 the floors below
# (no earlier answer fell; one rose).
# Writers av (a memo that decides last), aw (myths vs facts) and ax (tables with a verdict column), 60 answers, 27 in
# Chinese, the session's final unseen batch, came in at 74.2 / 60.0 / 71.7 %; learned
# (tests/test_scorer_writers_av_aw_ax.py) they read 77.4 / 66.7 / 81.7 %, and the whole set of 1589 the floors below
# (no earlier answer fell).
# Writers ay (a chat transcript with the user), az (an architecture decision record) and ba (lines marked + - ? ~ =),
# 60 answers, 27 in Chinese, written blind the same day, came in at 57.9 / 45.0 / 73.3 %; learned
# (tests/test_scorer_writers_ay_az_ba.py) they read 65.8 / 55.0 / 85.0 %, and the whole set of 1649 the floors below
# (no earlier answer fell).
# Writers bc (a runbook with STOP / GO / SKIP gates), bg (what you did vs what I'd do) and bh (a story, then "So:"),
# 60 answers, 27 in Chinese, the session's final unseen batch, came in at 71.0 / 60.0 / 88.3 %, and bf (a second
# runbook writer, 20) at 70.0 / 50.0 / 85.0 %; with "So:" learned (tests/test_scorer_writers_bc_bg_bh.py) the batch
# reads 71.0 / 66.7 / 90.0 %; be (a second story writer, 20, read after: 80.0 / 70.0 / 100 % before "So:", 90.0 /
# 90.0 / 100 % with it) and bd (a second comparison writer, 20: 45.5 / 65.0 / 95.0 %) joined too, and the whole set of
# 1769 reads the floors below (no earlier answer fell).
# Then "| You | Me |" comparison tables advise from their second column: 0.7767 on the id.
# Writers bi / bl (a "5 whys" chain, then the fix), bj / bm (a what-if simulation of each option, then "Pick:") and
# bk / bn (Socratic self-questioning), 120 answers, 54 in Chinese, written blind on 2026-12-06, came in at
# 67.6 / 61.7 / 80.0 %; learned (tests/test_scorer_writers_bi_bn.py) they read 69.0 / 67.5 / 86.7 %, and the whole set
# of 1889 the floors below (no earlier answer fell; the set is lower because the new voices read lower).
# Writers bo / br (a commit message and PR description), bp / bs (symbols: MBS↓, TP↑, ✓ ✗ ①②③) and bq / bt (a
# terminal transcript of what was tried), 120 answers, 54 in Chinese, written blind the same day, came in at
# 66.7 / 54.2 / 90.8 %; learned (tests/test_scorer_writers_bo_bt.py) they read 70.0 / 59.2 / 91.7 %, and the whole
# set of 2009 the floors below (no earlier answer fell; three rose).
# Writers bu / bx (a multiple-choice quiz answered by the agent), bv / by (IF-THEN rules with "applies to you") and
# bw / bz (a correction of the agent's own earlier answer), 120 answers, 54 in Chinese, written blind the same day,
# came in at 64.6 / 51.7 / 62.5 %; learned (tests/test_scorer_writers_bu_bz.py) they read 65.6 / 60.0 / 80.8 %, and
# the whole set of 2129 the floors below (no earlier answer fell).
# Writers ca / cd (the user's config reprinted with CHANGE / KEEP / DO NOT comments), cb / ce (a per-GPU memory
# ledger with a cut column, then "Plan:") and cf / cg (a numbered social thread), 120 answers, 54 in Chinese, the
# session's last unseen batch, came in at 65.9 / 51.7 / 89.2 %; with trailing comment labels learned
# (tests/test_scorer_writers_ca_cg.py) they read 65.9 / 54.2 / 91.7 %, and the whole set of 2249 the floors below.
# Writers ch / ck (a troubleshooting matrix with the user's row marked), ci / cl (the advice in English and Chinese)
# and cj / cm (an anti-checklist closed by "Do:"), 120 answers, 54 in Chinese, written blind the same day, came in at
# 55.7 / 45.8 / 89.2 %; learned (tests/test_scorer_writers_ch_cm.py) they read 60.8 / 56.7 / 92.5 %, and the whole
# set of 2369 the floors below (no earlier answer fell).
# Writers cn / co (a short chat reply), cp / cq (a plain-text decision tree followed to the user's leaf) and cr / cs (an
# FAQ of "Q: / A:" pairs), 120 answers, 54 in Chinese, written blind the same day, came in at 56.5 / 51.7 / 85.8 %;
# learned (tests/test_scorer_writers_cn_cs.py) they read 62.0 / 56.7 / 87.5 %, and the whole set of 2489 the floors
# below (no earlier answer fell; the set is lower because the new voices read lower).
# Writers ct / cu (a code review closed by "Request changes:"), cv / cw (a runbook with expected outputs) and cx / cy (a
# head-to-head comparison closed by "Verdict:"), 120 answers, 54 in Chinese, came in at 63.8 / 49.2 / 86.7 %; learned
# (tests/test_scorer_writers_cn_cs.py) they read 68.1 / 55.8 / 90.0 %, and the whole set of 2609 the floors below (no
# earlier answer fell).
# Writers cz / da (a memo to the team), db / dc (a hypothesis list) and de / df (an on-call checklist with marks),
# 120 answers, 54 in Chinese, the session's final unseen batch, came in at 64.6 / 60.8 / 95.0 %; learned
# (tests/test_scorer_writers_cn_cs.py) they read 68.7 / 64.2 / 95.0 %, and the whole set of 2729 the floors below (no
# earlier answer fell).
# Writers dg / dh (meeting minutes), di / dj (the user's plan graded, then "Corrected plan:") and dk / dl (TODO / FIXME
# tags with struck-through options), 120 answers, 54 in Chinese, came in at 59.8 / 50.0 / 80.0 %; learned
# (tests/test_scorer_writers_dg_dl.py) they read 88.7 / 79.2 / 92.5 %, and the whole set of 2849 the floors below
# (the 2729 before them rose from 78.5 / 71.9 / 92.1 % to 80.2 / 73.0 / 92.3 %: 65 earlier answers read better, 26
# worse, most of those where an earlier writer named DeepSpeed ZeRO-3 without labelling it the sharding fix).
# Writers dm (a vendor knowledge-base article), dn ("Short answer / Long answer / If you only do one thing") and do (an
# issue ticket closed with Resolution / Root cause / Fix / Won't do / Follow-up fields), 60 answers, 27 in Chinese, the
# session's final unseen batch, came in at 65.4 / 56.7 / 91.7 %; learned (tests/test_scorer_writers_dm_do.py) they read
# 75.0 / 68.3 / 91.7 %, and the whole set of 2909 the floors below (no earlier answer fell; one rose).
# Writers dp (a coding agent's changelog: Changed / Added / Not changed (on purpose)), dq (a pasted chat whose advice
# moves over the turns) and dr (a backlog by priority: P0 / P1 / P2 / Rejected / Investigate), 60 answers, 27 in
# Chinese, the session's final unseen batch, came in at 69.8 / 50.0 / 81.7 %; learned
# (tests/test_scorer_writers_dp_dr.py) they read 84.9 / 78.3 / 85.0 %, and the whole set of 2969 the floors below
# (the 2909 before them rose from 80.4 / 73.2 / 92.3 % to 81.2 / 73.9 / 92.3 %: 58 readings better, 16 worse, most
# of those a print of the allocator's counters beside another fix that the writer labelled first; the violations
# floor falls with the new answers' misses).
# Writer ds (8 answers, 4 in Chinese, mixed voices) answered the package-build, DataParallel, fewer-GPUs and
# empty-line cases of set s70, the first with limit-build-jobs (new that day) in its ids; first read 50.0 / 62.5 /
# 62.5 %, learned ("check that the log shows", 核对, --max-num-seqs) 75.0 / 87.5 / 62.5 %; the whole set of 2977 the
# floors below (the violations floor falls with ds-004 and ds-005, whose kills and flags the writer labelled apart).
# Writer dt (8 answers, 4 in Chinese) answered five vision-language cases with cap-vision-tokens (new that day) first
# in five; first read 100 / 87.5 / 75.0 %: dt-005 keeps the user's own --deepspeed zero3_offload in the command it
# tells them to run and says offload is already on, dt-008's first step is a DeepSpeed JSON block
# ("offload_optimizer": {"device": "cpu"}); a recognizer for that key read writer aa worse, so it stays out and the
# violations floor falls with the two misses.
# Liger Kernel's switches (enable_liger_kernel, use_liger_kernel: the fused linear cross-entropy of the HF-Trainer
# frameworks) read as the fused-loss fix: 17 answers name them; the verdict 81.86 -> 81.94 %, the id 74.34 -> 74.44 %.
FLOORS = {"first_fix_verdict": 0.8194, "violations": 0.9206, "first_fix_id": 0.7444}


@pytest.fixture(scope="module")
def labelled():
    return agreement.load_labelled()


@pytest.fixture(scope="module")
def scenarios():
    return {s.id: s for s in load_scenarios()}


@pytest.fixture(scope="module")
def result(labelled, scenarios):
    """The agreement over every labelled answer: ~3,000 answers read in ~20 s, so CI's full-sweep step measures it
    (MEMTUNE_FULL_SWEEPS=1) and the suite a maintainer runs skips it; `python3 benchmarks/agreement.py` prints it."""
    if not FULL_SWEEPS:
        pytest.skip("the agreement over every labelled answer is measured in CI's full-sweep step")
    return agreement.measure(labelled, scenarios, Scorer.from_kb())


def test_labels_use_known_ids_and_violations_follow_from_them(labelled, scenarios):
    fixes = {f["id"] for f in read_yaml(SKILL / "knowledge" / "fixes.yaml")["fixes"]}
    causes = {c["id"] for c in read_yaml(SKILL / "knowledge" / "causes.yaml")["causes"]}
    for item in labelled:
        labels = item.labels
        ids = [labels["first_fix"], *labels["recommended"], *labels["conditional"], *labels["avoided"]]
        assert set(filter(None, ids)) <= fixes, item.id
        assert labels["cause"] is None or labels["cause"] in causes, item.id
        assert labels["first_fix"] is None or labels["first_fix"] in labels["recommended"], item.id
        never = set(scenarios[item.scenario].expect.get("never_recommend", []))
        assert set(labels["violations"]) == set(labels["recommended"]) & never, item.id


def test_the_set_is_large_bilingual_and_has_every_fix_as_a_first_fix(labelled):
    fixes = {f["id"] for f in read_yaml(SKILL / "knowledge" / "fixes.yaml")["fixes"]}
    assert len(labelled) >= 90
    assert {i.language for i in labelled} == {"en", "zh"}
    assert fixes <= {i.labels["first_fix"] for i in labelled}


@pytest.mark.parametrize("measure", sorted(FLOORS))
def test_agreement_does_not_fall_below_its_floor(result, measure):
    assert result[measure] >= FLOORS[measure], f"{measure}: {result[measure]} < {FLOORS[measure]}"


# measures below the target, each an expected failure until it is not (issue 26 brought both back above 95 %; writers
# ee, ff and gg took the verdict under it again: 93.6 % over 748, 91.4 % over 814 with hh, ii and jj, 89.5 % over
# 874 with kk, ll and mm)
# the first-fix verdict since writers o-q joined; violations since writers zz, ab and ac (slide-deck bullets whose
# option lists, +/- marks and "Backup slide: ruled out" the scorer reads only in part) joined on 2026-12-06
BELOW_TARGET: set[str] = {"first_fix_verdict", "violations"}


@pytest.mark.parametrize("measure", [
    pytest.param(m, marks=pytest.mark.xfail(strict=True, reason="issue 26: below 95 % (see BELOW_TARGET)"))
    if m in BELOW_TARGET else m for m in sorted(TARGET)])
def test_agreement_meets_the_target(result, measure):
    assert result[measure] >= TARGET[measure], f"{measure}: {result[measure]} < {TARGET[measure]}"
