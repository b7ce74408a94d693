"""A training step of the induction task's shape, on its 64 tokens and on GPT-2's 50,257.

The shape of `python -m picogpt.train --task induction` (2 layers, 2 heads, n_embd 64, n_ctx
64, 32 windows a step); a step is loss_and_grads and adamw, as train.py runs them, on random
ids, rounds alternating between the two vocabularies in one process. Run it on one thread to
compare with docs/performance.md:

    OPENBLAS_NUM_THREADS=1 python -m scripts.benchmarks.induction --rounds 3
"""

import argparse
import statistics
import time

import numpy as np

from picogpt.backward import loss_and_grads
from picogpt.train import adamw, init_params


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    setups = {}
    for n_vocab in (64, 50257):
        hparams = {"n_vocab": n_vocab, "n_ctx": 64, "n_embd": 64, "n_head": 2, "n_layer": 2}
        rng = np.random.default_rng(0)
        setups[n_vocab] = (init_params(hparams, rng), rng.integers(0, n_vocab, (32, 65)))
    seconds = {n_vocab: [] for n_vocab in setups}
    for _ in range(args.rounds):
        for n_vocab, (params, ids) in setups.items():
            start = time.perf_counter()
            _, grads = loss_and_grads(ids[:, :-1], ids[:, 1:], params, 2)
            adamw(params, grads, {"step": 0}, 3e-3)
            seconds[n_vocab].append(time.perf_counter() - start)
    for n_vocab, times in seconds.items():
        print(f"{n_vocab:6} tokens: seconds a step {', '.join(f'{t:.3f}' for t in times)}; "
              f"median {statistics.median(times):.3f}")
    ratio = statistics.median(seconds[50257]) / statistics.median(seconds[64])
    print(f"ratio of medians: {ratio:.1f}")


if __name__ == "__main__":
    main()
