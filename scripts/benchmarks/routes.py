"""The measurements behind fast.py and the pass sizes: each route tried for prefill, scoring and
several samples, and what it gave on this machine.

    python -m scripts.benchmarks.routes --models_dir /tmp/bench/models    # ~4 minutes

- element-wise: model.py's gelu, softmax and layer_norm against fast.py's in-place copies, on
  one thread and split in halves over two Python threads, alone and right after a matrix product;
- spinning: the process's CPU time against wall time for one-thread NumPy work right after a
  product and a second later (BLAS's worker thread keeps a core busy while it waits for work);
- products: all 12 blocks' products of the 124M shape and the unembedding, for 1 to 8 rows, as
  one matrix product, row by row, and (unembedding) a slice of the vocabulary at a time;
- passes: prefill of 512 and 880 tokens with other pass sizes, and scoring 4,096 tokens with
  other CHUNKs, the settings taking turns (medians of per-round ratios to the current one).
"""

import argparse
import importlib
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np

from scripts.benchmarks.common import alternate, random_ids

NAMES = [("attn", "c_attn"), ("attn", "c_proj"), ("mlp", "c_fc"), ("mlp", "c_proj")]


def times(run, repeats: int, before=None) -> tuple[float, float]:
    """(best, median) milliseconds of run() over repeats calls, each after before()."""
    seconds = []
    for _ in range(repeats):
        if before:
            before()
        start = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - start)
    return 1e3 * min(seconds), 1e3 * statistics.median(seconds)


