"""GRPO's KL reference (``BETA > 0``): GRPO's start, in every stage and after a resume.

TRL 1.14 builds the reference when a trainer is built, from what the model is at that
moment, and the curriculum builds one trainer per stage:

- a full-weight model's reference is loaded from ``model.config._name_or_path``: the path
  the model was loaded from, which is the base model (in the CPU profile the random-weight
  tiny one, not the warm start done in memory), or after a resume the stage it resumed
  from;
- a PEFT model's is a ``"ref"`` adapter copied from its current adapter, so each stage
  would start its own reference, and the second stage's trainer stops with "Adapter with
  name 'ref' already exists" (the first left it on the model).

:func:`build_with_reference` builds the stage's trainer with the reference at GRPO's start
instead: ``stage_0`` when the warm start saved it, else the base model (a fresh LoRA
adapter, its ``lora_B`` zero, is the base model). The reference is never trained, so
saves leave it out (``models.save_model``); a step checkpoint holds it in a ``ref/``
subfolder, and transformers' resume then loads only the subfolders, so
:func:`load_checkpoint_policy` loads the trained adapter itself. Where a patched trainer
computes the reference with the adapters disabled instead (no ``"ref"``: Unsloth's rewrite
of TRL's trainer removes that block in some releases), the reference is the base model,
and the returned line says so (the GPU rehearsal's ``kl`` run prints it).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from lifestack.training.models import base_model_name, is_adapter, unwrap
from lifestack.training.run_state import RunPaths

REF = "ref"  # TRL's name for a PEFT model's reference adapter


def is_peft(model) -> bool:
    return hasattr(unwrap(model), "peft_config")


@contextmanager
def loaded_from(config, name: str) -> Iterator[None]:
    """``config._name_or_path`` set to ``name`` while TRL reads it to load the reference."""
    before = getattr(config, "_name_or_path", "")
    config._name_or_path = name
    try:
        yield
    finally:
        config._name_or_path = before


def adapter_weights(folder: Path) -> dict[str, Any]:
    """A saved LoRA adapter's weights, keyed as PEFT saves them (no adapter name)."""
    if (folder / "adapter_model.safetensors").is_file():
        from safetensors.torch import load_file

        return load_file(str(folder / "adapter_model.safetensors"))
    import torch

    return torch.load(folder / "adapter_model.bin", map_location="cpu", weights_only=True)


def load_adapter_weights(core, folder: Path, adapter_name: str) -> None:
    """A saved adapter's weights into the model's adapter ``adapter_name``; ValueError when
    the folder holds weights the model has no place for."""
    from peft.utils import set_peft_model_state_dict

    result = set_peft_model_state_dict(core, adapter_weights(folder), adapter_name=adapter_name)
    unexpected = getattr(result, "unexpected_keys", [])
    if unexpected:
        raise ValueError(f"{folder}: adapter weights the model has no place for: {unexpected[:3]}")


def set_reference_adapter(model, start: Path | None) -> None:
    """The ``"ref"`` adapter's weights set to GRPO's start: ``start``'s saved adapter, or
    with ``start`` None the base model (every ``lora_B`` of the reference zero)."""
    import torch

    core = unwrap(model)
    if start is not None:
        if not is_adapter(start):
            raise ValueError(f"{start}: GRPO's start is not a LoRA adapter, so it cannot be the LoRA model's reference")
        load_adapter_weights(core, start, REF)
        return
    with torch.no_grad():
        for name, param in core.named_parameters():
            if f".{REF}." in name and "lora_B" in name:
                param.zero_()


def build_with_reference(build: Callable[[], Any], model, cfg: dict[str, Any], paths: RunPaths) -> tuple[Any, str]:
    """``build()`` (a stage's GRPOTrainer) with its KL reference at GRPO's start; returns
    the trainer and what its reference is, in words. ``BETA = 0``: no reference."""
    if cfg["BETA"] == 0:
        return build(), "none (BETA = 0)"
    start = paths.grpo_start()
    if is_peft(model):
        core = unwrap(model)
        if REF in core.peft_config:  # the last stage's: TRL adds it again, from the current adapter
            core.delete_adapter(REF)
        trainer = build()
        if REF not in unwrap(trainer.model).peft_config:  # the reference is the adapters disabled: the base model
            return trainer, "the base model (adapters disabled)" + (f", not the warm start {start}" if start else "")
        set_reference_adapter(trainer.model, start)
        return trainer, f"{start}, GRPO's start (a frozen copy of its adapter)" if start else \
            "the base model, GRPO's start (a frozen adapter with lora_B zero)"
    name = str(start) if start else base_model_name(cfg)
    with loaded_from(unwrap(model).config, name):
        trainer = build()
    return trainer, f"{name}, GRPO's start" if start else f"{name}, the base model (GRPO's start)"


def load_checkpoint_policy(trainer, checkpoint: str | Path | None) -> None:
    """Before ``trainer.train(resume_from_checkpoint=checkpoint)`` of a LoRA model with the
    reference adapter: the checkpoint's trained adapter (its root), which transformers skips
    when the checkpoint also holds adapter subfolders (``ref/``)."""
    core = unwrap(trainer.model)
    if checkpoint is None or not is_peft(core) or REF not in core.peft_config or not is_adapter(checkpoint):
        return
    load_adapter_weights(core, Path(checkpoint), core.active_adapter)
