"""lifestack.training.learning_check: the learning check's arms and measurements (the
control arm's shuffled rewards, the measurement's fixed temperature, the reference
policies' play, the rescoring of held-out answers). The training script ``T`` is passed
in, as the command passes it."""

from __future__ import annotations

import lifestack.training.learning_check as L
from script_run import T  # the training script, imported as the other reward-path tests import it


def test_reference_play_is_the_heuristic_and_the_greedy_maximiser_on_the_evaluation_starts():
    play = L.reference_play(T, 5)
    assert [g["difficulty"] for g in play["heuristic"]] == [1, 2, 3, 4, 5]
    assert all(g["outcome"] in ("success", "timeout", "failure") for rows in play.values() for g in rows)
    assert play == L.reference_play(T, 5)  # deterministic


def test_shuffled_reward_keeps_the_values_detaches_them_and_is_the_same_for_all_six():
    f = L.shuffled_reward(lambda completions, **kw: [float(len(c)) for c in completions], str)
    g = L.shuffled_reward(lambda completions, **kw: [float(len(c)) * 10 for c in completions], str)
    batch = ["a" * i for i in range(1, 17)]
    out = f(batch)
    assert sorted(out) == sorted(float(len(c)) for c in batch) and out != [float(len(c)) for c in batch]
    assert [x * 10 for x in out] == g(batch)  # one permutation per batch, for every reward
    assert f(batch) == out  # deterministic


def test_held_out_answers_are_sampled_at_one_temperature_whatever_the_recipe_trains_with():
    assert L.EVAL_TEMPERATURE == T.CPU_PROFILE["TEMPERATURE"]  # the default recipe measures itself as before
    hot = T.build_config(["--DEVICE_PROFILE=cpu", "--TEMPERATURE=1.0"], profile="cpu")
    assert hot["TEMPERATURE"] == 1.0
    measured = L.measurement_config(hot)
    assert measured["TEMPERATURE"] == L.EVAL_TEMPERATURE
    assert {k: v for k, v in measured.items() if k != "TEMPERATURE"} == {k: v for k, v in hot.items() if k != "TEMPERATURE"}
    assert hot["TEMPERATURE"] == 1.0  # the training config itself is untouched


def test_rescoring_held_out_answers_neither_logs_nor_counts_them_again(tmp_path):
    """answer_scores re-reads answers evaluate_policy already observed: same scores as the
    reward, nothing written to generations.jsonl, no signature counted."""
    from lifestack.training.run_evaluation import held_out_prompts
    from lifestack.training.generation_log import GenerationLog
    from lifestack.training.grpo_rewards import EVALUATOR

    prompts = held_out_prompts(3, 2, L.HELD_OUT_SEED)
    answers = ['{"action_type": "rest"}', "not json", '{"action_type": "rest", "target_domain": "health"}'] * 2
    saved = (T.RUN.log, T.RUN.log_interval, T.RUN.evaluations, dict(T.RUN.signatures), T.RUN.phase)
    try:
        T.RUN.log, T.RUN.log_interval, T.RUN.evaluations, T.RUN.signatures = GenerationLog(tmp_path), 1, 0, {}
        EVALUATOR.evaluations.clear()
        scores = L.answer_scores(T, prompts, answers, samples=2)
        assert not (tmp_path / "generations.jsonl").exists()
        assert T.RUN.signatures == {} and T.RUN.phase == saved[4]
        EVALUATOR.evaluations.clear()
        direct = [T.get_lifestack_evaluation(c, p) for p, c in zip([p for p in prompts for _ in range(2)], answers)]
        assert [x["task"] for row in scores for x in row] == [float(ev["reward"]) for ev in direct]
        assert [x["valid"] for row in scores for x in row] == [ev["action"] is not None for ev in direct]
        assert (tmp_path / "generations.jsonl").exists()  # the same answers outside rescore are logged
    finally:
        T.RUN.log.close()
        T.RUN.log, T.RUN.log_interval, T.RUN.evaluations, T.RUN.signatures, _ = saved
        EVALUATOR.evaluations.clear()