def in_halves(pool: ThreadPoolExecutor, function, x: np.ndarray) -> None:
    """function on the two halves of x's rows, one of them on a second thread."""
    rows = x.reshape(-1, x.shape[-1])
    other = pool.submit(function, rows[len(rows) // 2 :])
    function(rows[: len(rows) // 2])
    other.result()


def element_wise() -> None:
    from picogpt import fast, model

    rng = np.random.default_rng(0)
    a, w = rng.standard_normal((512, 768), np.float32), rng.standard_normal((768, 3072), np.float32)
    g = rng.standard_normal(768, np.float32)
    pool = ThreadPoolExecutor(1)
    cases = [("gelu [512, 3072]", (512, 3072), model.gelu, fast.gelu_),
             ("softmax [12, 512, 512]", (12, 512, 512), model.softmax, fast.softmax_),
             ("layer_norm [512, 768]", (512, 768), lambda x: model.layer_norm(x, g, g),
              lambda x: fast.layer_norm(x, g, g))]
    print("element-wise, ms (best / median of 30): model.py | in place | in place, 2 threads")
    for name, shape, readable, in_place in cases:
        x0 = rng.standard_normal(shape, np.float32)
        for label, product in (("alone", None), ("after a product", lambda: a @ w)):
            row = [time_on_copies(run, x0, product) for run in
                   (readable, in_place, partial(in_halves, pool, in_place))]
            print(f"  {name:24}{label:17}" + " | ".join(f"{b:5.2f} / {m:5.2f}" for b, m in row))


def time_on_copies(run, x0: np.ndarray, product=None) -> tuple[float, float]:
    """times() of run(x) on a fresh copy of x0 each time (the in-place functions write into
    it), made, like the product when one is given, before the clock starts."""
    x = x0.copy()

    def before():
        np.copyto(x, x0)
        if product:
            product()

    return times(partial(run, x), 30, before)


def spinning() -> None:
    rng = np.random.default_rng(0)
    a, w = rng.standard_normal((512, 768), np.float32), rng.standard_normal((768, 3072), np.float32)
    x = rng.standard_normal((512, 3072), np.float32)
    for label, pause in (("right after a product", 0.0), ("1 s after it", 1.0)):
        a @ w
        time.sleep(pause)
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(20):
            np.tanh(x, out=x)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"spinning: 20 tanh of [512, 3072] {label}: wall {1e3 * wall:.1f} ms, "
              f"CPU {1e3 * cpu:.1f} ms")


def all_blocks(product, blocks: list, xs: dict) -> None:
    """product(x, w) for every block's four weight matrices."""
    for block in blocks:
        for name in NAMES:
            product(xs[name], block[name[0]][name[1]]["w"])


def row_by_row(x: np.ndarray, w: np.ndarray) -> None:
    for row in x:
        row @ w


def products(params: dict) -> None:
    from picogpt import fast

    rng = np.random.default_rng(0)
    blocks, wte = params["blocks"], params["wte"]
    print("products, ms (median of 9): 12 blocks' matrix product | row by row; "
          "unembedding x @ wte.T | fast.unembed")
    for n_rows in range(1, 9):
        xs = {name: rng.standard_normal((n_rows, blocks[0][name[0]][name[1]]["w"].shape[0]),
                                        np.float32) for name in NAMES}
        x = rng.standard_normal((n_rows, wte.shape[1]), np.float32)
        row = [times(partial(all_blocks, np.matmul, blocks, xs), 9),
               times(partial(all_blocks, row_by_row, blocks, xs), 9),
               times(partial(np.matmul, x, wte.T), 9), times(partial(fast.unembed, x, wte), 9)]
        print(f"  {n_rows} rows: " + " | ".join(f"{m:6.2f}" for _, m in row))


def alternate_settings(settings: list, apply, run, rounds: int) -> list[float]:
    """Median over rounds of each setting's time relative to the first's, settings in turn."""
    def timed(setting) -> float:
        apply(setting)
        run()  # untimed: the first run after a change pays for it
        start = time.perf_counter()
        run()
        return time.perf_counter() - start

    seconds = alternate(rounds, {setting: partial(timed, setting) for setting in settings})
    first = seconds[settings[0]]
    return [statistics.median(s / f for s, f in zip(seconds[setting], first))
            for setting in settings]


def passes(params: dict, n_head: int, rounds: int) -> None:
    kvcache = importlib.import_module("picogpt.kvcache")
    score = importlib.import_module("picogpt.score")
    current = (kvcache.FIRST_CHUNK, kvcache.CHUNK)
    sizes = [current] + [s for s in [(256, 128), (256, 256), (512, 512)] if s != current]
    def apply(size):
        kvcache.FIRST_CHUNK, kvcache.CHUNK = size

    def run(ids):
        kvcache.prefill(ids, params, n_head, kvcache.KVCache(params, n_head, len(ids)))

    for n in (512, 880):
        ratios = alternate_settings(sizes, apply, partial(run, random_ids(n)), rounds)
        print(f"passes: prefill {n}, time / {current}'s: "
              + ", ".join(f"{s} {r:.3f}" for s, r in zip(sizes, ratios)))
    apply(current)
    chunks = [score.CHUNK] + [c for c in (128, 256, 512, 1024) if c != score.CHUNK]
    ids = random_ids(4096)
    ratios = alternate_settings(chunks, lambda c: setattr(score, "CHUNK", c),
                                lambda: score.score(ids, params, n_head, stride=512), 2)
    print(f"passes: scoring 4,096 tokens, time / CHUNK {chunks[0]}'s: "
          + ", ".join(f"{c} {r:.3f}" for c, r in zip(chunks, ratios)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models_dir", required=True, help="holds a converted 124M folder")
    parser.add_argument("--rounds", type=int, default=10, help="rounds for the pass sizes")
    args = parser.parse_args()
    from picogpt.cli.command import reuse_freed_memory
    from picogpt.files.openai import load_encoder_hparams_and_params

    reuse_freed_memory()
    _, hparams, params = load_encoder_hparams_and_params("124M", args.models_dir)
    element_wise()
    spinning()
    products(params)
    passes(params, hparams["n_head"], args.rounds)


if __name__ == "__main__":
    main()
