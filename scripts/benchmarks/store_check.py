"""What params/'s stamp check costs a start: a random 1558M-shaped store (6.2 GB), loaded as
written (each file's stamp is the one recorded: no weight is read to check it) and with every
file's stamp changed, as a copy or a read-only clone has them (each file is read whole and its
CRC-32 compared with the manifest's). Each load is a child process, as a start is.

    python -m scripts.benchmarks.store_check --work /tmp/store --rounds 3

It writes ~6.2 GB under --work (delete it after) and prints the seconds of each load.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from picogpt.cli.prepare import find_vocab
from picogpt.files.openai import RELEASED_SHAPES
from picogpt.files.params import expected_shapes
from picogpt.files.store import write_params

LOAD = ("import sys; from picogpt.files.openai import load_encoder_hparams_and_params as load; "
        "load('big', sys.argv[1])")


def random_store(folder: Path) -> None:
    """A 1558M-shaped model folder of random float32 weights, one tensor in memory at a time."""
    n_layer, n_embd, n_head = RELEASED_SHAPES["1558M"]
    hparams = {"n_vocab": 50257, "n_ctx": 1024, "n_embd": n_embd, "n_head": n_head,
               "n_layer": n_layer}
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True)
    write_params(folder, ((name, rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02))
                          for name, shape in expected_shapes(hparams).items()), source=None)
    vocab = find_vocab(None, "models")
    for name in ("encoder.json", "vocab.bpe"):
        shutil.copyfile(vocab / name, folder / name)
    (folder / "hparams.json").write_text(json.dumps(hparams))


def load_seconds(models_dir: Path) -> float:
    """The seconds of a child process that loads the folder (and then exits)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", LOAD, str(models_dir)], check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    folder = args.work / "big"
    if not (folder / "hparams.json").is_file():
        start = time.perf_counter()
        random_store(folder)
        print(f"wrote {folder}: {time.perf_counter() - start:.1f} s")
    size = sum(path.stat().st_size for path in (folder / "params").iterdir())
    print(f"params/: {size / 1e9:.2f} GB in {len(list((folder / 'params').iterdir()))} files")
    print("as written:", " ".join(f"{load_seconds(args.work):.2f}" for _ in range(args.rounds)))
    for path in (folder / "params").glob("*.npy"):  # a new mtime and ctime: the stamp changed
        os.utime(path)
    print("every stamp changed:", " ".join(f"{load_seconds(args.work):.2f}"
                                           for _ in range(args.rounds)))


if __name__ == "__main__":
    main()
