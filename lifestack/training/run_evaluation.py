"""Measuring the policy: the curriculum's held-out evaluation, the on-policy states of
ON_POLICY_STATES, and the final evaluation (whole episodes from fixed starts, trained vs
GRPO's start, with its plots and ``eval_episodes.jsonl``). Every completion comes from
``lifestack.training.generation`` (left padding, the profile's generation mode).
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Sequence

from lifestack.actions import parse_action
from lifestack.episodes import Episode
from lifestack.onpolicy import advance_by_policy
from lifestack.prompts import scenario_prompt, prompt_text, read_metadata
from lifestack.scenarios import Scenario, at_crisis, sample_scenario, sample_scenarios
from lifestack.training import seeds
from lifestack.training.context import RunContext
from lifestack.training.decisions import decisions
from lifestack.training.distributed import broadcast_object, is_main_process, log
from lifestack.training.generation import generate_completions
from lifestack.training.episode_play import FAMILIES, Played, model_player, paired, paired_line, play_episodes
from lifestack.training.models import load_model, unwrap
from lifestack.training.plots import plot_curriculum, plot_reward_curve, plot_training_curves, success_rate
from lifestack.training.grpo_rewards import OUTCOME_REWARD, REWARD_NAMES
from lifestack.training.run_state import RunPaths


def policy_advance(model, tokenizer, cfg: dict[str, Any]) -> Callable[[list[Scenario]], list[Scenario]] | None:
    """ON_POLICY_STATES > 0: move that share of a stage's scenarios on by ``model``'s own
    greedy answers (the play the final evaluation measures). None when off.

    Rank 0 plays; the other ranks get its answers (plain strings: scenarios hold
    mappingproxy tables that do not pickle) and replay them through the same environment,
    which is deterministic, so every process trains on one dataset."""
    share = cfg["ON_POLICY_STATES"]
    if share <= 0:
        return None

    def advance(scenarios: list[Scenario]) -> list[Scenario]:
        answers: list[list[str]] = []
        moved = None
        if is_main_process():
            core = unwrap(model)

            def play(prompts: list[list[dict]]) -> list[str]:
                answers.append(generate_completions(core, tokenizer, prompts, cfg["MAX_COMPLETION_LENGTH"]))
                return answers[-1]

            t0 = time.perf_counter()
            moved = advance_by_policy(scenarios, play, share)
            steps = [b.state.step - a.state.step for a, b in zip(scenarios, moved)]
            log(f"[on-policy] {sum(k > 0 for k in steps)} of {len(steps)} prompts moved on by the model's own greedy "
                f"answers ({sum(steps)} steps, {time.perf_counter() - t0:.1f}s)")
        answers = broadcast_object(answers)
        if moved is None:
            batches = iter(answers)
            moved = advance_by_policy(scenarios, lambda prompts: next(batches), share)
        return moved

    return advance


def held_out_prompts(n: int, difficulty: int | None, seed: int) -> list[list[dict]]:
    """The prompts of ``generate_dataset(n, difficulty, seed=seed)``, without the Dataset."""
    return [scenario_prompt(sc)
            for sc in sample_scenarios(n, difficulty, seed)]


def evaluate_policy(model, tokenizer, prompts: Sequence[list[dict]], cfg: dict[str, Any], run: RunContext,
                    samples: int = 0) -> dict[str, Any]:
    """Mean of each reward and the valid-JSON rate on ``prompts``.

    Greedy completions by default (the curriculum's decision); ``samples=k`` scores k
    completions per prompt sampled at TEMPERATURE with a fixed seed instead, which
    measures the policy GRPO actually optimises. With HORIZON > 1 each prompt starts a
    closed-loop episode and the means are over episodes, aggregated as in training;
    ``completions`` and ``turn_prompts`` then list every turn.
    """
    if samples > 0:
        prompts = [p for p in prompts for _ in range(samples)]
    temperature = cfg["TEMPERATURE"] if samples > 0 else 0.0

    def answer(conversations: list[list[dict]]) -> list[str]:
        return generate_completions(model, tokenizer, conversations, cfg["MAX_COMPLETION_LENGTH"],
                                    temperature=temperature, seed=cfg["SEED"], progress="[eval] held-out prompts")

    mode = decisions(cfg["HORIZON"])
    with run.in_phase("eval", episodes=mode.episodes):
        rows, completions, turn_prompts = mode.play_prompts(prompts, answer, run, episode_factory(cfg))
    means = {k: sum(r[k] for r in rows) / len(rows) for k in REWARD_NAMES}
    valid = sum(1 for c in completions if parse_action(c)[0] is not None) / len(completions)
    return {"mean_task_reward": means["reward_task_success_fn"], "reward_means": means, "valid_json_rate": valid,
            "completions": completions, "turn_prompts": turn_prompts}


def episode_factory(cfg: dict[str, Any]) -> Callable[[Any, int], Any]:
    """How episode mode starts the episode of a prompt: in-process (``Episode.from_prompt``),
    or on the ENV_URL server (``lifestack.client.RemoteEpisode`` reset with the prompt's
    metadata as its ``scenario``: the same state, hence the same episode)."""
    url = cfg["ENV_URL"]
    if not url:
        return lambda prompt, horizon: Episode.from_prompt(prompt, horizon)
    from lifestack.client import RemoteEpisode

    def remote(prompt: Any, horizon: int):
        meta = read_metadata(prompt_text(prompt))
        if isinstance(meta, str):
            raise ValueError(f"cannot start a remote episode: {meta}")
        return RemoteEpisode(url, scenario=meta, horizon=horizon)  # the server rebuilds this very state

    return remote


def run_episodes(model, tokenizer, cfg: dict[str, Any], n: int, seed: int, run: RunContext) -> list[dict[str, Any]]:
    """``n`` full episodes from :func:`evaluation_starts`, played by the model through the
    one episode engine (``lifestack.training.episode_play.play_episodes``), batched per round.

    HORIZON = 1: each decision answers a fresh single-decision prompt of the current state,
    for the task's whole horizon; the reward is the mean step reward (each step's reward and
    what it did to its route, ``route_status`` of the env's breakdown or "invalid", are kept
    per row). HORIZON > 1: the closed-loop conversation the policy was trained on, up to
    HORIZON turns; the reward is the episode's task reward as training aggregates it (turn
    mean blended with the outcome).
    """
    from tqdm.auto import tqdm

    player = model_player(model, tokenizer, cfg["MAX_COMPLETION_LENGTH"])
    starts = evaluation_starts(n, seed)
    with tqdm(desc=f"[eval] {n} episodes, decisions", unit="decision", leave=False,
              disable=not is_main_process()) as bar:
        played = play_episodes(player, starts, cfg["HORIZON"], progress=bar.update, regret=False)
    return [episode_row(i, sc, p, run) for i, (sc, p) in enumerate(zip(starts, played))]


def rows_as_played(rows: Sequence[dict[str, Any]]) -> list[Played]:
    """Final-evaluation rows (``eval_episodes.jsonl``'s) as ``Played`` episodes, each row's
    reward as the episode's, for ``episode_play``'s paired comparisons."""
    return [Played(start=i, difficulty=r["difficulty"], seed=r["seed"], outcome=r["outcome"], episode_reward=r["reward"],
                   domain=r.get("domain", ""))
            for i, r in enumerate(rows)]


def paired_rows(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``after - before`` over the same final-evaluation starts (``episode_play.paired``):
    episode reward and success, each with its mean, 95 % interval over starts and number
    of starts. ValueError when the two were not played from the same starts."""
    return paired(rows_as_played(before), rows_as_played(after))


def episode_row(i: int, sc: Scenario, p: Played, run: RunContext) -> dict[str, Any]:
    """One line of ``eval_episodes.jsonl``: a played episode as the final evaluation reports it."""
    row = {"episode": i, "difficulty": sc.difficulty, "domain": sc.task.domain, "seed": sc.seed}
    if p.episode is None:  # HORIZON = 1
        return {**row, "reward": sum(p.rewards) / len(p.rewards), "steps": len(p.rewards), "outcome": p.outcome,
                "valid_json_rate": sum(s != "invalid" for s in p.route_statuses) / max(len(p.rewards), 1),
                "turn_rewards": [round(r, 4) for r in p.rewards], "route_statuses": p.route_statuses}
    ep = p.episode
    valid = sum(t.action is not None for t in ep.turns)
    return {**row, "reward": run.episode_vector(ep)[OUTCOME_REWARD], "steps": len(ep.turns),
            "outcome": ep.env.state.outcome, "valid_json_rate": valid / len(ep.turns),
            "turn_rewards": [round(t.reward, 4) for t in ep.turns], "outcome_score": ep.outcome()["score"]}


def evaluation_starts(n: int, seed: int) -> list[Scenario]:
    """The final evaluation's ``n`` starts: difficulty rising 1 -> 5, task families
    alternating, each at the crisis itself (the state ``LifeStackEnv.reset`` builds, not
    the scenario's roll-forward)."""
    return [at_crisis(sample_scenario(seed + i, 1 + (i * 5) // n, FAMILIES[i % 2])) for i in range(n)]


def evaluate_and_plot(model, tokenizer, cfg: dict[str, Any], run: RunContext,
                      stages: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Trained vs base model on N_EVAL_EPISODES episodes; writes the plot and eval JSONL.
    ``stages``: the curriculum's stage records (the run's state), for the curriculum plot."""
    if not is_main_process():
        return {}
    paths = RunPaths.of(cfg)
    n, seed = cfg["N_EVAL_EPISODES"], seeds.final_evaluation(cfg["SEED"])
    core = unwrap(model)
    trained = run_episodes(core, tokenizer, cfg, n, seed, run)
    start_dir = paths.grpo_start()
    start_label = "base model"
    if start_dir is not None:
        # GRPO started from the warm-started model: compare with that, not with the base
        start_label = "warm-started model (GRPO's start)"
        start_model, start_tok = load_model(cfg, start_dir, banner=False, collective=False)
        base = run_episodes(unwrap(start_model), start_tok, cfg, n, seed, run)
        del start_model
    elif hasattr(core, "disable_adapter"):
        with core.disable_adapter():  # the same weights without the adapter: the base model
            base = run_episodes(core, tokenizer, cfg, n, seed, run)
    else:
        base_model, base_tok = load_model({**cfg, "USE_LORA": False}, banner=False, collective=False)
        base = run_episodes(base_model, base_tok, cfg, n, seed, run)
        del base_model
    paths.logs.mkdir(parents=True, exist_ok=True)
    with open(paths.eval_episodes, "w", encoding="utf-8") as fh:
        for label, rows in (("trained", trained), ("base", base)):
            for r in rows:
                fh.write(json.dumps({"model": label, **r}) + "\n")
    cpu = cfg["_PROFILE"] == "cpu"
    refs = reference_episodes(cfg["HORIZON"], n, seed, run)
    plot_reward_curve(trained, base, cfg["PLOT_PATH"], start_label, cpu=cpu, horizon=cfg["HORIZON"], references=refs)
    curves = plot_training_curves(paths.train_history, cfg["CURVES_PATH"], cpu=cpu)
    curriculum = plot_curriculum(list(stages), cfg["CURRICULUM_PLOT_PATH"], cfg["ADVANCE_THRESHOLD"], cpu=cpu,
                                 retreat=cfg["RETREAT_THRESHOLD"])
    summary = {
        "trained_mean": sum(r["reward"] for r in trained) / n, "base_mean": sum(r["reward"] for r in base) / n,
        "trained_valid_json": sum(r["valid_json_rate"] for r in trained) / n,
        "base_valid_json": sum(r["valid_json_rate"] for r in base) / n,
    }
    summary["start_model"] = start_label
    summary["episodes"] = n
    summary["trained_success"], summary["base_success"] = success_rate(trained), success_rate(base)
    summary["references"] = {name: {"mean": sum(r["reward"] for r in rows) / n, "success": success_rate(rows)}
                             for name, rows in refs.items()}
    summary["paired"] = paired_rows(base, trained)  # trained - start over the same starts, with intervals
    log(f"[eval] {n} episodes: trained {summary['trained_mean']:+.3f} vs {start_label} {summary['base_mean']:+.3f} mean "
        f"reward (valid JSON {summary['trained_valid_json']:.0%} vs {summary['base_valid_json']:.0%}); plot: {cfg['PLOT_PATH']}"
        + (f", curves: {cfg['CURVES_PATH']}" if curves else "")
        + (f", curriculum: {cfg['CURRICULUM_PLOT_PATH']}" if curriculum else ""))
    log(f"[eval] trained - start, paired over {n} starts: {paired_line(summary['paired'])} "
        "(one set of starts: scripts/eval_stages.py replays more)")
    log("[eval] reference policies on the same episodes: " + ", ".join(
        f"{name} {row['mean']:+.3f} (success {row['success']:.0%})" for name, row in summary["references"].items()))
    return summary


REFERENCE_POLICIES = ("random", "heuristic", "oracle")  # lifestack.policies.HONEST names; oracle: the greedy maximiser


def reference_episodes(horizon: int, n: int, seed: int, run: RunContext) -> dict[str, list[dict[str, Any]]]:
    """The reference policies on the final evaluation's starts, played through the same
    engine and scored as ``run_episodes`` scores a model (HORIZON = 1: mean step reward;
    HORIZON > 1: the episode task reward of a played conversation of up to HORIZON turns).
    Each episode draws from its own ``random.Random(seed + i)``, as a model's episodes are
    independent."""
    import random

    from lifestack.policies import HONEST

    out = {}
    for name in REFERENCE_POLICIES:
        policy = HONEST[name]
        starts = evaluation_starts(n, seed)
        rngs = [random.Random(seed + i) for i in range(n)]
        with run.in_phase("reference"):
            played = play_episodes(lambda live, policy=policy, rngs=rngs: [policy(ep.env, rngs[ep.played.start]) for ep in live],
                                   starts, horizon, regret=False)
            out[name] = [{"difficulty": sc.difficulty, "reward": row["reward"], "outcome": row["outcome"]}
                         for sc, row in ((sc, episode_row(i, sc, p, run)) for i, (sc, p) in enumerate(zip(starts, played)))]
    return out
