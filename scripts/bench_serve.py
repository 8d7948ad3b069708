"""Throughput of the environment server: N concurrent clients play episodes on a local
server (python -m lifestack.serve started here as its own process, or --url), each its
own session; the same episodes are then stepped in-process. Prints the median over R
repeats of steps per second, both ways, and their ratio.

    python scripts/bench_serve.py --clients 64 --episodes 4 --repeats 3

Answers are precomputed in-process (heuristic, random valid, some garbage) so the timed
part is the server alone; every remote trajectory is checked against its in-process one.
Needs the serve extra (pip install -e ".[serve]"). Localhost only.
"""

from __future__ import annotations

import argparse
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lifestack.client import RemoteEpisode  # noqa: E402
from lifestack.episodes import Episode  # noqa: E402
from lifestack.policies import mixed  # noqa: E402
from lifestack.scenarios import sample_scenario  # noqa: E402


def workload(n_episodes: int, horizon: int, first_seed: int) -> list[tuple[int, int, list[str], list[float]]]:
    """(seed, difficulty, answers, in-process rewards) per episode."""
    out = []
    for i in range(n_episodes):
        seed, difficulty = first_seed + i, 1 + i % 5
        ep = Episode.from_scenario(sample_scenario(seed, difficulty), horizon)
        act, answers = mixed(random.Random(seed), 0.1, 0.4, "not sure"), []
        while not ep.done:
            a = act(ep.env)
            answers.append(a)
            ep.step(a)
        out.append((seed, difficulty, answers, [t.reward for t in ep.turns]))
    return out


def in_process(work, horizon: int) -> tuple[int, float]:
    t0, steps = time.perf_counter(), 0
    for seed, difficulty, answers, _ in work:
        ep = Episode.from_scenario(sample_scenario(seed, difficulty), horizon)
        for a in answers:
            ep.step(a)
            steps += 1
    return steps, time.perf_counter() - t0


def remote(url: str, work, horizon: int, clients: int) -> tuple[int, float]:
    """``clients`` threads, each with its own connection, share the episodes round-robin."""
    errors: list[str] = []
    start = threading.Barrier(clients + 1)

    def run(mine) -> None:
        start.wait()
        for seed, difficulty, answers, rewards in mine:
            try:
                with RemoteEpisode(url, seed=seed, difficulty=difficulty, horizon=horizon) as ep:
                    for a in answers:
                        ep.step(a)
            except Exception as exc:  # a refused or lost request: the run's figure would count unplayed steps
                errors.append(f"seed {seed}: {type(exc).__name__}: {exc}")
                return
            if [t.reward for t in ep.turns] != rewards:
                errors.append(f"seed {seed}: the remote trajectory differs from the in-process one")

    threads = [threading.Thread(target=run, args=(work[i::clients],)) for i in range(clients)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise SystemExit("\n".join(errors))
    return sum(len(w[2]) for w in work), elapsed


@contextmanager
def server_process(max_sessions: int, horizon: int):
    """python -m lifestack.serve on a free localhost port, in its own process (as it runs
    in production: the clients here do not share its interpreter lock)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = Path(__file__).resolve().parent.parent
    # every client here comes from 127.0.0.1: the per-client quota must hold them all
    proc = subprocess.Popen([sys.executable, "-m", "lifestack.serve", "--port", str(port), "--max-sessions",
                             str(max_sessions), "--max-sessions-per-client", str(max_sessions),
                             "--horizon", str(horizon)], cwd=root,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(url + "/health", timeout=1).read()
                break
            except OSError:
                if proc.poll() is not None:
                    raise SystemExit("the server exited; is the serve extra installed?")
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, default=64, help="concurrent sessions")
    p.add_argument("--episodes", type=int, default=4, help="episodes per client per repeat")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--horizon", type=int, default=8)
    p.add_argument("--url", help="an already running server (default: start one here)")
    args = p.parse_args()
    work = workload(args.clients * args.episodes, args.horizon, first_seed=10_000)
    steps = sum(len(w[2]) for w in work)
    requests = steps + 2 * len(work)  # each episode also resets and closes its session
    print(f"{args.clients} clients x {args.episodes} episodes = {len(work)} episodes, {steps} steps "
          f"({requests} HTTP requests) per repeat, horizon {args.horizon}, {args.repeats} repeats")

    def bench(url: str) -> list[float]:
        rates = []
        for r in range(args.repeats):
            n, dt = remote(url, work, args.horizon, args.clients)
            rates.append(n / dt)
            print(f"  repeat {r + 1}: server {n / dt:6.0f} steps/s, {requests / dt:6.0f} requests/s ({dt:.2f} s)")
        return rates

    if args.url:
        server_rates = bench(args.url)
    else:
        with server_process(max(256, args.clients), args.horizon) as url:
            server_rates = bench(url)
    local_rates = []
    for _ in range(args.repeats):
        n, dt = in_process(work, args.horizon)
        local_rates.append(n / dt)
    srv, loc = statistics.median(server_rates), statistics.median(local_rates)
    print(f"median: server {srv:.0f} steps/s ({args.clients} concurrent sessions), in-process {loc:.0f} steps/s "
          f"(one thread); server/in-process = {srv / loc:.3f}")


if __name__ == "__main__":
    main()
