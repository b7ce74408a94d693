"""Time greedy decoding with the KV cache and without it, on one checkpoint, in one process.

    python -m scripts.benchmarks.kv_cache --models_dir /tmp/offline    # a 124M-shaped checkpoint

Without the cache every step runs `gpt2` on the whole sequence so far and keeps the last row of
logits; with it, `generate` feeds the prompt once and then one position per step. Both pick the
same tokens (checked here). The two take turns over --rounds rounds; the medians are printed for
docs/kv-cache.md.
"""

import argparse
import statistics
import time

import numpy as np

from picogpt import generate, gpt2, load_encoder_hparams_and_params
from scripts.benchmarks.common import random_ids


def without_cache(ids: list[int], params: dict, n_head: int, n_new: int) -> list[int]:
    """Greedy decoding that runs the whole sequence through the model at every step."""
    out = []
    for _ in range(n_new):
        logits = gpt2(np.array([*ids, *out]), **params, n_head=n_head)  # [n_seq, n_vocab]
        out = [*out, int(np.argmax(logits[-1]))]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models_dir", required=True)
    parser.add_argument("--model_size", default="124M")
    parser.add_argument("--n_new", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    _, hparams, params = load_encoder_hparams_and_params(args.model_size, args.models_dir)
    n_head = hparams["n_head"]
    for n_prompt in (16, 256, 512):
        ids = random_ids(n_prompt)
        times = {"cache": [], "no cache": []}
        for _ in range(args.rounds):
            start = time.perf_counter()
            cached = list(generate(ids, params, n_head, args.n_new, stop_at_end=False))
            times["cache"].append(time.perf_counter() - start)
            start = time.perf_counter()
            plain = without_cache(ids, params, n_head, args.n_new)
            times["no cache"].append(time.perf_counter() - start)
            assert cached == plain, "the cache changed the tokens"
        cache, plain = (statistics.median(times[k]) for k in ("cache", "no cache"))
        print(f"{args.n_new} tokens after {n_prompt}: with the cache {cache:.2f} s "
              f"({args.n_new / cache:.1f} tok/s), without {plain:.2f} s "
              f"({args.n_new / plain:.1f} tok/s): {plain / cache:.1f}x")


if __name__ == "__main__":
    main()
