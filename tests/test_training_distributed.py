"""lifestack.training.distributed: the process group the script joins before any trainer
exists (the two-process run itself: tests/test_train_e2e.py)."""

from __future__ import annotations

from datetime import timedelta

import accelerate

import lifestack.training.distributed as D


def test_the_early_process_group_has_the_trainers_timeout_and_the_profiles_device(monkeypatch):
    """accelerate's PartialState is a singleton: the group made here is the run's, so the
    Trainer's ddp_timeout never reaches it and NCCL's default of 10 minutes would apply;
    and the CPU profile must take gloo even where CUDA is present."""
    made = []
    monkeypatch.setattr(accelerate, "PartialState", lambda **kw: made.append(kw))
    monkeypatch.setenv("WORLD_SIZE", "1")
    D.init_distributed(cpu=True)
    assert made == []  # one process: no group
    monkeypatch.setenv("WORLD_SIZE", "2")
    D.init_distributed(cpu=True)
    D.init_distributed()
    assert made == [{"cpu": True, "timeout": timedelta(seconds=1800)}, {"cpu": False, "timeout": timedelta(seconds=1800)}]


def test_rank_and_world_size_come_from_the_launcher(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    assert D.world_info() == (1, 3) and not D.is_main_process()
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    assert D.world_info() == (0, 1) and D.is_main_process()
