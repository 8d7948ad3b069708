#!/usr/bin/env python
"""Can the CPU profile's tiny model hold good decisions, and finish tasks, at all?

    python scripts/imitation_capacity.py                       # 3,000 steps, checked every 1,000
    python scripts/imitation_capacity.py --steps 6000 --every 2000 --seed 2 --json cap.json
    python scripts/imitation_capacity.py --policy oracle --episodes 10   # imitate the reward's greedy maximiser,
                                                                         # then play 10 episodes per difficulty
    python scripts/imitation_capacity.py --policy oracle --episodes 10 --hidden-size 128 --layers 4  # a larger model

Builds the CPU profile's model (random weights, seeded), then imitates a teacher
(``--policy``, a ``lifestack.policies.HONEST`` policy: the heuristic by default; ``oracle``
is the reward's own greedy maximiser) with the warm start's own loop and learning rate
for ``--steps`` supervised steps, each block on demonstrations it has not seen. After every ``--every`` steps it answers the learning check's fixed
held-out prompts greedily and prints: the valid-JSON rate, the decision quality (mean
task reward among valid answers, the reward GRPO trains on), the share of decisions
equal to the heuristic's (``lifestack.diversity.answer_key``), and the heuristic's own
decision quality on the same prompts. When the imitation's quality stops rising well
below the heuristic's, the model cannot represent the heuristic's decisions and the CPU
profile's model is too small for the skill. With ``--episodes N`` the imitating model
then plays N seeded episodes per difficulty (single decisions, each turn a fresh prompt
of the current state, as the final evaluation plays them: the one episode engine,
``lifestack.training.episode_play``), beside the teacher on the same starts, and the
success rate per difficulty is printed: whether the model can finish the tasks its
teacher finishes. A pipeline measurement on CPU, minutes long.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for _p in (ROOT, ROOT / "scripts"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from lifestack.training.tiny_model import TINY_MODEL_SHAPE, model_shape  # noqa: E402


EPISODE_SEED = 33_000_000  # the closed-loop starts: fixed, the same for every seed and teacher


def measure(steps: int, every: int, seed: int, n_prompts: int, work: Path, policy: str = "heuristic",
            episodes: int = 0, shape: dict | None = None) -> dict:
    import train_trl as T  # build_config and the reward functions
    from lifestack.training.run_evaluation import evaluate_policy, held_out_prompts
    from lifestack.training.models import load_model
    from lifestack.training.warm_start import warm_start
    from lifestack.training.learning_check import HELD_OUT_SEED, action_key, reference_scores
    from lifestack.training.tiny_model import build_tiny_model
    from transformers import set_seed

    from lifestack.policies import HONEST

    teacher = HONEST[policy]
    argv = [f"--OUTPUT_DIR={work / 'out'}", f"--LOG_DIR={work / 'logs'}", f"--SEED={seed}",
            "--WARM_START_POLICY=heuristic", f"--WARM_START_SFT_STEPS={every}", f"--FEEDBACK_DB={work / 'fb.sqlite3'}"]
    if shape is not None:  # another model size: built here, where load_model finds it
        build_tiny_model(work / "base", seed, shape)
        argv.append(f"--CPU_BASE_DIR={work / 'base'}")
    cfg = T.build_config(argv, profile="cpu")
    T.RUN.feedback.configure(cfg["FEEDBACK_DB"])
    T.RUN.configure(cfg)
    set_seed(seed)
    model, tok = load_model(cfg, banner=False)
    prompts = held_out_prompts(n_prompts, None, HELD_OUT_SEED)  # difficulties 1-5, both families
    refs = reference_scores(T, prompts)
    heuristic_quality = statistics.fmean(r["heuristic"] for r in refs)
    rows, done, t0 = [], 0, time.perf_counter()
    while done < steps:
        block = min(every, steps - done)
        # new demonstrations for every block (first_demo), the warm start's own loop
        warm_start(model, tok, {**cfg, "WARM_START_SFT_STEPS": block}, first_demo=10_000 * (done // every + 1),
                   demonstrator=teacher)
        done += block
        result = evaluate_policy(model, tok, prompts, cfg, T.RUN)
        evs = [T.get_lifestack_evaluation(c, p) for c, p in zip(result["completions"], prompts)]
        valid = [(ev, r) for ev, r in zip(evs, refs) if ev["action"] is not None]
        quality = statistics.fmean(float(ev["reward"]) for ev, _ in valid) if valid else None
        same = sum(action_key(ev["action"]) == r["heuristic_key"] for ev, r in valid) / len(evs)
        heur_on_valid = statistics.fmean(r["heuristic"] for _, r in valid) if valid else None
        rows.append({"steps": done, "valid_json_rate": result["valid_json_rate"], "decision_quality": quality,
                     "heuristic_on_the_same_prompts": heur_on_valid, "same_decision_as_heuristic": same,
                     "seconds": round(time.perf_counter() - t0, 1)})
        q = "n/a" if quality is None else f"{quality:+.3f}"
        h = "n/a" if heur_on_valid is None else f"{heur_on_valid:+.3f}"
        print(f"[capacity] {done} steps: valid JSON {result['valid_json_rate']:.0%} | decision quality {q} "
              f"(heuristic on those prompts {h}) | same decision as the heuristic {same:.0%} | "
              f"{rows[-1]['seconds']:.0f} s", flush=True)
    out = {"seed": seed, "policy": policy, "prompts": n_prompts, "heuristic_quality": heuristic_quality, "rows": rows,
           "parameters": sum(p.numel() for p in model.parameters())}
    if episodes > 0:
        out["closed_loop"] = closed_loop(model, tok, cfg, teacher, policy, episodes)
    return out


def closed_loop(model, tok, cfg: dict, teacher, policy: str, episodes: int) -> dict:
    """The imitating model and its teacher on the same seeded starts, ``episodes`` per
    difficulty, single decisions: success and episode reward per difficulty."""
    from lifestack.training.episode_play import by_difficulty, episode_starts, model_player, play_episodes, policy_player

    starts = episode_starts(episodes, range(1, 6), EPISODE_SEED)
    played = {"model": play_episodes(model_player(model, tok, cfg["MAX_COMPLETION_LENGTH"]), starts, 1, regret=False),
              policy: play_episodes(policy_player(teacher, EPISODE_SEED), starts, 1, regret=False)}
    table = {name: by_difficulty(rows) for name, rows in played.items()}
    for d in [*map(str, range(1, 6)), "all"]:
        cells = "; ".join(f"{name} success {t[d]['success']['mean']:.0%}, episode reward {t[d]['episode_reward']['mean']:+.3f}, "
                          f"valid JSON {t[d]['valid_json']['mean']:.0%}" for name, t in table.items())
        n = table["model"][d]["success"]["n"]
        print(f"[capacity] closed loop, difficulty {d} ({n} episodes): {cells}", flush=True)
    return {name: {d: {k: v["mean"] for k, v in row.items()} for d, row in t.items()} for name, t in table.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--every", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--held-out", type=int, default=80, help="held-out prompts (the learning check's, default 80)")
    p.add_argument("--policy", default="heuristic", choices=("heuristic", "oracle", "rollout"),
                   help="the teacher: lifestack.policies.HONEST's (oracle: the reward's greedy maximiser)")
    p.add_argument("--episodes", type=int, default=0, help="then play this many episodes per difficulty (0: none)")
    p.add_argument("--hidden-size", type=int, default=TINY_MODEL_SHAPE["hidden_size"],
                   help="a larger (or smaller) model than the CPU profile's: its hidden size (a multiple of 8)")
    p.add_argument("--layers", type=int, default=TINY_MODEL_SHAPE["num_hidden_layers"], help="... and its layers")
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args(argv)
    if args.steps < 1 or args.every < 1 or args.held_out < 1 or args.episodes < 0:
        p.error("--steps, --every and --held-out must be >= 1, --episodes >= 0")
    shape = None
    if (args.hidden_size, args.layers) != (TINY_MODEL_SHAPE["hidden_size"], TINY_MODEL_SHAPE["num_hidden_layers"]):
        try:
            shape = model_shape(args.hidden_size, args.layers)
        except ValueError as exc:
            p.error(str(exc))
    with tempfile.TemporaryDirectory(prefix="lifestack-capacity-") as tmp:
        r = measure(args.steps, args.every, args.seed, args.held_out, Path(tmp), args.policy, args.episodes, shape)
    r.update(hidden_size=args.hidden_size, layers=args.layers)
    print(f"[capacity] model {r['parameters']:,} parameters (hidden size {args.hidden_size}, {args.layers} layers); "
          f"the heuristic's own decision quality on all "
          f"{r['prompts']} prompts {r['heuristic_quality']:+.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
