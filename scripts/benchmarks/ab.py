"""A/B two versions of picogpt in one process, taking turns, on the same weights.

    git worktree add /tmp/old HEAD~3
    python scripts/ab.py /tmp/old . --models_dir /tmp/bench/models

Each version's `picogpt/` folder is copied under another package name (picogpt_a, picogpt_b),
so both import side by side; the weights are loaded once, by version b, and handed to both.
Only the public API is timed (`generate`, `score`), so versions with different internals
compare: greedy decoding of 40 tokens after 16 and after 512 (the prompt's feeding included,
and timed apart), 8 samples with top-k 50, and scoring 4,096 tokens at stride 512. Rounds
alternate a, b, b, a, ... so drift over minutes falls on both; the medians and b/a are printed.
Peak memory needs a process of its own: scripts/bench.py measures it.
"""

import argparse
import importlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def import_copy(source: Path, name: str, into: Path):
    """source/picogpt imported as package `name`."""
    shutil.copytree(source / "picogpt", into / name)
    sys.path.insert(0, str(into))
    return (importlib.import_module(f"{name}.generate"), importlib.import_module(f"{name}.score"),
            importlib.import_module(f"{name}.load"))


def ids(n: int) -> list[int]:
    return [int(i) for i in np.random.default_rng(n).integers(0, 50257, n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", type=Path, help="folder holding version a's picogpt/")
    parser.add_argument("b", type=Path, help="folder holding version b's picogpt/")
    parser.add_argument("--models_dir", required=True)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="picogpt-ab-"))
    versions = {"a": import_copy(args.a, "picogpt_a", work),
                "b": import_copy(args.b, "picogpt_b", work)}
    importlib.import_module("picogpt_b.cli").reuse_freed_memory()
    _, hparams, params = versions["b"][2].load_encoder_hparams_and_params("124M",
                                                                          args.models_dir)
    n_head = hparams["n_head"]

    def tasks(generate, score):
        return {
            "prefill 512 + 1 token (s)": lambda: list(generate(ids(512), params, n_head, 1)),
            "decode 40 after 16 (s)": lambda: list(generate(ids(16), params, n_head, 40,
                                                            stop_at_end=False)),
            "decode 40 after 512 (s)": lambda: list(generate(ids(512), params, n_head, 40,
                                                             stop_at_end=False)),
            "8 samples x 40 after 16 (s)": lambda: list(generate(
                ids(16), params, n_head, 40, top_k=50, seed=0, n_samples=8, stop_at_end=False)),
            "score 4096, stride 512 (s)": lambda: score.score(ids(4096), params, n_head,
                                                              stride=512),
        }

    runs = {key: tasks(module.generate, score) for key, (module, score, _) in versions.items()}
    times = {key: {task: [] for task in runs[key]} for key in runs}
    for task in runs["a"].values():  # warm up: page cache, allocator
        task()
    for i in range(args.rounds):
        for key in ("a", "b") if i % 2 == 0 else ("b", "a"):
            for task, run in runs[key].items():
                start = time.perf_counter()
                run()
                times[key][task].append(time.perf_counter() - start)
    print(f"{'':30}{'a':>9}{'b':>9}{'b/a':>7}")
    for task in runs["a"]:
        a, b = (statistics.median(times[key][task]) for key in ("a", "b"))
        print(f"{task:30}{a:9.3f}{b:9.3f}{b / a:7.3f}")


if __name__ == "__main__":
    main()
