"""Tests for lifestack/training/watch.py: the reward-integrity watch (the hack battery's
margins, the policy's hack signatures) and the answer-diversity report per stage."""

from __future__ import annotations

import json

from script_run import T, context, isolated, policy_completion, prompts10  # noqa: F401  (isolated: autouse)
import lifestack.training.watch as W
from lifestack.env import LifeStackEnv
from lifestack.hacks import HACKS as H_HACKS
from lifestack.policies import heuristic


def test_integrity_watch_scores_the_battery_and_reports_a_positive_margin(isolated):
    cfg = T.default_config()
    cfg["INTEGRITY_PROMPTS"] = 3
    T.RUN.signatures = {"completions": 10, "unparseable": 4}
    report = W.integrity_watch(cfg, stage=1, difficulty=2, previous=None, run=T.RUN)
    assert report["margin"] > 0 and report["closest_hack"] in report["hack_margins"]
    assert set(report["hack_margins"]) == set(H_HACKS) and all(m > 0 for m in report["hack_margins"].values())
    assert report["signature_rates"]["unparseable"] == 0.4 and report["flags"] == []
    # the watch's own hack texts are neither logged nor counted as the policy's completions
    assert T.RUN.signatures == {"completions": 10, "unparseable": 4}
    assert not (isolated / "logs" / "generations.jsonl").exists()
    line = W.integrity_line(1, report)
    assert line.startswith("[integrity] stage 1 | honest - best hack +") and line.endswith("| OK")


def test_integrity_watch_flags_hack_signatures_and_rising_garbage():
    cfg = T.default_config()
    cfg["INTEGRITY_PROMPTS"] = 1
    T.RUN.signatures = {"completions": 10, "keyword_list": 3, "unparseable": 6, "zero_cost_claims": 2}
    previous = {"integrity": {"signature_rates": {"unparseable": 0.3}}}
    report = W.integrity_watch(cfg, stage=2, difficulty=1, previous=previous, run=T.RUN)
    text = " ".join(report["flags"])
    assert "keyword list in 30%" in text and "zero cost claims in 20%" in text
    assert "unparseable answers rising: 30% -> 60%" in text
    assert "FLAG: " in W.integrity_line(2, report)


def test_policy_completions_are_counted_by_signature():
    T.RUN.signatures = {}
    prompt = prompts10()[0]
    env = LifeStackEnv()
    task, state, _ = context(prompt)
    env.restore(task, state)
    from lifestack.hacks import battery
    texts = battery(env)
    for name in ("honest", "keyword_list", "garbage", "huge_free_claims"):
        T.get_lifestack_evaluation(texts[name], prompt)
    counts = T.RUN.signatures
    assert counts["completions"] == 4 and counts["keyword_list"] == 1 and counts["unparseable"] == 1
    assert counts["zero_cost_claims"] == 1


def test_stage_diversity_reads_the_held_out_answers_and_flags_collapse():
    prompts = list(prompts10())
    same = json.dumps({"action_type": "negotiate", "target_domain": "mental_wellbeing", "route": "rebook_premium",
                       "metric_changes": {}, "resource_cost": {"time": 1, "money": 0, "energy": 0}, "reasoning": "x"})
    report = W.stage_diversity(prompts, [same] * len(prompts))
    assert set(report) == {"flight_crisis", "code_merge_crisis"}
    assert report["code_merge_crisis"]["route_fits"] == 0.0 and report["flight_crisis"]["route_fits"] == 1.0
    line = W.diversity_line(3, report)
    assert line.startswith("[diversity] stage 3 | ") and "COLLAPSED onto one answer" in line
    honest = [policy_completion(p, heuristic) for p in prompts]
    assert "COLLAPSED" not in W.diversity_line(3, W.stage_diversity(prompts, honest))
