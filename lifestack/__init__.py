"""LifeStack: a small, deterministic simulation of life conflicts for RL fine-tuning.

Importable without torch. See docs/lifestack.md for the model of the world and
docs/rewards.md for how actions are scored.

The modules in layers, lowest first: a module imports only modules on lines above its
own, wherever the import stands (tests/test_layering.py checks this, and that no module
of the package, training included, takes part in an import cycle):

    metrics, tasks, cache, qwen_tokens
    actions, conflicts, generator, graph
    task_reward, faithfulness, diversity, feedback
    task_index
    env
    heuristic
    value, hacks
    policies, lookahead
    scenarios
    prompts
    scoring, onpolicy
    episodes
    calibrate, client, rollout, service
    serve
    training

``training`` is the package of the trainer's machinery; this module re-exports the
simulation's main names from the layers below.
"""

from .actions import ACTION_TYPES, LifeStackAction, parse_action
from .conflicts import ConflictEvent, escalate_conflict, generate_conflict, get_conflict, load_templates
from .env import EpisodeState, LifeStackEnv, Observation, initial_state
from .generator import TaskGenerator
from .graph import DependencyGraph
from .metrics import DOMAIN_NAMES, INVERTED_METRICS, METRIC_PATHS, LifeMetrics, ResourceBudget, goodness
from .tasks import ExoEvent, Milestone, Route, Task


def __getattr__(name: str):
    # The feedback store is imported lazily so `python -m lifestack.feedback` runs cleanly.
    if name in ("FeedbackStore", "OutcomeFeedback"):
        from . import feedback

        return getattr(feedback, name)
    raise AttributeError(f"module 'lifestack' has no attribute {name!r}")


__all__ = [
    "ACTION_TYPES", "ConflictEvent", "DOMAIN_NAMES", "DependencyGraph", "EpisodeState", "ExoEvent",
    "FeedbackStore", "INVERTED_METRICS", "LifeMetrics", "LifeStackAction", "LifeStackEnv", "METRIC_PATHS",
    "Milestone", "Observation", "OutcomeFeedback", "ResourceBudget", "Route", "Task", "TaskGenerator",
    "escalate_conflict", "generate_conflict", "get_conflict", "goodness", "initial_state", "load_templates",
    "parse_action",
]
