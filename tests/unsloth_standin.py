"""A stand-in for Unsloth in tests: the behaviours of Unsloth 2026.10.9 that the trainer's
GPU path depends on, reproduced on CPU with the tiny model.

Unsloth cannot be imported without a GPU, so CI could never run the trainer's unsloth
profile. :func:`install` puts fake ``unsloth`` and ``unsloth_zoo`` modules into
``sys.modules`` and patches TRL the way ``import unsloth`` does; the trainer's own code
(``load_model``, ``train_curriculum``, the evaluations, the episode rollout, resume) then
runs under it unchanged. What is modelled, each with the Unsloth 2026.10.9 source it
follows (read in the wheels: unsloth/models/llama.py, unsloth/models/rl.py,
unsloth/models/rl_replacements.py):

- **The returned tokenizer is shared and flipped.** ``from_pretrained`` leaves it
  left-padded and keeps it on every model in the chain as ``_saved_temp_tokenizer``
  (llama.py, end of ``FastLlamaModel.from_pretrained``); ``get_peft_model`` and
  ``for_training`` set it to right padding, ``for_inference`` back to left
  (``FastLlamaModel.get_peft_model``, ``FastLlamaModel.for_training`` / ``for_inference``).
- **Mode methods on the model.** ``model.for_training`` / ``model.for_inference`` are
  bound to the PEFT model (end of ``FastLlamaModel.get_peft_model``): ``for_inference``
  turns gradient checkpointing off and sets ``_flag_for_generation``; ``for_training``
  turns checkpointing back on in the mode the model was configured with. Checkpointing is
  recorded as a flag (``_standin_checkpointing``), not applied to the tiny model.
- **The trainer module's ``unwrap_model_for_generation`` is replaced** (rl.py ``PatchRL``:
  ``setattr(trl.trainer.grpo_trainer, "unwrap_model_for_generation", ...)``) by one that
  calls ``for_inference`` on entry and ``for_training`` on exit: after every GRPO
  generation the shared tokenizer is right-padded again.
- **The GRPO trainer** (rl.py's generated ``UnslothGRPOTrainer``): ``__init__`` calls
  ``for_training`` before TRL's init and ``for_inference`` after it; ``train`` is wrapped
  by ``prepare_for_training_mode`` (``for_training`` first, then back to the mode the model
  was in). Its loss is replaced (rl_replacements.py ``grpo_accumulated_loss``): it reads
  ``tool_mask`` (a ``rollout_func``'s ``env_mask``) from releases 2026.5.9 on and ignored
  it before (unsloth issue #5673). The stand-in records every mask its loss sees and, for a
  version below the fix, drops it as those releases did.

Not modelled: 4-bit quantisation, Unsloth's kernels and fast generation path (the tiny
model runs in fp32 through transformers), vLLM. Every ``generate`` call on the model is
recorded (padding side, inference flag, whether it ran inside the trainer's unwrap).
"""

from __future__ import annotations

import functools
import json
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lifestack.training.generation import padding_side_of

VERSION = "2026.10.9"
MASKING_FIX = "2026.5.9"


@dataclass
class StandIn:
    """What the stand-in saw: one dict per ``generate`` call, the masks its loss read, and
    how often the trainer module's unwrap was entered."""

    version: str
    generates: list[dict[str, Any]] = field(default_factory=list)
    loss_masks: list[Any] = field(default_factory=list)
    unwraps: int = 0
    in_unwrap: bool = False
    tokenizer: Any = None

    def outside_trainer(self) -> list[dict[str, Any]]:
        return [g for g in self.generates if not g["in_trainer_unwrap"]]

    def inside_trainer(self) -> list[dict[str, Any]]:
        return [g for g in self.generates if g["in_trainer_unwrap"]]


