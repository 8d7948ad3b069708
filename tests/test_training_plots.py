"""lifestack.training.plots: the reward curve, the curriculum plot and the training curves."""

from __future__ import annotations

import pytest

import lifestack.training.plots as PL


def _hlines(monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.axes import Axes

    lines = []
    real = Axes.axhline
    monkeypatch.setattr(Axes, "axhline", lambda self, y=0, *a, **k: lines.append((y, k.get("label"))) or real(self, y, *a, **k))
    return lines


def test_rolling_mean():
    assert PL.rolling_mean([]) == []
    assert PL.rolling_mean([1.0, 2.0, 3.0, 4.0], window=2) == [1.0, 1.5, 2.5, 3.5]
    assert PL.rolling_mean([5.0, -1.0, 2.0], window=1) == [5.0, -1.0, 2.0]
    xs = [float(i) for i in range(12)]
    out = PL.rolling_mean(xs)
    assert len(out) == 12
    assert out[0] == 0.0 and out[3] == pytest.approx(1.5)
    assert out[-1] == pytest.approx(sum(xs[2:]) / 10)  # default window 10



def test_reward_plot_has_no_threshold_and_says_what_it_compares(tmp_path, monkeypatch):
    lines = _hlines(monkeypatch)
    titles = []
    from matplotlib.axes import Axes

    real_title = Axes.set_title
    monkeypatch.setattr(Axes, "set_title", lambda self, t, *a, **k: titles.append(t) or real_title(self, t, *a, **k))
    rows = [{"episode": i, "reward": 0.1 * i} for i in range(3)]
    PL.plot_reward_curve(rows, rows, tmp_path / "curve.png", "warm-started model (GRPO's start)", cpu=True)
    # the threshold applies to the held-out single-step mean, not to an episode's mean
    assert lines == [] and (tmp_path / "curve.png").exists()
    assert "warm-started model" in titles[0] and PL.CPU_PLOT_NOTE in titles[0]


def test_reward_plot_labels_success_and_draws_random_play_and_the_heuristic_per_difficulty(tmp_path, monkeypatch):
    from matplotlib.axes import Axes

    drawn, legends = [], []
    real_hlines, real_legend = Axes.hlines, Axes.legend
    monkeypatch.setattr(Axes, "hlines", lambda self, y, x0, x1, *a, **k: drawn.append((y, x0, x1, k.get("label")))
                        or real_hlines(self, y, x0, x1, *a, **k))
    monkeypatch.setattr(Axes, "legend", lambda self, *a, **k: legends.append(
        [t.get_text() for t in real_legend(self, *a, **k).get_texts()]))
    rows = [{"episode": i, "reward": 0.1 * i, "outcome": "success" if i == 0 else "running"} for i in range(4)]
    refs = {"random": [{"difficulty": d, "reward": r, "outcome": "running"} for d, r in ((1, -0.2), (1, 0.0), (2, -0.4), (2, -0.6))],
            "heuristic": [{"difficulty": d, "reward": 0.8, "outcome": "success"} for d in (1, 1, 2, 2)],
            "oracle": [{"difficulty": d, "reward": 0.9, "outcome": "success"} for d in (1, 1, 2, 2)]}
    PL.plot_reward_curve(rows, rows, tmp_path / "curve.png", "warm-started model (GRPO's start)", references=refs)
    # one dashed step per difficulty, over that difficulty's episodes, at the policy's mean there
    assert [(round(y, 3), x0, x1) for y, x0, x1, _ in drawn] == [(-0.1, -0.5, 1.5), (-0.5, 1.5, 3.5), (0.8, -0.5, 1.5),
                                                                  (0.8, 1.5, 3.5)]
    assert [label for *_, label in drawn] == ["random (mean per difficulty), success 0%", None,
                                              "heuristic (mean per difficulty), success 100%", None]
    assert "GRPO-trained (rolling mean, 10), success 25%" in legends[0] and not any("oracle" in t for t in legends[0])
    assert PL.success_rate(rows) == 0.25 and PL.success_rate([]) is None



def test_curriculum_plot_draws_the_threshold_on_the_held_out_reward(tmp_path, monkeypatch):
    lines = _hlines(monkeypatch)
    stages = [{"stage": 1, "difficulty": 1, "mean_task_reward": 0.7}, {"stage": 2, "difficulty": 2, "mean_task_reward": 0.4}]
    assert PL.plot_curriculum(stages, tmp_path / "cur.png", threshold=0.35)
    assert lines == [(0.35, "ADVANCE_THRESHOLD 0.35")] and (tmp_path / "cur.png").exists()
    assert not PL.plot_curriculum([], tmp_path / "none.png", 0.6)



def test_curriculum_plot_says_why_the_difficulty_never_rose():
    flat = [{"stage": k, "difficulty": 1, "mean_task_reward": r, "advance": False} for k, r in ((1, 0.4), (2, 0.1))]
    note = PL.curriculum_note(flat, 0.6, cpu=True)
    assert "never advanced" in note and "best +0.400" in note and "difficulty 1" in note and "docs/learning.md" in note
    assert "docs/learning.md" not in PL.curriculum_note(flat, 0.6, cpu=False)
    rose = [{**flat[0], "advance": True}, {**flat[1], "difficulty": 2}]
    assert PL.curriculum_note(rose, 0.6, cpu=True) is None
    assert PL.curriculum_note([{**flat[0], "difficulty": 5}], 0.6, cpu=True) is None



def test_curriculum_plot_marks_moves_and_the_retreat_line(tmp_path):
    stages = [{"stage": 1, "difficulty": 1, "mean_task_reward": 0.7, "move": "advance", "advance": True},
              {"stage": 2, "difficulty": 2, "mean_task_reward": 0.1, "move": "stay", "advance": False},
              {"stage": 3, "difficulty": 2, "mean_task_reward": 0.1, "move": "retreat", "advance": False}]
    path = tmp_path / "c.png"
    assert PL.plot_curriculum(stages, path, 0.6, retreat=0.3)
    assert path.stat().st_size > 1000



def test_training_curves_say_when_they_are_a_cpu_pipeline_check(tmp_path, monkeypatch):
    import json

    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.axes import Axes

    titles = []
    real_title = Axes.set_title
    monkeypatch.setattr(Axes, "set_title", lambda self, t, *a, **k: titles.append(t) or real_title(self, t, *a, **k))
    history = tmp_path / "train_history.jsonl"
    history.write_text("".join(json.dumps({"stage": 1 + i // 2, "rewards/reward_format_fn/mean": 0.1 * i}) + "\n"
                               for i in range(4)))
    assert PL.plot_training_curves(history, tmp_path / "cpu.png", cpu=True)
    assert PL.plot_training_curves(history, tmp_path / "gpu.png")
    assert PL.CPU_PLOT_NOTE in titles[0] and PL.CPU_PLOT_NOTE not in titles[1]
    assert (tmp_path / "cpu.png").exists() and (tmp_path / "gpu.png").exists()
    assert not PL.plot_training_curves(tmp_path / "missing.jsonl", tmp_path / "none.png", cpu=True)
