"""Distributed helpers: a single process unless launched by ``torchrun`` / ``accelerate``.

Rank and world size come from the launcher's environment; torch.distributed is imported
only when there are several processes.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any, Iterator


def world_info() -> tuple[int, int]:
    """(rank, world size) from the launcher's environment."""
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def is_main_process() -> bool:
    return world_info()[0] == 0


def broadcast_object(obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank (identity in a single process)."""
    if world_info()[1] == 1:
        return obj
    import torch.distributed as dist

    if not dist.is_initialized():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier() -> None:
    if world_info()[1] > 1:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.barrier()


@contextmanager
def main_process_first() -> Iterator[None]:
    """Rank 0 runs the block first, then the other ranks (what rank 0 creates, such as the
    feedback database or the tiny model, the others then find); a plain block in a single process."""
    if not is_main_process():
        barrier()
    try:
        yield
    finally:
        if is_main_process():
            barrier()


COLLECTIVE_TIMEOUT_S = 1800  # the Trainer's own ddp_timeout: the others wait while rank 0 evaluates and saves


def init_distributed(cpu: bool = False) -> None:
    """Join the process group early (gloo on CPU, NCCL on GPUs) so barriers work before
    the first trainer exists; a no-op in a single process. ``cpu``: the CPU profile, gloo
    even where CUDA is present. The group is made once (accelerate's PartialState is a
    singleton, so the Trainer's ``ddp_timeout`` never reaches it): its timeout is set here,
    or NCCL's 10 minutes would abort ranks waiting on rank 0's evaluation or final save."""
    if world_info()[1] > 1:
        from datetime import timedelta

        from accelerate import PartialState

        PartialState(cpu=cpu, timeout=timedelta(seconds=COLLECTIVE_TIMEOUT_S))


def log(msg: str) -> None:
    if is_main_process():
        print(msg, flush=True)
