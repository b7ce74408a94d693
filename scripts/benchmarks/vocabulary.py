"""Training on a vocabulary of the text's own (--n_vocab) against GPT-2's, at the same shape.

Learns merges from a text with picogpt.merges (timed), encodes the text both ways, then times
picogpt's training step (loss_and_grads and adamw, as train.py runs them) at train.py's default
shape (2 layers, 4 heads, n_embd 128, n_ctx 128, 16 windows) with the learned vocabulary and
with GPT-2's 50,257 tokens, rounds alternating, in this one process. The ratio is of medians.

    python -m scripts.benchmarks.vocabulary --text /tmp/book.txt --n_vocab 512 --rounds 3
"""

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from picogpt.backward import loss_and_grads
from picogpt.cli.prepare import find_vocab
from picogpt.encoder import Encoder
from picogpt.files.folder_vocab import read_vocab
from picogpt.merges import bpe_files, learn_merges
from picogpt.train import adamw, batches, init_params
from scripts.benchmarks.common import alternate

SHAPE = {"n_ctx": 128, "n_embd": 128, "n_head": 4, "n_layer": 2}


def stepper(ids: np.ndarray, n_vocab: int, n_batch: int, steps: int):
    """A function that runs steps of training on ids and returns seconds per step."""
    rng = np.random.default_rng(0)
    hparams = {**SHAPE, "n_vocab": n_vocab}
    state = {"params": init_params(hparams, rng), "adam": {"step": 0}}
    data = batches(ids, n_batch, SHAPE["n_ctx"], rng)

    def step():
        inputs, targets = next(data)
        _, grads = loss_and_grads(inputs, targets, state["params"], SHAPE["n_head"])
        state["params"], state["adam"] = adamw(state["params"], grads, state["adam"], 1e-3)

    def run() -> float:
        step()  # first allocations
        start = time.perf_counter()
        for _ in range(steps):
            step()
        return (time.perf_counter() - start) / steps

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--text", required=True)
    parser.add_argument("--n_vocab", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--n_batch", type=int, default=16)
    args = parser.parse_args()
    text = Path(args.text).read_text(encoding="utf-8")
    start = time.perf_counter()
    merges, _ = learn_merges(text, args.n_vocab)
    learned = time.perf_counter() - start
    own = Encoder(bpe_files(merges)["encoder.json"], merges)
    gpt2 = read_vocab(find_vocab(None, "models"), "", gpt2=True)
    n_bytes = len(text.encode("utf-8"))
    ids = {"own": np.array(own.encode(text)), "gpt2": np.array(gpt2.encode(text))}
    print(f"{args.text}: {n_bytes:,} bytes; learning {len(merges)} merges took {learned:.2f} s")
    for name, encoder in (("own", own), ("gpt2", gpt2)):
        print(f"  {name}: {encoder.n_vocab} tokens, {len(ids[name]):,} tokens of text, "
              f"{n_bytes / len(ids[name]):.2f} bytes a token")
    runs = {name: stepper(ids[name], encoder.n_vocab, args.n_batch, args.steps)
            for name, encoder in (("own", own), ("gpt2", gpt2))}
    seconds = alternate(args.rounds, runs)
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    for name, values in seconds.items():
        print(f"  {name}: seconds a step per round " + ", ".join(f"{v:.3f}" for v in values)
              + f"; median {medians[name]:.3f}")
    print(f"a step with GPT-2's vocabulary takes {medians['gpt2'] / medians['own']:.1f}x as "
          f"long as with {args.n_vocab} tokens; per byte of text, "
          f"{medians['gpt2'] * len(ids['gpt2']) / (medians['own'] * len(ids['own'])):.1f}x")


if __name__ == "__main__":
    main()
