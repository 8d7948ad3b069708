"""lifestack.training.learning_rule: the learning check's judging rule over fabricated
seeds (paired over prompts and starts, against the control arm, per difficulty) and the
tables it prints."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given, settings, strategies as st

import lifestack.training.learning_rule as R
from learning_runs import episodes, fake
from lifestack.training.learning_check import METRICS
from lifestack.training.episode_play import bootstrap_ci


def test_paired_summary_passes_only_when_the_interval_excludes_zero():
    clear = [(-0.5, -0.2), (-0.3, 0.0), (-0.4, -0.1), (-0.2, 0.2), (-0.5, -0.3), (0.0, 0.3)]
    ok = R.summarise([fake(1, 0, 0, clear), fake(2, 0, 0, clear)])
    assert ok["passed"] and ok["paired"]["task_change"] == pytest.approx(0.3)
    lo, hi = ok["paired"]["task_change_ci95"]
    assert 0 < lo <= 0.3 <= hi
    mixed = [(-0.5, 0.3), (0.2, -0.5), (-0.1, 0.1), (0.1, -0.2), (-0.3, 0.0), (0.3, 0.1)]
    noisy = R.summarise([fake(1, 0, 0, mixed), fake(2, 0, 0, mixed)])
    assert not noisy["passed"] and noisy["paired"]["task_change_ci95"][0] < 0
    # the quick smoke check does not judge the change: it asks that the policy moved
    assert R.summarise([fake(1, 0, 0, mixed)], quick=True)["passed"]
    still = fake(1, 0, 0, mixed)
    still["answers_changed"] = 0.0
    assert not R.summarise([still], quick=True)["passed"]
    assert ok["mean_frac_reward_zero_std"] == pytest.approx(0.25)


def test_paired_summary_separates_validity_from_decision_quality():
    per = [(-0.5, -0.5), (-0.5, 0.2), (0.1, 0.4)]
    refs = [{"oracle": 0.8, "heuristic": 0.7, "heuristic_key": ["a", "d", None]}] * 3
    p = R.summarise([fake(1, 0, 0, per)], refs=refs)["paired"]
    assert p["valid_rate"] == {"before": pytest.approx(1 / 3), "after": pytest.approx(2 / 3)}
    assert p["task_among_valid"]["before"] == pytest.approx(0.1) and p["task_among_valid"]["after"] == pytest.approx(0.3)
    # only the prompt answered validly before and after is a paired decision
    assert p["decision_change"]["prompts"] == 1 and p["decision_change"]["mean"] == pytest.approx(0.3)
    assert p["decision_regret"]["before"] == pytest.approx(0.7) and p["decision_regret"]["after"] == pytest.approx(0.5)
    assert p["imitation"]["after"] == 1.0 and p["heuristic_task"] == pytest.approx(0.7)
    assert p["above_demonstrator"] == {"before": 0.0, "after": 0.0}
    refs_low = [{"oracle": 0.8, "heuristic": 0.25, "heuristic_key": ["x", "d", None]}] * 3
    q = R.summarise([fake(1, 0, 0, per)], refs=refs_low)["paired"]
    assert q["imitation"]["after"] == 0.0 and q["above_demonstrator"] == {"before": 0.0, "after": 0.5}
    assert q["task_by_imitation"]["after"] == {"same": None, "other": pytest.approx(0.3)}


def test_format_gains_alone_do_not_pass():
    """More answers parse (the task reward rises a lot) but the decisions get worse: FAIL."""
    per = [(-0.5, 0.1), (-0.5, 0.0), (0.3, 0.2), (0.4, 0.3), (-0.5, 0.1), (0.5, 0.4)] * 2
    s = R.summarise([fake(1, 0, 0, per), fake(2, 0, 0, per)])
    assert s["paired"]["task_change_ci95"][0] > 0  # the old rule would pass
    assert s["paired"]["decision_change"]["mean"] == pytest.approx(-0.1)
    assert not s["passed"] and s["decision_deltas"] == [pytest.approx(-0.1)] * 2


def test_decisions_must_also_beat_the_control_arm():
    per = [(0.0, 0.3), (0.1, 0.4), (-0.1, 0.2), (0.2, 0.5)] * 2
    better_control = [0.6, 0.7, 0.5, 0.8] * 2
    worse_control = [0.0, 0.1, -0.1, 0.1] * 2
    assert R.summarise([fake(1, 0, 0, per)])["passed"]
    beaten = R.summarise([fake(1, 0, 0, per, control=better_control)])
    assert not beaten["passed"] and beaten["paired"]["control"]["decision_vs_control"]["mean"] == pytest.approx(-0.3)
    ok = R.summarise([fake(1, 0, 0, per, control=worse_control)])
    assert ok["passed"] and ok["paired"]["control"]["decision_vs_control"]["ci95"][0] > 0
    assert "decisions +0.325" in R.format_table(ok, 1)


def test_no_valid_answer_in_one_arm_fails_with_a_clear_line():
    per = [(-0.5, 0.3), (-0.5, 0.2)]
    s = R.summarise([fake(1, 0, 0, per)])
    assert not s["passed"] and s["paired"]["decision_change"]["mean"] is None
    assert "no prompt with valid answers in both arms" in R.format_table(s, 1)


def test_bootstrap_interval_is_deterministic_and_brackets_the_mean():
    xs = [0.1, -0.2, 0.3, 0.05, 0.2, -0.1, 0.15]
    assert bootstrap_ci(xs) == bootstrap_ci(xs)
    lo, hi = bootstrap_ci(xs)
    assert lo < sum(xs) / len(xs) < hi


def test_table_lists_every_metric():
    table = R.format_table(R.summarise([fake(1, 0.0, 0.1)]), 1)
    for m in METRICS:
        assert f"| {m} |" in table


def test_closed_loop_play_is_paired_over_starts_and_getting_worse_fails_the_check():
    clear = [(-0.5, -0.2), (-0.3, 0.0), (-0.4, -0.1), (-0.2, 0.2), (-0.5, -0.3), (0.0, 0.3)]
    start = [0.3, 0.1, 0.4, 0.2, 0.0, 0.5, 0.3, 0.2]
    worse = [x - 0.2 + 0.02 * (i % 3) for i, x in enumerate(start)]
    seeds = []
    for seed in (1, 2):
        r = fake(seed, 0, 0, clear)
        r["episodes_before"], r["episodes_after"] = episodes(start), episodes(worse, ("wrong_type", "wrong_type"))
        seeds.append(r)
    summary = R.summarise(seeds)
    play = summary["closed_loop"]
    assert play["episodes"] == 8 and play["change"]["mean"] == pytest.approx(statistics.mean(
        w - s for w, s in zip(worse, start)))
    assert play["change"]["ci95"][1] < 0 and not summary["closed_loop_ok"]
    assert summary["paired"]["decision_change"]["ci95"][0] > 0  # decisions improved, ...
    assert not summary["passed"]  # ... but the trainer's own final evaluation got worse: FAIL
    arms = play["arms"]
    assert arms["before"]["first_decision"] == pytest.approx(0.5)
    assert arms["before"]["later_wrong_step"] == 0.0 and arms["after"]["later_wrong_step"] == 1.0
    assert arms["before"]["later_advancing"] == 1.0 and arms["after"]["later_advancing"] == 0.0
    lines = "\n".join(R.format_play(play))
    assert "(e) closed-loop play" in lines and "8 episodes" in lines
    # reward no worse beyond noise (the rule asks its interval to reach above 0) and more
    # tasks finished: passes
    for r in seeds:
        r["episodes_after"] = episodes([x + (0.05 if i % 2 else -0.05) for i, x in enumerate(start)], outcome="success")
    assert R.summarise(seeds)["passed"]
    for r in seeds:  # the same reward and no task finished more: success is the primary outcome, fails
        r["episodes_after"] = episodes([x + (0.05 if i % 2 else -0.05) for i, x in enumerate(start)])
    assert not R.summarise(seeds)["passed"]
    # the quick smoke check reports it but does not judge it
    seeds[0]["episodes_after"] = episodes(worse)
    assert R.summarise(seeds[:1], quick=True)["passed"]


def test_closed_loop_play_worse_than_the_control_arms_fails_the_check():
    clear = [(-0.5, -0.2), (-0.3, 0.0), (-0.4, -0.1), (-0.2, 0.2), (-0.5, -0.3), (0.0, 0.3)]
    start = [0.3, 0.1, 0.4, 0.2, 0.0, 0.5, 0.3, 0.2]
    after = [x + 0.1 + 0.02 * (i % 3) for i, x in enumerate(start)]  # GRPO improved on its start ...
    seeds = []
    for seed in (1, 2):
        r = fake(seed, 0, 0, clear, control=[b for b, _ in clear])  # ... and beat the control's decisions
        r["episodes_before"], r["episodes_after"] = episodes(start), episodes(after, outcome="success")
        r["episodes_control"] = episodes([x + 0.1 for x in after])  # ... but the control plays better
        seeds.append(r)
    summary = R.summarise(seeds)
    play = summary["closed_loop"]
    assert play["change"]["ci95"][0] > 0 and summary["paired"]["control"]["decision_vs_control"]["ci95"][0] > 0
    assert play["vs_control"]["mean"] == pytest.approx(-0.1) and play["vs_control"]["ci95"][1] < 0
    assert not summary["closed_loop_ok"] and not summary["passed"]
    assert "GRPO must beat the control in closed-loop play: 95% CI above 0 (lower bound" in R.play_rule(summary)
    assert R.play_shortfalls(play) == ["episode reward does not beat the control arm's"]
    # success against the control is reported beside the reward: GRPO finished every task, the control none
    assert play["success_vs_control"]["mean"] == pytest.approx(1.0)
    assert "success 100% vs the control's 0% (paired change +100.0%" in "\n".join(R.format_play(play))
    saved = dict(play, success_vs_control=None)  # a summary saved before the field: the line without it
    assert "success 100% vs" not in "\n".join(R.format_play(saved))
    for r in seeds:  # the control plays as well as GRPO, give or take noise: GRPO did not beat it, fails
        r["episodes_control"] = episodes([x + (0.05 if i % 2 else -0.05) for i, x in enumerate(after)])
    assert not R.summarise(seeds)["passed"]
    for r in seeds:  # GRPO plays better than the control beyond noise: passes
        r["episodes_control"] = episodes([x - 0.1 + (0.02 if i % 2 else -0.02) for i, x in enumerate(after)])
    assert R.summarise(seeds)["passed"]


def test_closed_loop_success_is_the_primary_outcome():
    """More reward per step with fewer (or no more) finished tasks fails; the success rate
    must rise beyond noise: its paired interval above 0."""
    clear = [(-0.5, -0.2), (-0.3, 0.0), (-0.4, -0.1), (-0.2, 0.2), (-0.5, -0.3), (0.0, 0.3)]
    start = [0.3, 0.1, 0.4, 0.2, 0.0, 0.5, 0.3, 0.2] * 3
    seeds = []
    for seed in (1, 2):
        r = fake(seed, 0, 0, clear)
        r["episodes_before"] = episodes(start, outcome="success")
        r["episodes_after"] = episodes([x + 0.1 for x in start])  # more reward per step, but every success lost
        seeds.append(r)
    summary = R.summarise(seeds)
    play = summary["closed_loop"]
    assert play["change"]["ci95"][0] > 0 and play["success_change"]["mean"] == pytest.approx(-1.0)
    assert R.play_shortfalls(play) == ["the success rate did not rise beyond noise"] and not summary["passed"]
    assert "success 100% -> 0% (paired change -100.0%" in "\n".join(R.format_play(play))
    assert "closed-loop success (e), the primary outcome, must rise" in R.play_rule(summary)
    for r in seeds:  # one start in eight lost its success, one won it: no rise beyond noise, fails
        r["episodes_after"] = [dict(e, outcome="success" if i % 8 else "timeout") for i, e in enumerate(r["episodes_after"])]
        r["episodes_before"] = [dict(e, outcome="success" if i % 8 != 1 else "timeout")
                                for i, e in enumerate(r["episodes_before"])]
    assert not R.summarise(seeds)["passed"]
    for r in seeds:  # half the starts that failed before now succeed: a rise beyond noise, passes
        r["episodes_before"] = [dict(e, outcome="timeout") for e in r["episodes_before"]]
        r["episodes_after"] = [dict(e, outcome="success" if i % 2 else "timeout") for i, e in enumerate(r["episodes_after"])]
    summary = R.summarise(seeds)
    assert summary["closed_loop"]["success_change"]["ci95"][0] > 0 and summary["passed"]


def test_per_difficulty_table_lists_every_arm_and_the_references():
    refs = [{"difficulty": 1 + i % 2, "oracle": 0.9, "heuristic": 0.7} for i in range(4)]
    seed = fake(1, 0, 0, [(0.1, 0.5), (0.2, 0.6), (0.1, 0.4), (-0.6, 0.8)], control=[0.2, 0.3, 0.2, 0.3])
    seed["episodes_before"] = [{"difficulty": 1 + i % 2, "reward": 0.0, "outcome": "timeout"} for i in range(4)]
    seed["episodes_after"] = [{"difficulty": 1 + i % 2, "reward": 0.1, "outcome": "success"} for i in range(4)]
    seed["episodes_control"] = seed["episodes_before"]
    play = {"heuristic": [{"difficulty": d, "outcome": "success"} for d in (1, 2)],
            "oracle": [{"difficulty": 1, "outcome": "success"}, {"difficulty": 2, "outcome": "timeout"}]}
    table = R.per_difficulty([seed], refs, play)
    assert sorted(table) == [1, 2] and list(table[1]) == ["before", "after", "control", "heuristic", "oracle"]
    assert table[1]["before"]["decision"] == pytest.approx(0.1) and table[1]["before"]["valid"] == 1.0
    assert table[2]["before"]["valid"] == 0.5 and table[2]["before"]["decision"] == pytest.approx(0.2)
    assert table[1]["after"]["regret"] == pytest.approx(0.9 - 0.45) and table[1]["after"]["success"] == 1.0
    assert table[2]["oracle"]["success"] == 0.0 and table[1]["heuristic"]["regret"] == pytest.approx(0.2)
    lines = "\n".join(R.format_per_difficulty(table))
    assert "| d | warm start | GRPO | control | heuristic | greedy maximiser |" in lines
    assert "| 2 | +0.200 / +0.700 / 50% / 0% |" in lines


def test_runs_without_episodes_are_summarised_as_before():
    clear = [(-0.5, -0.2), (-0.3, 0.0), (-0.4, -0.1), (-0.2, 0.2), (-0.5, -0.3), (0.0, 0.3)]
    summary = R.summarise([fake(1, 0, 0, clear)])
    assert summary["closed_loop"] is None and summary["passed"]


def test_collapse_onto_one_answer_fails_the_check():
    clear = [(-0.5, -0.2), (-0.3, 0.0), (-0.4, -0.1), (-0.2, 0.2), (-0.5, -0.3), (0.0, 0.3)]
    seed = fake(1, 0, 0, clear)
    seed["diversity_after"] = {"flight_crisis": {"answers": 12, "distinct": 1, "collapsed": True}}
    summary = R.summarise([seed, fake(2, 0, 0, clear)])
    assert not summary["passed"] and summary["collapsed"] == ["seed 1: flight_crisis"]


def test_control_arm_is_compared_pairwise_with_grpo():
    clear = [(-0.5, -0.2), (-0.3, 0.0), (-0.4, -0.1), (-0.2, 0.2), (-0.5, -0.3), (0.0, 0.3)]
    seed = fake(1, 0, 0, clear)
    seed["answers_control"] = [[{"task": b, "valid": b > -0.5}] * 2 for b, _ in clear]  # control = no change
    c = R.summarise([seed])["paired"]["control"]
    assert c["task_vs_control"] == pytest.approx(0.3) and c["task_vs_control_ci95"][0] > 0
    assert "GRPO vs the control arm (same compute, rewards shuffled" in R.format_table(R.summarise([seed]), 1)
    assert "GRPO vs the control arm (more imitation" in R.format_table(R.summarise([seed]), 1, "imitation")


_task = st.floats(min_value=-0.45, max_value=1.0, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_task, _task), min_size=1, max_size=8), st.data())
def test_unparseable_answers_never_move_decision_quality(per, data):
    """Format is out of (b): adding any number of unparseable answers to any prompt, in
    either arm, leaves the paired decision change exactly as it was."""
    base = fake(1, 0, 0, per)
    spoiled = fake(1, 0, 0, per)
    for arm in ("answers_before", "answers_after"):
        for i, answers in enumerate(spoiled[arm]):
            extra = data.draw(st.integers(min_value=0, max_value=3))
            spoiled[arm][i] = answers + [{"task": -0.5, "valid": False, "key": None}] * extra
    assert R.decision_change([spoiled], "answers_after", "answers_before") == \
        pytest.approx(R.decision_change([base], "answers_after", "answers_before"))


def test_beyond_the_teacher_needs_more_successes_than_the_heuristic_at_difficulties_4_5():
    """--beyond-teacher: on the starts of difficulties 4-5, GRPO's closed-loop success
    (over the seeds) against the heuristic's own on the same starts, paired, interval > 0."""
    clear = [(-0.5, -0.2), (-0.3, 0.0), (-0.4, -0.1), (-0.2, 0.2), (-0.5, -0.3), (0.0, 0.3)]
    diffs = [1 + i % 5 for i in range(40)]
    teacher = [{"difficulty": d, "reward": 0.5, "outcome": "success" if d < 4 or i % 2 else "timeout"}
               for i, d in enumerate(diffs)]  # the heuristic: every start below 4, half of 4-5

    def seed(n: int, won) -> dict:
        r = fake(n, 0, 0, clear, control=[b for b, _ in clear])
        r["episodes_before"] = [{"difficulty": d, "reward": 0.0, "outcome": "timeout", "turn_rewards": [0.0],
                                 "route_statuses": ["advanced"]} for d in diffs]
        r["episodes_after"] = [{"difficulty": d, "reward": 0.5, "outcome": "success" if won(i, d) else "timeout",
                                "turn_rewards": [0.5], "route_statuses": ["advanced"]} for i, d in enumerate(diffs)]
        r["episodes_control"] = r["episodes_before"]
        return r

    as_good = [seed(n, lambda i, d: d < 4 or i % 2) for n in (1, 2)]  # the teacher's successes exactly
    assert R.summarise(as_good)["passed"]  # the rule without the teacher setting
    s = R.summarise(as_good, ref_play={"heuristic": teacher}, teacher=True)
    b = s["beyond_teacher"]
    assert b["starts"] == 16 and b["grpo_success"] == b["teacher_success"] == 0.5
    assert b["change"]["mean"] == 0.0 and not s["passed"]
    better = [seed(n, lambda i, d: True) for n in (1, 2)]  # every start of 4-5 finished
    s = R.summarise(better, ref_play={"heuristic": teacher}, teacher=True)
    assert s["beyond_teacher"]["change"]["ci95"][0] > 0 and s["passed"]
    assert not R.summarise(better, teacher=True)["passed"]  # no heuristic play to compare with: not shown, fails
    assert R.summarise(better, quick=True, teacher=True)["beyond_teacher"] is None
