"""The machinery of ``scripts/train_trl.py``, one concept per module.

- ``config``: ``--KEY=value`` overrides, validation, the device and CPU profiles.
- ``distributed``: rank, world size, barriers, broadcasts, rank-0 logging.
- ``tiny_model``: the CPU profile's tiny Qwen2 model and offline tokenizer.
- ``models``: precision, loading (Unsloth, transformers + PEFT, tiny), saving, merging.
- ``fast_cpu``: the CPU profile's shortcuts (the same mathematics, less work).
- ``rewards``: what the six reward functions share (names, format score, the clip/time/
  episode wrapper, reward vectors) and the process's cached evaluator.
- ``context``: the run context the reward functions record into, and the feedback source.
- ``generation_log``: ``generations.jsonl``, opened and closed by its owner.
- ``run_state``: ``curriculum_state.json``, resume, archiving, the curriculum's decision.
- ``warm_start``: supervised steps on demonstrations before GRPO.
- ``evaluation``: generation, held-out and final evaluations, on-policy states.
- ``watch``: answer diversity and the reward-integrity watch per stage.
- ``checks``: pre-flight checks (vLLM, ENV_URL server, episode length).
- ``plots``: the reward curve, the curriculum plot, the training curves.
- ``model_eval``: any policy on seeded closed-loop episodes against the reference
  policies (``scripts/evaluate.py``).
- ``model_card``: the model card written with every final save.
- ``publish``: the card, the plots and the upload at the end of a run (``PUSH_TO_HUB``).
- ``learning_check``: the learning check's arms and measurements (``scripts/learning_check.py``).
- ``learning_rule``: the learning check's judging rule, its tables and reports.
- ``bench``: the GPU benchmark's model shape, builders, step clock and report lines
  (``scripts/bench_gpu.py``, ``gpu_check.py``, ``gpu_rehearsal.py``).
- ``step_profile``: where a CPU-profile GRPO step's time goes (``scripts/bench_cpu_step.py``).

Nothing here imports torch, transformers, trl or peft at module level: they are imported
inside the functions that need them, so ``import lifestack`` stays light.
"""
