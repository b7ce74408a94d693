"""What every benchmark here shares: random prompts, timing, rounds that alternate, children.

A benchmark's figure is only worth quoting if it measured what it names, so a child process
that fails is an error with its stderr, never a silent figure (a first-token time used to be the
time until a crashed child's pipe closed), and results travel as types with named fields.
Machines like these drift by ~20% over minutes: engines take turns within each round, and
ratios compare figures from the same round.
"""

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
N_VOCAB = 50257


class BenchmarkError(Exception):
    """A measurement that did not measure what it names."""


class TokenTimes:
    """A transformers streamer that notes when each token arrives (the first put is the prompt)."""

    def __init__(self):
        self.times = []

    def put(self, value):
        self.times.append(time.perf_counter())

    def end(self):
        pass


def threads() -> int:
    """Cores this process may use: what OpenBLAS uses for NumPy, and what torch is given."""
    return len(os.sched_getaffinity(0))


def random_ids(n: int, seed: int | None = None) -> list[int]:
    """n random GPT-2 token ids, the same for the same n (and seed) on every run."""
    rng = np.random.default_rng(n if seed is None else seed)
    return [int(i) for i in rng.integers(0, N_VOCAB, n)]


def median_time(run: Callable[[], object], repeats: int) -> float:
    """Median seconds of run() over repeats calls, after one untimed call."""
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def alternate(rounds: int, tasks: dict[str, Callable[[], object]]) -> dict[str, list]:
    """Each task's results over rounds, the tasks taking turns and swapping order each round,
    so that a machine's drift falls on all of them alike."""
    results = {name: [] for name in tasks}
    for i in range(rounds):
        for name in (list(tasks) if i % 2 == 0 else list(tasks)[::-1]):
            results[name].append(tasks[name]())
    return results


def run_child(module: str, *args: str, env: dict | None = None, cwd: Path = ROOT) -> str:
    """`python -m module args` from the repository's root (or from cwd, another checkout, whose
    picogpt/ it then imports): the last line it printed. A child that fails raises
    BenchmarkError with the end of its stderr."""
    done = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, **(env or {})})
    if done.returncode or not done.stdout.strip():
        raise BenchmarkError(f"{module} {' '.join(args)} failed (exit {done.returncode}):\n"
                             f"{done.stderr[-3000:]}")
    return done.stdout.strip().splitlines()[-1]


def first_output_seconds(command: list[str], env: dict | None = None,
                         cwd: Path = ROOT) -> float:
    """Seconds from starting command until the first byte it writes to stdout. A command that
    exits without writing raises BenchmarkError with its stderr."""
    start = time.perf_counter()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                          env={**os.environ, **(env or {})}) as process:
        first = process.stdout.read(1)
        seconds = time.perf_counter() - start
        process.kill()
        stderr = process.stderr.read().decode(errors="replace")
    if not first:
        raise BenchmarkError(f"{' '.join(command)} wrote nothing to stdout:\n{stderr[-3000:]}")
    return seconds
