"""A/B two versions of picogpt in one process, taking turns, on the same weights.

    git worktree add /tmp/old HEAD~3
    python -m scripts.benchmarks.ab /tmp/old . --models_dir /tmp/bench/models

Each version's `picogpt/` folder is imported under another package name (picogpt_a,
picogpt_b), so both run side by side; the weights are loaded once, by version b, and handed to
both.
Only the public API is timed (`generate`, `score`), so versions with different internals
compare: greedy decoding of 40 tokens after 16 and after 512 (the prompt's feeding included,
and timed apart: 512 and 16 tokens then one), 1 and 8 samples with top-k 50 (and the ratio of
their tokens/s), and scoring 4,096 tokens at stride 512. Rounds alternate a, b, b, a, ... so
drift over minutes falls on both; the medians and b/a are printed.
Peak memory needs a process of its own: scripts.benchmarks.speed measures it.
"""

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

from scripts.benchmarks.common import alternate, random_ids


def import_as(source: Path, name: str):
    """The package in source/picogpt, imported under another name (its imports are relative)."""
    spec = importlib.util.spec_from_file_location(
        name, source / "picogpt" / "__init__.py",
        submodule_search_locations=[str(source / "picogpt")])
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    return package


def find_module(package: str, *names: str):
    """The first of package's modules names that exists (a module moved between versions)."""
    for name in names:
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError:
            continue
    raise ModuleNotFoundError(f"none of {names} in {package}")


def timed(run) -> float:
    """Seconds one call of run takes."""
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", type=Path, help="folder holding version a's picogpt/")
    parser.add_argument("b", type=Path, help="folder holding version b's picogpt/")
    parser.add_argument("--models_dir", required=True)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--only", default="", help="time only the tasks whose names hold this")
    args = parser.parse_args()
    versions = {key: import_as(path, f"picogpt_{key}") for key, path in (("a", args.a),
                                                                          ("b", args.b))}
    loaded = versions["b"].load_encoder_hparams_and_params
    command = find_module("picogpt_b", "cli.command", "command")  # before the house move: .command
    command.reuse_freed_memory()
    _, hparams, params = loaded("124M", args.models_dir)
    n_head = hparams["n_head"]

    def tasks(package) -> dict:
        generate, score = package.generate, importlib.import_module(f"{package.__name__}.score")
        samples = getattr(package, "generate_samples", None)  # older versions: n_samples=8

        def sampled(n: int):  # n samples of 40 tokens after 16, top-k 50, in one batch
            if n == 1:
                return list(generate(random_ids(16), params, n_head, 40, top_k=50, seed=0,
                                     stop_at_end=False))
            if samples is None:
                return list(generate(random_ids(16), params, n_head, 40, top_k=50, seed=0,
                                     n_samples=n, stop_at_end=False))
            return list(samples(random_ids(16), params, n_head, 40, top_k=50, seed=0,
                                n_samples=n, stop_at_end=False))

        return {
            "prefill 512 + 1 token (s)": lambda: list(generate(random_ids(512), params, n_head, 1)),
            "prefill 16 + 1 token (s)": lambda: list(generate(random_ids(16), params, n_head, 1)),
            "decode 40 after 16 (s)": lambda: list(generate(random_ids(16), params, n_head, 40,
                                                            stop_at_end=False)),
            "decode 40 after 512 (s)": lambda: list(generate(random_ids(512), params, n_head, 40,
                                                             stop_at_end=False)),
            "1 sample x 40 after 16 (s)": lambda: sampled(1),
            "8 samples x 40 after 16 (s)": lambda: sampled(8),
            "score 4096, stride 512 (s)": lambda: score.score(random_ids(4096), params, n_head,
                                                              stride=512),
        }

    runs = {key: {task: run for task, run in tasks(package).items() if args.only in task}
            for key, package in versions.items()}
    for run in runs["a"].values():  # warm up: page cache, allocator
        run()
    times = alternate(args.rounds, {(key, task): (lambda run=run: timed(run))
                                    for key in runs for task, run in runs[key].items()})
    print(f"{'':30}{'a':>9}{'b':>9}{'b/a':>7}")
    for task in runs["a"]:
        a, b = (statistics.median(times[key, task]) for key in ("a", "b"))
        print(f"{task:30}{a:9.3f}{b:9.3f}{b / a:7.3f}")
    one, eight = "1 sample x 40 after 16 (s)", "8 samples x 40 after 16 (s)"
    if one in runs["a"] and eight in runs["a"]:  # tokens/s of 8 samples over one sample's
        ratios = {key: 8 * statistics.median(times[key, one])
                  / statistics.median(times[key, eight]) for key in ("a", "b")}
        print("8 samples / 1 sample, tokens/s: "
              + ", ".join(f"{key} {ratio:.2f}x" for key, ratio in ratios.items()))


if __name__ == "__main__":
    main()
