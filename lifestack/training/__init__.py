"""The machinery of ``scripts/train_trl.py``, one concept per module.

- ``config``: ``--KEY=value`` overrides, validation, the device and CPU profiles.
- ``distributed``: rank, world size, barriers, broadcasts, rank-0 logging.
- ``seeds``: every seed offset a run derives from ``SEED``.
- ``decisions``: single decisions or episodes, the one place that branches on ``HORIZON``.
- ``tiny_model``: the CPU profile's tiny Qwen2 model and offline tokenizer.
- ``models``: precision, loading (Unsloth, transformers + PEFT, tiny), saving, merging.
- ``kl_reference``: GRPO's KL reference (``BETA > 0``) held at GRPO's start in every stage.
- ``fast_cpu``: the CPU profile's shortcuts (the same mathematics, less work).
- ``generation``: generating with the policy (left padding, the profile's mode switch).
- ``grpo_rewards``: what the six GRPO reward functions share (names, format score, the
  clip/time/episode wrapper, reward vectors, choosing them by name) and the process's
  cached evaluator.
- ``context``: the run context the reward functions record into, and the feedback source.
- ``generation_log``: ``generations.jsonl``, opened and closed by its owner.
- ``run_state``: where a run's files live, ``curriculum_state.json``, resume, archiving.
- ``curriculum``: the decision after a stage, its record, its log line, the step history.
- ``warm_start``: supervised steps on demonstrations before GRPO.
- ``run_evaluation``: the trainer's evaluations: held out after each stage, the on-policy
  states, the final evaluation with its plots.
- ``episode_play``: the one engine that plays seeded episodes (a model, a reference
  policy or a person) and its statistics (``scripts/evaluate.py``, ``scripts/play.py``).
- ``watch``: answer diversity and the reward-integrity watch per stage.
- ``checks``: pre-flight checks (vLLM, Unsloth's env-mask fix, ENV_URL server, episode length).
- ``estimate``: a run's time and memory on a T4, an estimate with its working.
- ``plots``: the reward curve, the curriculum plot, the training curves.
- ``model_card``: the model card written with every final save.
- ``publish``: the card, the plots and the upload at the end of a run (``PUSH_TO_HUB``).
- ``demo``, ``demo_app``: the demo page (``scripts/demo.py``).
- ``group_probe``: what a GRPO group holds at the states a policy's own play reaches
  (``scripts/group_probe.py``).
- ``turn_groups``: how often per-turn credit (GiGPO's step groups) would find turns from
  one state (``scripts/turn_groups.py``).
- ``state_probe``: controlled state probes (a route step done, the budget cut): does a decision follow the change?
- ``learning_check``: the learning check's arms and measurements (``scripts/learning_check.py``).
- ``learning_rule``: the learning check's judging rule, its tables and reports.
- ``bench``: the GPU benchmark's model shape, builders, step clock and report lines
  (``scripts/bench_gpu.py``, ``gpu_check.py``, ``gpu_rehearsal.py``).
- ``step_profile``: where a CPU-profile GRPO step's time goes (``scripts/bench_cpu_step.py``).

Nothing here imports torch, transformers, trl or peft at module level: they are imported
inside the functions that need them, so ``import lifestack`` stays light.
"""
