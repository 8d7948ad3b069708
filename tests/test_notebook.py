"""notebooks/lifestack_grpo.ipynb runs top to bottom (on CPU, with small sizes in place of
its parameters cell), so the Colab notebook cannot rot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "lifestack_grpo.ipynb"


def small_parameters(tmp: Path) -> str:
    train = {"DEVICE_PROFILE": "cpu", "N_STAGES": 1, "N_PROMPTS_PER_STAGE": 8, "WARM_START_SFT_STEPS": 20,
             "N_EVAL_PROMPTS": 2, "N_EVAL_EPISODES": 2, "INTEGRITY_PROMPTS": 1, "OUTPUT_DIR": str(tmp / "out"),
             "LOG_DIR": str(tmp / "logs"), "PLOT_PATH": str(tmp / "curve.png"), "CURVES_PATH": str(tmp / "curves.png"),
             "CURRICULUM_PLOT_PATH": str(tmp / "curriculum.png"), "FEEDBACK_DB": str(tmp / "fb.sqlite3"),
             "CPU_BASE_DIR": str(tmp / "base")}
    return (f'REPO_URL = ""\nINSTALL = False\nTRAIN = {train!r}\nEVAL_EPISODES = 1\nPLAY_DIFFICULTY = 1\n'
            'PUSH_TO_HUB = ""\nDRIVE_DIR = ""\n')


def test_the_notebook_has_one_parameters_cell_and_no_outputs():
    nb = json.loads(NOTEBOOK.read_text())
    tagged = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1 and "TRAIN = {}" in "".join(tagged[0]["source"])
    assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code")  # committed clean


@pytest.mark.slow
def test_the_notebook_runs_top_to_bottom_on_cpu(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    work = tmp_path / "work"
    work.mkdir()
    (work / "scripts").symlink_to(ROOT / "scripts")  # a checkout's layout; outputs land in tmp_path
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if "parameters" in cell.metadata.get("tags", []):
            cell.source = small_parameters(tmp_path)
    nbclient.NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(work)}}).execute()
    text = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "[eval]" in text and "| heuristic |" in text and "episode over:" in text
    assert "ESTIMATE (not measured) for a T4" in text and "No GPU" in text
    assert (tmp_path / "out" / "README.md").read_text().startswith("---\nlibrary_name: transformers")
    assert (work / "evaluation.png").exists() and (work / "evaluation.json").exists()
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) >= 3  # the training plots and the evaluation's
