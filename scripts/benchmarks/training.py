"""Training speed: picogpt's training step against the same model in torch.

Each engine trains a GPT-2 of the same shape on random batches, float32, on 2 threads:
- `picogpt`: the step train.py's loop takes, fasttrain.loss_and_grads and train.adamw;
- `backward`: the readable step, backward.loss_and_grads and train.adamw (with --backward);
- `torch`: transformers' GPT2LMHeadModel, cross-entropy, backward and torch.optim.AdamW (decay
  on matrices only, as train.py).
Shapes: `default` is train.py's (GPT-2's 50,257 tokens, 2 layers, 4 heads, n_embd 128, n_ctx 128,
16 windows a step), `poems` the poems recipe's (a 6,000-character vocabulary, 4 layers, n_ctx
64, 32 windows). Each engine runs in a child process of its own, so its memory peak is its own;
rounds alternate between the engines, and each ratio is of medians.

    python -m scripts.benchmarks.training --rounds 3 --steps 8 --shape default poems

It also splits picogpt's step into its parts, to show where the time goes.
"""

import argparse
import json
import resource
import statistics
import time

from scripts.benchmarks.common import alternate, run_child

SHAPES = {"default": ({"n_vocab": 50257, "n_ctx": 128, "n_embd": 128, "n_head": 4,
                       "n_layer": 2}, 16),
          "poems": ({"n_vocab": 6000, "n_ctx": 64, "n_embd": 128, "n_head": 4, "n_layer": 4},
                    32)}
HPARAMS = dict(SHAPES["default"][0])  # the shape a child trains, set from its --shape
PARTS = ("block_forward", "softmax_cross_entropy_", "block_backward")  # fasttrain's, timed


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


def numpy_steps(engine: str, steps: int, n_batch: int, parts: bool) -> dict:
    import numpy as np

    from picogpt import backward, fasttrain, train

    step_grads = fasttrain.loss_and_grads if engine == "picogpt" else backward.loss_and_grads

    rng = np.random.default_rng(0)
    params, state = train.init_params(HPARAMS, rng), {"step": 0}
    ids = rng.integers(0, HPARAMS["n_vocab"], 100_000)
    data = train.batches(ids, n_batch, HPARAMS["n_ctx"], rng)
    spent = {}
    if parts:  # time each part by wrapping the functions loss_and_grads calls
        for name in PARTS:
            setattr(fasttrain, name, timer(getattr(fasttrain, name), name, spent))

    def step():
        inputs, targets = next(data)
        nonlocal params, state
        start = time.perf_counter()
        _, grads = step_grads(inputs, targets, params, HPARAMS["n_head"])
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


def child(engine: str, shape: str, steps: int, n_batch: int, parts: bool) -> None:
    HPARAMS.update(SHAPES[shape][0])
    if engine == "torch":
        import torch

        torch.set_num_threads(2)
        result = torch_steps(steps, n_batch)
    else:
        result = numpy_steps(engine, steps, n_batch, parts)
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def run(engine: str, shape: str, steps: int, parts: bool = False) -> dict:
    """One engine's figures, measured in a child process of its own."""
    return json.loads(run_child("scripts.benchmarks.training", "--child", engine, "--shape",
                                shape, "--steps", str(steps), *["--parts"] * parts,
                                env={"OMP_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2"}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--shape", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    parser.add_argument("--backward", action="store_true",
                        help="also time backward.py's readable step")
    parser.add_argument("--child", choices=["picogpt", "backward", "torch"])
    parser.add_argument("--parts", action="store_true")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.shape[0], args.steps, SHAPES[args.shape[0]][1], args.parts)
        return
    engines = ["picogpt", "torch", *["backward"] * args.backward]
    for shape in args.shape:
        results = alternate(args.rounds, {engine: lambda engine=engine, shape=shape: run(
            engine, shape, args.steps) for engine in engines})
        split = run("picogpt", shape, args.steps, parts=True)
        speeds = {engine: statistics.median(r["tokens_per_s"] for r in runs)
                  for engine, runs in results.items()}
        print(f"shape {shape}: {SHAPES[shape][0]}, batch {SHAPES[shape][1]} x "
              f"{SHAPES[shape][0]['n_ctx']}, float32, 2 threads, {args.rounds} rounds of "
              f"{args.steps} steps")
        for engine, runs in results.items():
            per_round = ", ".join(f"{r['tokens_per_s']:,.0f}" for r in runs)
            peak = max(r["peak_rss_mib"] for r in runs)
            print(f"  {engine:8s} tokens/s per round: {per_round}; median "
                  f"{speeds[engine]:,.0f}; peak memory {peak:,.0f} MiB")
        for engine in engines:
            if engine != "torch":
                print(f"  {engine} / torch: {speeds[engine] / speeds['torch']:.2f}x")
        total, parts = split["seconds"], split["parts"]
        rows = {**{name: parts[name] for name in (*PARTS, "adamw")},
                "the unembedding's products, embedding, ln_f":
                parts["loss_and_grads"] - sum(parts[name] for name in PARTS)}
        print(f"  where picogpt's time goes ({total:.2f} s for {args.steps} steps, timed apart):")
        for name, seconds in sorted(rows.items(), key=lambda item: -item[1]):
            print(f"    {name:44s} {seconds / total:6.1%}")


if __name__ == "__main__":
    main()
