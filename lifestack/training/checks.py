"""Pre-flight checks: what must hold before a model loads or a stage trains (vLLM
installed, one colocated vLLM engine per process, an Unsloth that masks environment
tokens in episode mode, an answering ENV_URL server, an episode that fits the sequence
limit)."""

from __future__ import annotations

from typing import Any

from lifestack.training.decisions import decisions
from lifestack.training.distributed import log
from lifestack.training.models import unwrap


def vllm_stage_problem(cfg: dict[str, Any], done_stages: int) -> str | None:
    """TRL 1.14 sets up vLLM with each GRPOTrainer, and the curriculum builds one per stage:
    colocate starts an engine per stage; server mode opens a weight-sync group per stage on
    the same group port while the last stage's stays open until the process exits. So one
    process trains at most one stage with vLLM; a reason string when this run would train more."""
    to_train = cfg["N_STAGES"] - done_stages
    if cfg["USE_VLLM"] and to_train > 1:
        what = ("start {} vLLM engines" if cfg["VLLM_MODE"] == "colocate" else "open {} weight-sync groups to the vLLM "
                "server").format(to_train)
        return (f"USE_VLLM with VLLM_MODE={cfg['VLLM_MODE']} would {what} in one process (one per stage); run one "
                f"stage per process (--N_STAGES={done_stages + 1}, then {done_stages + 2}, ...: each rerun resumes)")
    return None


def check_vllm(cfg: dict[str, Any]) -> None:
    import importlib.util

    if cfg["USE_VLLM"] and importlib.util.find_spec("vllm") is None:
        raise SystemExit("USE_VLLM=True but vLLM is not installed: `pip install vllm` (GPU only), or set USE_VLLM=False")


def check_report_to(cfg: dict[str, Any]) -> None:
    """REPORT_TO names a logger transformers can load (it would stop the first stage's trainer)."""
    import importlib.util

    needs = {"tensorboard": ("tensorboard", "tensorboardX"), "wandb": ("wandb",)}.get(cfg["REPORT_TO"], ())
    if needs and not any(importlib.util.find_spec(m) for m in needs):
        raise SystemExit(f"REPORT_TO={cfg['REPORT_TO']} but {needs[0]} is not installed: `pip install {needs[0]}`, "
                         "or set REPORT_TO=auto (TensorBoard when installed) or none")


# The first releases whose replaced GRPO loss multiplies the loss mask by a rollout_func's
# env_mask (TRL's tool_mask). Earlier ones train on the environment's tokens too, and
# multi-turn training collapses. Checked in the wheels: unsloth 2026.5.8's
# unsloth/models/rl_replacements.py never mentions tool_mask, 2026.5.9's does and requires
# unsloth_zoo>=2026.5.5, the first zoo whose grpo_accumulated_loss takes tool_mask.
UNSLOTH_MASKING_FIX = {"unsloth": "2026.5.9", "unsloth_zoo": "2026.5.5"}


def installed_versions(unsloth_module: Any = None) -> dict[str, str | None]:
    """The unsloth and unsloth_zoo versions this process runs (each module's
    ``__version__`` once imported, else its installed distribution's; None where unknown).
    ``unsloth_module``: the imported ``unsloth``, when the caller has it."""
    import sys
    from importlib import metadata

    out: dict[str, str | None] = {}
    for name in UNSLOTH_MASKING_FIX:
        module = unsloth_module if name == "unsloth" and unsloth_module is not None else sys.modules.get(name)
        version = getattr(module, "__version__", None)
        if version is None:
            try:
                version = metadata.version(name)
            except metadata.PackageNotFoundError:
                pass
        out[name] = version
    return out


def unsloth_problem(cfg: dict[str, Any], versions: dict[str, str | None]) -> str | None:
    """Episode mode (HORIZON > 1) under Unsloth needs a release that masks environment
    tokens from its loss (:data:`UNSLOTH_MASKING_FIX`); a reason string when this one does
    not, or its version cannot be read. Single decisions have no environment tokens."""
    if not decisions(cfg["HORIZON"]).episodes:
        return None
    from packaging.version import InvalidVersion, Version

    for name, first in UNSLOTH_MASKING_FIX.items():
        have = versions.get(name)
        try:
            ok = have is not None and Version(have) >= Version(first)
        except InvalidVersion:
            ok = False
        if not ok:
            return (f"HORIZON={cfg['HORIZON']}: {name} {have or '(version unknown)'} trains on the environment's tokens "
                    f"in episode mode (its GRPO loss ignores the rollout's env_mask; fixed in {name} {first}); "
                    "install the tested pins with `pip install --no-deps -r requirements-gpu.txt`, or use "
                    "--DEVICE_PROFILE=peft, or HORIZON=1")
    return None


def check_episode_length(cfg: dict[str, Any], model, tokenizer) -> None:
    """Episode mode: say how long an episode's sequence gets, and stop before training
    when it cannot fit (Unsloth's MAX_SEQ_LENGTH, else the model's position limit)."""
    if not decisions(cfg["HORIZON"]).episodes:
        return
    from lifestack.rollout import episode_tokens

    need = episode_tokens(tokenizer, cfg["HORIZON"], cfg["MAX_COMPLETION_LENGTH"])
    config = getattr(unwrap(model), "config", None)
    limit, what = getattr(config, "max_position_embeddings", None), "the model's max_position_embeddings"
    if cfg["_PROFILE"] == "unsloth":
        limit, what = cfg["MAX_SEQ_LENGTH"], "MAX_SEQ_LENGTH"
    log(f"[episodes] a {cfg['HORIZON']}-turn episode takes up to about {need} tokens (prompt, "
        f"{cfg['HORIZON']} answers of <= {cfg['MAX_COMPLETION_LENGTH']}, environment turns)"
        + (f"; limit {limit} ({what})" if limit else ""))
    if limit and need > limit:
        raise SystemExit(f"HORIZON={cfg['HORIZON']}: an episode needs about {need} tokens but {what} is {limit}; "
                         f"raise it (--MAX_SEQ_LENGTH={need + 256} with Unsloth) or lower HORIZON or "
                         "MAX_COMPLETION_LENGTH")
    if cfg["_PROFILE"] == "cpu":  # the tiny tokenizer's count says nothing about the real job: say the real one
        try:
            from lifestack.qwen_tokens import MissingQwenExtra, qwen25_tokenizer

            real = episode_tokens(qwen25_tokenizer(), cfg["HORIZON"], cfg["MAX_COMPLETION_LENGTH"])
        except MissingQwenExtra:
            return
        fits = real <= cfg["MAX_SEQ_LENGTH"]
        log(f"[episodes] in Qwen2.5 tokens (the real job) the same episode takes up to about {real}: "
            + (f"fits MAX_SEQ_LENGTH {cfg['MAX_SEQ_LENGTH']}" if fits else
               f"on a GPU with Unsloth it needs --MAX_SEQ_LENGTH={real + 256} (now {cfg['MAX_SEQ_LENGTH']})"))


def check_env_server(cfg: dict[str, Any]) -> None:
    """Stop before any model loads when ENV_URL is set but no server answers there."""
    if not cfg["ENV_URL"]:
        return
    from lifestack.client import LifeStackClient

    try:
        health = LifeStackClient(cfg["ENV_URL"], timeout=10).health()
    except Exception as exc:
        raise SystemExit(f"ENV_URL={cfg['ENV_URL']}: no LifeStack server answers ({type(exc).__name__}: {exc}); "
                         "start one with `python -m lifestack.serve` or set ENV_URL=\"\"") from None
    log(f"[setup] episodes play on {cfg['ENV_URL']} ({health})")
