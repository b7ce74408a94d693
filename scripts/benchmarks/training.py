"""Training speed: picogpt's NumPy backward pass and AdamW against the same model in torch.

Both train a GPT-2 of the same shape (default: train.py's, 2 layers, 4 heads, n_embd 128,
n_ctx 128) on the same random batches, float32, on 2 threads: picogpt with loss_and_grads and
adamw, torch with transformers' GPT2LMHeadModel, cross-entropy, backward and torch.optim.AdamW
(decay on matrices only, as train.py). Each engine runs in a child process of its own, so its
memory peak is its own; rounds alternate between the two, and the ratio is of medians.

    python -m scripts.benchmarks.training --rounds 3 --steps 8

It also splits picogpt's step into its parts, to show where the time goes.
"""

import argparse
import json
import resource
import statistics
import time

from scripts.benchmarks.common import alternate, run_child

HPARAMS = {"n_vocab": 50257, "n_ctx": 128, "n_embd": 128, "n_head": 4, "n_layer": 2}



def run_steps(step, steps: int, n_batch: int, before=lambda: None) -> dict:
    """Two warm-up steps (first allocations, BLAS threads), then steps timed: tokens a second
    and seconds."""
    for _ in range(2):
        step()
    before()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    seconds = time.perf_counter() - start
    return {"tokens_per_s": steps * n_batch * HPARAMS["n_ctx"] / seconds, "seconds": seconds}

def timer(function, name: str, spent: dict):
    """function, adding the seconds each call takes to spent[name]."""
    def timed(*args, **kwargs):
        start = time.perf_counter()
        result = function(*args, **kwargs)
        spent[name] = spent.get(name, 0.0) + time.perf_counter() - start
        return result
    return timed


def numpy_steps(steps: int, n_batch: int, parts: bool) -> dict:
    import numpy as np

    from picogpt import backward, train

    rng = np.random.default_rng(0)
    params, state = train.init_params(HPARAMS, rng), {"step": 0}
    ids = rng.integers(0, HPARAMS["n_vocab"], 100_000)
    data = train.batches(ids, n_batch, HPARAMS["n_ctx"], rng)
    spent = {}
    if parts:  # time each part by wrapping the functions loss_and_grads calls
        for name in ("trace", "cross_entropy", "transformer_block_backward",
                     "embed_backward", "layer_norm_backward"):
            setattr(backward, name, timer(getattr(backward, name), name, spent))

    def step():
        inputs, targets = next(data)
        nonlocal params, state
        start = time.perf_counter()
        _, grads = backward.loss_and_grads(inputs, targets, params, HPARAMS["n_head"])
        middle = time.perf_counter()
        params, state = train.adamw(params, grads, state, 1e-3)
        spent["loss_and_grads"] = spent.get("loss_and_grads", 0.0) + middle - start
        spent["adamw"] = spent.get("adamw", 0.0) + time.perf_counter() - middle

    return {**run_steps(step, steps, n_batch, before=spent.clear), "parts": spent}


def torch_steps(steps: int, n_batch: int) -> dict:
    import numpy as np
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=HPARAMS["n_vocab"], n_positions=HPARAMS["n_ctx"],
                        n_embd=HPARAMS["n_embd"], n_layer=HPARAMS["n_layer"],
                        n_head=HPARAMS["n_head"], activation_function="gelu_new",
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(config).train()
    matrices = [p for p in model.parameters() if p.ndim == 2]
    others = [p for p in model.parameters() if p.ndim != 2]
    optimiser = torch.optim.AdamW([{"params": matrices, "weight_decay": 0.1},
                                   {"params": others, "weight_decay": 0.0}], lr=1e-3,
                                  betas=(0.9, 0.95))
    rng = np.random.default_rng(0)

    def step():
        window = torch.from_numpy(rng.integers(0, HPARAMS["n_vocab"],
                                               (n_batch, HPARAMS["n_ctx"] + 1)))
        logits = model(window[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 window[:, 1:].reshape(-1))
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()

    return run_steps(step, steps, n_batch)


def child(engine: str, steps: int, n_batch: int, parts: bool) -> None:
    if engine == "torch":
        import torch

        torch.set_num_threads(2)
        result = torch_steps(steps, n_batch)
    else:
        result = numpy_steps(steps, n_batch, parts)
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def run(engine: str, steps: int, n_batch: int, parts: bool = False) -> dict:
    """One engine's figures, measured in a child process of its own."""
    return json.loads(run_child("scripts.benchmarks.training", "--child", engine, "--steps",
                                str(steps), "--n_batch", str(n_batch), *["--parts"] * parts,
                                env={"OMP_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2"}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--n_batch", type=int, default=16)
    parser.add_argument("--child", choices=["numpy", "torch"])
    parser.add_argument("--parts", action="store_true")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.steps, args.n_batch, args.parts)
        return
    results = alternate(args.rounds, {engine: lambda engine=engine: run(engine, args.steps,
                                                                        args.n_batch)
                                      for engine in ("numpy", "torch")})
    split = run("numpy", args.steps, args.n_batch, parts=True)
    speeds = {engine: statistics.median(r["tokens_per_s"] for r in runs)
              for engine, runs in results.items()}
    print(f"shape {HPARAMS}, batch {args.n_batch} x {HPARAMS['n_ctx']}, float32, 2 threads, "
          f"{args.rounds} rounds of {args.steps} steps")
    for engine, runs in results.items():
        per_round = ", ".join(f"{r['tokens_per_s']:,.0f}" for r in runs)
        peak = max(r["peak_rss_mib"] for r in runs)
        print(f"{engine:6s} tokens/s per round: {per_round}; median {speeds[engine]:,.0f}; "
              f"peak memory {peak:,.0f} MiB")
    print(f"picogpt / torch: {speeds['numpy'] / speeds['torch']:.2f}x")
    total = split["seconds"]
    parts = split["parts"]
    inside = sum(parts[name] for name in ("trace", "cross_entropy",
                                          "transformer_block_backward", "embed_backward",
                                          "layer_norm_backward"))
    rows = {**{name: parts[name] for name in parts if name not in ("loss_and_grads",)},
            "unembedding matmuls and the rest": parts["loss_and_grads"] - inside}
    print(f"where picogpt's time goes ({total:.2f} s for {args.steps} steps, timed apart):")
    for name, seconds in sorted(rows.items(), key=lambda item: -item[1]):
        print(f"  {name:34s} {seconds / total:6.1%}")


if __name__ == "__main__":
    main()
