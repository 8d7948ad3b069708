"""lifestack.training.publish and model_card: the card written with every final save, and
pushing to the hub without the network (a recorder stands in for huggingface_hub)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import train_trl as T  # noqa: E402  (the constants: a card lists what a run changed)
from lifestack.training import model_card as MC, publish as PB  # noqa: E402


class Recorder:
    """What would have been uploaded; ``fail``: raise like a network error instead."""

    def __init__(self, fail: bool = False, card: Path | None = None) -> None:
        self.calls, self.fail, self.card = [], fail, card

    def _call(self, name, **kw):
        if self.fail:
            raise ConnectionError("Network is unreachable\nmore detail")
        self.calls.append((name, kw))

    def create_repo(self, repo_id, **kw):
        self._call("create_repo", repo_id=repo_id, **kw)

    def upload_folder(self, **kw):
        self._call("upload_folder", **kw)

    def upload_file(self, **kw):
        self._call("upload_file", **kw)

    def hf_hub_download(self, **kw):
        self._call("hf_hub_download", **kw)
        return str(self.card)


STAGES = [{"stage": 1, "difficulty": 1, "mean_task_reward": 0.41, "valid_json_rate": 0.9, "move": "stay",
           "reason": "0.3 <= +0.410 <= 0.6"},
          {"stage": 2, "difficulty": 1, "mean_task_reward": 0.65, "valid_json_rate": 1.0, "move": "advance",
           "reason": "+0.650 > 0.6"}]
SUMMARY = {"episodes": 50, "trained_mean": 0.2, "base_mean": -0.1, "trained_valid_json": 0.9, "base_valid_json": 0.5,
           "trained_success": 0.3, "base_success": 0.1, "start_model": "warm-started model (GRPO's start)",
           "references": {"random": {"mean": -0.2, "success": 0.0}, "oracle": {"mean": 0.8, "success": 0.9}}}


def cfg_for(tmp_path, *argv, profile="cpu"):
    return T.build_config([f"--OUTPUT_DIR={tmp_path / 'out'}", f"--LOG_DIR={tmp_path / 'logs'}",
                           f"--PLOT_PATH={tmp_path / 'curve.png'}", f"--CURVES_PATH={tmp_path / 'curves.png'}",
                           f"--CURRICULUM_PLOT_PATH={tmp_path / 'cur.png'}", *argv], profile=profile)


def test_card_has_hub_metadata_the_changes_the_curriculum_and_the_evaluation(tmp_path):
    cfg = cfg_for(tmp_path, "--SEED=7")
    card = MC.model_card(cfg, T.default_config(), {"stages": STAGES}, SUMMARY, ["curve.png"])
    head, _, body = card.partition("\n---\n")
    assert head.startswith("---\nlibrary_name: transformers") and "pipeline_tag: text-generation" in head
    assert "CPU pipeline check, not a trained model" in body  # the CPU profile says so
    assert "| `SEED` | `42` | `7` |" in body and "| `WARM_START_SFT_STEPS` | `0` | `1000` |" in body
    assert "| 2 | 1 | +0.650 | 100% | advance: +0.650 > 0.6 |" in body
    assert "| this model | +0.200 | 30% | 90% |" in body and "| oracle (reference policy) | +0.800 | 90% |" in body
    assert "![curve](curve.png)" in body and "AutoModelForCausalLM.from_pretrained" in body
    gpu = MC.model_card(cfg_for(tmp_path, profile="peft"), T.default_config(), {"stages": []}, {}, [], "me/model")
    assert "base_model: Qwen/Qwen2.5-1.5B-Instruct" in gpu and "CPU pipeline check" not in gpu
    assert "AutoPeftModelForCausalLM.from_pretrained('me/model')" in gpu and "- lora" in gpu


def test_card_gives_the_paired_change_with_its_interval_when_the_run_measured_it(tmp_path):
    from lifestack.training.run_evaluation import paired_rows

    before = [{"seed": i, "difficulty": 1 + i % 5, "outcome": "timeout", "reward": 0.0} for i in range(10)]
    after = [{**r, "outcome": "success" if r["seed"] < 3 else "timeout", "reward": 0.1} for r in before]
    cfg = cfg_for(tmp_path)
    card = MC.model_card(cfg, T.default_config(), {"stages": STAGES}, {**SUMMARY, "paired": paired_rows(before, after)})
    line = next(ln for ln in card.splitlines() if ln.startswith("This model minus"))
    assert "warm-started model (GRPO's start), paired over the same 10 starts" in line
    assert "episode reward +0.100 (95% CI +0.100 .. +0.100)" in line and "success +30.0% (95% CI" in line
    assert "This model minus" not in MC.model_card(cfg, T.default_config(), {"stages": STAGES}, SUMMARY)  # older summary


def test_card_prints_no_valid_json_figure_for_the_reference_policies_it_did_not_measure(tmp_path):
    """The final evaluation measures the reference policies' mean reward and success, not
    whether their answers parse: their valid-JSON cell says so instead of a figure."""
    cfg = cfg_for(tmp_path)
    card = MC.model_card(cfg, T.default_config(), {"stages": STAGES}, SUMMARY)
    rows = [line for line in card.splitlines() if "(reference policy)" in line]
    assert rows == ["| random (reference policy) | -0.200 | 0% | — |", "| oracle (reference policy) | +0.800 | 90% | — |"]
    assert "—: not measured" in card
    measured = {**SUMMARY, "references": {"oracle": {"mean": 0.8, "success": 0.9, "valid_json": 0.75}}}
    card = MC.model_card(cfg, T.default_config(), {"stages": STAGES}, measured)
    assert "| oracle (reference policy) | +0.800 | 90% | 75% |" in card and "not measured" not in card


def test_finish_run_writes_the_card_copies_the_plots_and_lists_them_for_archiving(tmp_path):
    cfg = cfg_for(tmp_path)
    out = Path(cfg["OUTPUT_DIR"])
    out.mkdir(parents=True)
    (tmp_path / "curve.png").write_bytes(b"png")
    api = Recorder()
    card = PB.finish_run(cfg, T.default_config(), SUMMARY, {"version": 1, "stages": STAGES, "final_files": ["config.json"]},
                         api=api)
    assert card == out / "README.md" and "## Final evaluation" in card.read_text()
    assert (out / "curve.png").read_bytes() == b"png"
    state = json.loads((out / "curriculum_state.json").read_text())
    assert state["final_files"] == ["README.md", "config.json", "curve.png"]
    assert api.calls == []  # PUSH_TO_HUB empty: nothing leaves the machine


def test_push_uploads_the_folder_and_plots_and_a_failure_is_one_line(tmp_path, capsys):
    cfg = cfg_for(tmp_path, "--PUSH_TO_HUB=me/lifestack-grpo")
    out = Path(cfg["OUTPUT_DIR"])
    out.mkdir(parents=True)
    (out / "model.safetensors").write_bytes(b"w")
    api = Recorder()
    PB.finish_run(cfg, T.default_config(), SUMMARY, {"version": 1, "stages": []}, api=api)
    names = [c[0] for c in api.calls]
    assert names[:2] == ["create_repo", "upload_folder"]
    assert api.calls[1][1]["folder_path"] == str(out) and api.calls[1][1]["repo_id"] == "me/lifestack-grpo"
    assert "stage_*" in api.calls[1][1]["ignore_patterns"]
    assert api.calls[1][1]["delete_patterns"] == "*"  # an earlier push's adapter files must not outlive it
    before = sorted(p.name for p in out.iterdir())
    assert not PB.push_run("me/x", out, api=Recorder(fail=True))
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["[publish] could not push to me/x (ConnectionError: Network is unreachable); the local files are unchanged"]
    assert sorted(p.name for p in out.iterdir()) == before


def test_evaluation_results_are_appended_to_an_existing_card(tmp_path, capsys):
    card = tmp_path / "README.md"
    card.write_text("---\nlibrary_name: peft\n---\n# m\n")
    api = Recorder(card=card)
    assert PB.append_to_card("me/m", "## Evaluation\n\n| a |\n", api=api)
    upload = [kw for name, kw in api.calls if name == "upload_file"][0]
    assert upload["path_in_repo"] == "README.md" and upload["path_or_fileobj"].decode().endswith("# m\n\n## Evaluation\n\n| a |\n")
    assert not PB.append_to_card("me/m", "x", api=Recorder(fail=True))
    assert "could not update the card of me/m" in capsys.readouterr().err


def test_push_to_hub_must_be_a_repo_id():
    import pytest

    with pytest.raises(T.ConfigError, match="PUSH_TO_HUB"):
        T.build_config(["--PUSH_TO_HUB=not a repo"], profile="cpu")
    assert T.build_config(["--PUSH_TO_HUB=me/my-model.v2"], profile="cpu")["PUSH_TO_HUB"] == "me/my-model.v2"
