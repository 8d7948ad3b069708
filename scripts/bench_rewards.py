#!/usr/bin/env python
"""Benchmark the reward path (CPU, one process). Prints medians over repeats.

    python scripts/bench_rewards.py            # full sizes (~1 minute)
    python scripts/bench_rewards.py --quick    # tiny sizes (the test suite runs this)

Measures, each as a median over repeats (``--repeats``, 7; ``--quick`` uses 2):
  1. lifestack: rebuild a pre-action state from its JSON description + step one fresh
     action (the task generator's cache cleared too, i.e. everything from scratch), in µs,
     and the same with the task generator's cache warm;
  2. get_lifestack_evaluation on fresh (prompt, completion) pairs, in pairs/s (the
     per-prompt state cache warm, as in training where each prompt has a group);
  3. all six reward functions on a batch of 64 (prompt, completion) pairs, in ms (median
     of 3 x repeats batches): the pairs are spread over the prompts, so at full size each
     comes from a different prompt (a harder case for the per-prompt cache than a GRPO
     batch of 16 prompts x 4 completions); with --quick about 3 share a prompt;
  4. generate_dataset(500), in s (median of max(2, repeats // 2));
  5. the phases of one evaluation, each timed alone in a tight loop over the same sample
     (JSON metadata, task lookup, state rebuild, parse, restore, step), in µs. Tight loops
     run hotter than the real mix, so these add up to less than figure 2's per-pair time.
Targets: >= 2,000 fresh evaluations/s on one core (issue #25: an evaluation now plays the
episode its decision starts to the task's end, lifestack.value; it was >= 15,000 for one
env step), reward code under 1 % of a training step (the trainer reports the share per
stage), generate_dataset(500) < 1 s.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))


def fresh_completions(prompts_states, n: int, seed: int) -> list[tuple[object, str]]:
    """``n`` distinct honest-looking completions, spread over the prompts."""
    from lifestack.env import LifeStackEnv
    from lifestack.policies import heuristic, random_valid

    rng = random.Random(seed)
    env = LifeStackEnv()
    out = []
    for i in range(n):
        prompt, task, state = prompts_states[i % len(prompts_states)]
        env.restore(task, state)
        base = json.loads(heuristic(env) if i % 3 else random_valid(env, rng))
        base["reasoning"] = base["reasoning"] + f" Option {i}."  # unique text: no cache hits
        for path in list(base["metric_changes"]):
            base["metric_changes"][path] = round(base["metric_changes"][path] * rng.uniform(0.5, 1.5), 2)
        out.append((prompt, json.dumps(base)))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for tests")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", help="write the figures as JSON here")
    args = parser.parse_args(argv)
    repeats = 2 if args.quick else args.repeats
    n_pairs = 300 if args.quick else 20_000
    n_prompts = 20 if args.quick else 200
    ds_size = 50 if args.quick else 500

    import train_trl as T
    from lifestack import generator as G
    from lifestack.prompts import prompt_text
    from lifestack.training.grpo_rewards import EVALUATOR
    from lifestack.env import LifeStackEnv
    from lifestack.scenarios import rebuild_state, task_from_metadata

    tmp = tempfile.mkdtemp(prefix="lifestack-bench-")
    T.RUN.log.open(tmp)
    T.RUN.feedback.configure(str(Path(tmp) / "feedback.sqlite3"))
    T.RUN.feedback.store()

    t0 = time.perf_counter()
    ds = T.generate_dataset(n_prompts, None, seed=7)
    prompts = list(ds["prompt"])
    contexts = []
    for p in prompts:
        task, state, meta = EVALUATOR.context(prompt_text(p))
        contexts.append((p, task, state, meta))
    pairs = fresh_completions([(p, t, s) for p, t, s, _ in contexts], n_pairs, seed=1)

    # 1. lifestack alone, from scratch: JSON metadata -> task -> state -> parse -> step
    metas = [json.dumps(m) for _, _, _, m in contexts]
    texts = [c for _, c in pairs[: max(200, n_prompts)]]
    env = LifeStackEnv()

    def rebuild_and_step_us(cold: bool) -> float:
        """Mean µs per JSON metadata -> task -> state -> parse -> step, over ``texts``."""
        if cold:
            G._generate_cached.cache_clear()
        t = time.perf_counter()
        for i, text in enumerate(texts):
            meta = json.loads(metas[i % len(metas)])
            task = task_from_metadata(meta)
            env.restore(task, rebuild_state(meta, task), observe=False, copy=False)  # built for this step only
            env.step(text)
        return (time.perf_counter() - t) / len(texts) * 1e6

    per_eval_us = [rebuild_and_step_us(cold=True) for _ in range(repeats)]
    # 1b. the same with the task generator's cache warm (tasks are immutable and shared
    # by every prompt of the same domain/difficulty/seed): the state rebuild + step alone
    warm_us = [rebuild_and_step_us(cold=False) for _ in range(repeats)]
    G._generate_cached.cache_clear()

    # 2. get_lifestack_evaluation on fresh pairs (prompt contexts cached, evaluations not)
    rates = []
    for _ in range(repeats):
        EVALUATOR.evaluations.clear()
        t = time.perf_counter()
        for prompt, completion in pairs:
            T.get_lifestack_evaluation(completion, prompt)
        rates.append(len(pairs) / (time.perf_counter() - t))

    # 3. six reward functions on batches of 64 consecutive pairs (spread over the prompts)
    batch_ms = []
    for r in range(repeats * 3):
        EVALUATOR.evaluations.clear()
        start = (r * 64) % max(len(pairs) - 64, 1)
        chunk = pairs[start:start + 64]
        batch_prompts = [p for p, _ in chunk]
        batch_completions = [[{"role": "assistant", "content": c}] for _, c in chunk]
        t = time.perf_counter()
        for fn in T.REWARD_FUNCS:
            fn(prompts=batch_prompts, completions=batch_completions, trainer_state=None)
        batch_ms.append((time.perf_counter() - t) * 1e3)

    # 5. the phases of one evaluation, each alone (a map for whoever optimises next)
    def per_item_us(fn, items) -> float:
        runs = []
        for _ in range(repeats):
            t = time.perf_counter()
            for item in items:
                fn(item)
            runs.append((time.perf_counter() - t) / len(items) * 1e6)
        return statistics.median(runs)

    from lifestack.actions import parse_action

    sample = range(len(texts))
    loaded = [json.loads(metas[i % len(metas)]) for i in sample]
    tasks = [task_from_metadata(m) for m in loaded]
    states = [rebuild_state(m, t) for m, t in zip(loaded, tasks)]
    actions = [parse_action(x)[0] for x in texts]

    def restore_and_step(i):
        env.restore(tasks[i], states[i], observe=False)
        if actions[i] is not None:
            env.step(actions[i])

    restore_us = per_item_us(lambda i: env.restore(tasks[i], states[i], observe=False), sample)
    phases = {
        "json_loads_metadata": per_item_us(lambda i: json.loads(metas[i % len(metas)]), sample),
        "task_from_metadata_warm": per_item_us(lambda i: task_from_metadata(loaded[i]), sample),
        "rebuild_state": per_item_us(lambda i: rebuild_state(loaded[i], tasks[i]), sample),
        "parse_action": per_item_us(parse_action, texts),
        "restore_copy": restore_us,
        "step_parsed": per_item_us(restore_and_step, sample) - restore_us,
    }

    # 4. generate_dataset
    ds_s = []
    for r in range(max(2, repeats // 2)):
        G._generate_cached.cache_clear()
        t = time.perf_counter()
        T.generate_dataset(ds_size, None, seed=1000 + r)
        ds_s.append(time.perf_counter() - t)

    figures = {
        "state_rebuild_plus_step_us_median": round(statistics.median(per_eval_us), 2),
        "state_rebuild_plus_step_task_cached_us_median": round(statistics.median(warm_us), 2),
        "evaluations_per_second_median": round(statistics.median(rates)),
        "six_rewards_64_batch_ms_median": round(statistics.median(batch_ms), 3),
        f"generate_dataset_{ds_size}_s_median": round(statistics.median(ds_s), 3),
        "phases_us_median": {k: round(v, 2) for k, v in phases.items()},
        "repeats": repeats,
        "pairs": len(pairs),
        "setup_s": round(time.perf_counter() - t0, 1),
    }
    print(f"lifestack rebuild-from-JSON + step, fresh:       {figures['state_rebuild_plus_step_us_median']:10.1f} µs (median of {repeats})")
    print(f"  ... with the task generator's cache warm:    {figures['state_rebuild_plus_step_task_cached_us_median']:10.1f} µs (median; issue target well under 60)")
    print(f"get_lifestack_evaluation, fresh pairs:           {figures['evaluations_per_second_median']:10d} /s (median; target >= 2000)")
    print(f"six reward functions, one 64-completion batch:   {figures['six_rewards_64_batch_ms_median']:10.2f} ms (median)")
    print(f"generate_dataset({ds_size}):                        {figures[f'generate_dataset_{ds_size}_s_median']:10.3f} s (median; target < 1 at 500)")
    print("phases, each timed alone (µs, medians): " + ", ".join(f"{k} {v:.1f}" for k, v in figures["phases_us_median"].items()))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
