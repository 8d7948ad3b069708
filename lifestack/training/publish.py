"""Publishing to the Hugging Face Hub: the final model folder with its card and plots
(``PUSH_TO_HUB``), and evaluation results appended to an existing card
(``scripts/evaluate.py --push``).

A network or permission failure is one clear line and ``False``: the local files are never
touched. ``api`` defaults to ``huggingface_hub.HfApi()``; tests pass a recorder.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

CARD = "README.md"


def _api(api: Any = None) -> Any:
    if api is not None:
        return api
    from huggingface_hub import HfApi

    return HfApi()


def _say_failed(what: str, repo_id: str, exc: Exception) -> None:
    print(f"[publish] could not {what} {repo_id} ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''});"
          " the local files are unchanged", file=sys.stderr, flush=True)


def push_run(repo_id: str, folder: str | Path, extra_files: Sequence[str | Path] = (), api: Any = None) -> bool:
    """Create ``repo_id`` (a model repo; kept if it exists) and upload ``folder`` (the
    final model, tokenizer and its ``README.md`` card) plus ``extra_files`` (the plots) at
    the repo's root, replacing what the repo held: a file left from an earlier push (a LoRA
    adapter beside new full weights) would be loaded instead of this model. Step
    checkpoints, stage folders and archives stay local."""
    folder = Path(folder)
    try:
        hub = _api(api)
        hub.create_repo(repo_id, repo_type="model", exist_ok=True)
        hub.upload_folder(folder_path=str(folder), repo_id=repo_id, repo_type="model",
                          ignore_patterns=["stage_*", "stage_*/**", "previous_run_*", "previous_run_*/**",
                                           "cpu_base_model/**", "merged/**", ".final_save/**", "*.tmp*"],
                          delete_patterns="*",  # the commit replaces the repo's files (.gitattributes kept)
                          commit_message="LifeStack GRPO: final model and card")
        for path in map(Path, extra_files):
            if path.is_file():
                hub.upload_file(path_or_fileobj=str(path), path_in_repo=path.name, repo_id=repo_id, repo_type="model",
                                commit_message=f"LifeStack GRPO: {path.name}")
    except Exception as exc:  # network, auth, quota: one line, the run's files stay as they are
        _say_failed("push to", repo_id, exc)
        return False
    print(f"[publish] pushed {folder} to https://huggingface.co/{repo_id}", flush=True)
    return True


def append_to_card(repo_id: str, section: str, api: Any = None) -> bool:
    """Append ``section`` (markdown) to the model card of ``repo_id`` (which must exist)."""
    try:
        hub = _api(api)
        card_path = hub.hf_hub_download(repo_id=repo_id, filename=CARD, repo_type="model")
        text = Path(card_path).read_text(encoding="utf-8").rstrip() + "\n\n" + section.strip() + "\n"
        hub.upload_file(path_or_fileobj=text.encode("utf-8"), path_in_repo=CARD, repo_id=repo_id, repo_type="model",
                        commit_message="LifeStack: evaluation results")
    except Exception as exc:
        _say_failed("update the card of", repo_id, exc)
        return False
    print(f"[publish] appended the evaluation to https://huggingface.co/{repo_id}", flush=True)
    return True


def finish_run(cfg: dict[str, Any], defaults: dict[str, Any], summary: dict[str, Any], state: dict[str, Any],
               api: Any = None) -> Path:
    """After the final evaluation (rank 0): copy the plots next to the final model, write
    its card (``OUTPUT_DIR/README.md``, :func:`lifestack.training.model_card.model_card`),
    list both in the run's ``state`` (its ``final_files``, so ``RESUME=False`` moves them
    aside with the run; the state is written once more), and push the folder when
    ``PUSH_TO_HUB`` names a repo."""
    import shutil

    from lifestack.training.model_card import model_card
    from lifestack.training.run_state import RunPaths, write_json_atomic

    out = Path(cfg["OUTPUT_DIR"])
    plots = []
    for key in ("PLOT_PATH", "CURRICULUM_PLOT_PATH", "CURVES_PATH"):
        src = Path(cfg[key])
        if src.is_file() and src.resolve() != (out / src.name).resolve():
            shutil.copyfile(src, out / src.name)
        if (out / src.name).is_file():
            plots.append(src.name)
    card = out / CARD
    card.write_text(model_card(cfg, defaults, state, summary, plots, cfg.get("PUSH_TO_HUB", "")), encoding="utf-8")
    state["final_files"] = sorted(set(state.get("final_files", [])) | {CARD, *plots})
    write_json_atomic(RunPaths.of(cfg).state, state)
    print(f"[card] model card: {card}", flush=True)
    if cfg.get("PUSH_TO_HUB"):
        push_run(cfg["PUSH_TO_HUB"], out, api=api)
    return card