def _chain(model):
    """The model and every ``.model`` below it, as Unsloth walks them."""
    out, m = [model], model
    while hasattr(m, "model"):
        m = m.model
        out.append(m)
    return out


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def install(monkeypatch, version: str = VERSION, zoo_version: str | None = None) -> StandIn:
    """Install the stand-in for one test (``monkeypatch`` undoes it); returns its record."""
    import torch
    import trl
    from trl.trainer import grpo_trainer

    seen = StandIn(version)

    # --- the mode methods (llama.py FastLlamaModel.for_inference / for_training) ---------
    def for_inference(model):
        for m in _chain(model):
            m._standin_checkpointing = False
            m.training = False
            if getattr(m, "_saved_temp_tokenizer", None) is not None:
                m._saved_temp_tokenizer.padding_side = "left"
            m._flag_for_generation = True
        return model

    def for_training(model, use_gradient_checkpointing=None):
        mode = use_gradient_checkpointing
        if mode is None:
            mode = getattr(model, "_unsloth_gradient_checkpointing", True)
        model.train()  # the modules' own mode (switch_training_mode)
        for m in _chain(model):
            m._standin_checkpointing = bool(mode)
            m.training = True
            if getattr(m, "_saved_temp_tokenizer", None) is not None:
                m._saved_temp_tokenizer.padding_side = "right"
            if "_flag_for_generation" in vars(m):
                del m._flag_for_generation
        return model

    def attach(model, tokenizer, checkpointing):
        """What the end of get_peft_model (or patch_peft_model on load) leaves on the model."""
        model._unsloth_gradient_checkpointing = checkpointing
        for m in _chain(model):
            m._saved_temp_tokenizer = tokenizer
            m._standin_checkpointing = bool(checkpointing)
        tokenizer.padding_side = "right"
        model.for_training = functools.partial(for_training, model)
        model.for_inference = functools.partial(for_inference, model)
        record_generate(model)
        return model

    def record_generate(model):
        inner = [m for m in _chain(model) if hasattr(m, "generate")][-1]  # the causal LM itself
        if getattr(inner, "_standin_recorded", False):
            return
        original = inner.generate

        def generate(*args, **kwargs):
            mask = kwargs.get("attention_mask")
            ids = kwargs.get("input_ids", args[0] if args else None)
            side = padding_side_of(mask) if mask is not None else ("none" if ids is None else "unknown")
            seen.generates.append({"side": side, "inference": bool(getattr(model, "_flag_for_generation", False)),
                                   "in_trainer_unwrap": seen.in_unwrap,
                                   "tokenizer_side": getattr(seen.tokenizer, "padding_side", None)})
            return original(*args, **kwargs)

        inner.generate = generate
        inner._standin_recorded = True

    inference_mode, training_mode = for_inference, for_training

    # --- FastLanguageModel (llama.py / loader.py) ------------------------------------------
    class FastLanguageModel:
        for_inference = staticmethod(inference_mode)
        for_training = staticmethod(training_mode)

        @staticmethod
        def from_pretrained(model_name, max_seq_length=2048, load_in_4bit=True, dtype=None, **kwargs):
            from transformers import AutoModelForCausalLM, AutoTokenizer

            path = Path(model_name)
            if not path.is_dir():
                raise OSError(f"the Unsloth stand-in loads local folders only (no downloads): {model_name}")
            adapter = (path / "adapter_config.json").exists()
            base_name = json.loads((path / "adapter_config.json").read_text())["base_model_name_or_path"] if adapter \
                else str(path)
            tok = AutoTokenizer.from_pretrained(str(path))
            model = AutoModelForCausalLM.from_pretrained(base_name, dtype=dtype or torch.float32)
            tok.padding_side = "left"  # llama.py: `tokenizer.padding_side = "left"` before returning
            seen.tokenizer = tok
            for m in _chain(model):
                m._saved_temp_tokenizer = tok
            if adapter:  # a saved LoRA: loaded trainable and patched like a fresh get_peft_model
                from peft import PeftModel

                model = attach(PeftModel.from_pretrained(model, str(path), is_trainable=True), tok, "unsloth")
            else:
                record_generate(model)
            return model, tok

        @staticmethod
        def get_peft_model(model, r=16, lora_alpha=16, lora_dropout=0.0, target_modules=None, random_state=3407,
                           use_gradient_checkpointing="unsloth", **kwargs):
            from peft import LoraConfig, get_peft_model

            torch.manual_seed(random_state)
            config = LoraConfig(r=r, lora_alpha=lora_alpha, lora_dropout=lora_dropout, target_modules=target_modules,
                                task_type="CAUSAL_LM")
            tok = getattr(model, "_saved_temp_tokenizer", None)
            return attach(get_peft_model(model, config), tok, use_gradient_checkpointing)

    # --- PatchRL: the trainer module's unwrap (rl.py unsloth_unwrap_model_for_generation) ---
    original_unwrap = grpo_trainer.unwrap_model_for_generation
    from contextlib import contextmanager

    @contextmanager
    def unsloth_unwrap_model_for_generation(model, *args, **kwargs):
        checkpointing = getattr(model, "_unsloth_gradient_checkpointing", False) \
            if getattr(model, "_standin_checkpointing", False) else False
        with original_unwrap(model, *args, **kwargs) as unwrapped:
            for_inference(model)
            seen.unwraps += 1
            seen.in_unwrap = True
            try:
                yield unwrapped
            finally:
                seen.in_unwrap = False
                for_training(model, use_gradient_checkpointing=checkpointing)

    # --- the generated UnslothGRPOTrainer (rl.py template; prepare_for_training_mode) ------
    base_trainer = grpo_trainer.GRPOTrainer
    masking_fixed = _version_tuple(version) >= _version_tuple(MASKING_FIX)

    class UnslothGRPOTrainer(base_trainer):
        def __init__(self, *args, model=None, **kwargs):
            if hasattr(model, "for_training"):
                model.for_training(use_gradient_checkpointing=getattr(model, "_unsloth_gradient_checkpointing", True))
            super().__init__(*args, model=model, **kwargs)
            if hasattr(model, "for_inference"):
                model.for_inference()

        def train(self, *args, **kwargs):
            was_training = getattr(self.model, "training", None)
            use_gc = getattr(self.model, "_unsloth_gradient_checkpointing", True)
            if hasattr(self.model, "for_training"):
                self.model.for_training(use_gradient_checkpointing=use_gc)
            out = super().train(*args, **kwargs)
            if hasattr(self.model, "for_inference"):
                if was_training is False:
                    self.model.for_inference()
                elif was_training is True:
                    self.model.for_training(use_gradient_checkpointing=use_gc)
            return out

        def _compute_loss(self, model, inputs):
            mask = inputs.get("tool_mask")
            seen.loss_masks.append(None if mask is None else mask.detach().cpu().tolist())
            if not masking_fixed:  # before 2026.5.9 the replaced loss never read tool_mask
                inputs = {k: v for k, v in inputs.items() if k != "tool_mask"}
            return super()._compute_loss(model, inputs)

    UnslothGRPOTrainer.__name__ = "UnslothGRPOTrainer"

    unsloth = types.ModuleType("unsloth")
    unsloth.__version__ = version
    unsloth.FastLanguageModel = FastLanguageModel
    unsloth.__standin__ = True
    zoo = types.ModuleType("unsloth_zoo")
    zoo.__version__ = zoo_version or version
    monkeypatch.setitem(sys.modules, "unsloth", unsloth)
    monkeypatch.setitem(sys.modules, "unsloth_zoo", zoo)
    monkeypatch.setattr(grpo_trainer, "unwrap_model_for_generation", unsloth_unwrap_model_for_generation)
    monkeypatch.setattr(grpo_trainer, "GRPOTrainer", UnslothGRPOTrainer)
    monkeypatch.setattr(trl, "GRPOTrainer", UnslothGRPOTrainer)
    return seen
