"""Training a small GPT-2 in NumPy: initial weights, AdamW, the schedule, batches, the command.

The gradients come from fasttrain.py's `loss_and_grads` (backward.py's, in fewer passes over
memory; tests hold the two equal); this module only learns with them:
GPT-2's initial weights, one AdamW step, the learning rate at each step, random windows of the
text, the loop, and `python -m picogpt.train`, which writes a model folder the picogpt command
runs. It must not read the text, find its vocabulary or check a setting itself: prepare.py
does, and its names stay importable from here.

    python -m picogpt.train book.txt --name mine --steps 600
    picogpt "Once upon a time" --model_size mine
    python -m picogpt.train book.txt --name small --n_vocab 512   # merges.py's own vocabulary
    python -m picogpt.train --task induction --name ind   # no text: induction.py's task

Side effects: reading the text (through prepare.py), writing the model folder (through
store.py), a progress bar, the closing line.
"""

import sys
from pathlib import Path

import numpy as np
from tqdm import tqdm

from .backward import cross_entropy
from .cli.command import run_command
from .cli.prepare import (
    check_settings,
    check_vocab,
    find_vocab,
    new_model_dir,
    per_byte,
    read_ids,
    read_text,
)
from .curve import best_heads, measure, probes, summary
from .encoder import Encoder
from .fasttrain import loss_and_grads
from .files.load import read_encoder
from .files.params import tree_map
from .files.store import save_model
from .merges import bpe_files, learn_merges
from .model import gpt2


def init_params(hparams: dict, rng: np.random.Generator) -> dict:
    """GPT-2's initial weights: normal(0, 0.02) matrices (wpe 0.01, as OpenAI's code), residual
    projections scaled down by sqrt(2 * n_layer), zero biases, layer-norm gains of 1."""
    n_embd, n_layer = hparams["n_embd"], hparams["n_layer"]

    def normal(*shape, std=0.02):
        return rng.normal(0.0, std, shape).astype(np.float32)

    def linear(n_in, n_out, std=0.02):
        return {"w": normal(n_in, n_out, std=std), "b": np.zeros(n_out, np.float32)}

    def norm():
        return {"g": np.ones(n_embd, np.float32), "b": np.zeros(n_embd, np.float32)}

    residual = 0.02 / (2 * n_layer) ** 0.5  # each block adds two outputs onto the stream
    return {"wte": normal(hparams["n_vocab"], n_embd), "wpe": normal(hparams["n_ctx"], n_embd,
                                                                    std=0.01),
            "blocks": [{"ln_1": norm(), "ln_2": norm(),
                        "attn": {"c_attn": linear(n_embd, 3 * n_embd),
                                 "c_proj": linear(n_embd, n_embd, residual)},
                        "mlp": {"c_fc": linear(n_embd, 4 * n_embd),
                                "c_proj": linear(4 * n_embd, n_embd, residual)}}
                       for _ in range(n_layer)],
            "ln_f": norm()}


def adamw(params: dict, grads: dict, state: dict, lr: float, betas=(0.9, 0.95),
          eps: float = 1e-8, weight_decay: float = 0.1) -> tuple[dict, dict]:
    """One AdamW step: new params and optimiser state. Start from state = {"step": 0}.

    Adam moves each weight by its gradient's running mean over the running root mean square,
    so every weight takes steps of about lr. Weight decay pulls matrices (not biases or gains)
    towards 0, apart from the gradient, as GPT-2-style training does (betas as nanoGPT's)."""
    b1, b2 = betas
    step = state["step"] + 1
    if "m" not in state:  # the running means start at 0 (made here, not as a .get default,
        zeros = tree_map(np.zeros_like, grads)  # which would build them on every step)
        state = {**state, "m": zeros, "v": zeros}
    m = tree_map(lambda m, g: b1 * m + (1 - b1) * g, state["m"], grads)
    v = tree_map(lambda v, g: b2 * v + (1 - b2) * (g * g), state["v"], grads)

    def update(p, m, v):  # the 1 - b**step terms undo the running means' start at 0
        decay = weight_decay if p.ndim == 2 else 0.0
        return p - lr * ((m / (1 - b1**step)) / (np.sqrt(v / (1 - b2**step)) + eps) + decay * p)

    return tree_map(update, params, m, v), {"step": step, "m": m, "v": v}


def learning_rate(step: int, steps: int, lr: float, warmup: int) -> float:
    """The learning rate at step (0 .. steps - 1): a linear rise to lr over the first warmup
    steps (lr * (step + 1) / warmup), then half a cosine from lr down to lr / 10, which the last
    step reaches."""
    if step < warmup:
        return lr * (step + 1) / warmup
    done = (step - warmup + 1) / max(1, steps - warmup)  # 0 at the warm-up's end, 1 at the last
    return float(lr * (0.1 + 0.45 * (1 + np.cos(np.pi * done))))  # a float: float32 stays


def batches(ids: np.ndarray, n_batch: int, n_seq: int, rng: np.random.Generator,
            repeats: float = 0.0, n_vocab: int = 50257):
    """Endless (inputs, targets) pairs of [n_batch, n_seq] windows at random places in ids; with
    repeats, that share of the windows is random tokens with a run of them repeated instead."""
    while True:
        starts = rng.integers(0, len(ids) - n_seq, n_batch)[:, None]  # [n_batch, 1]
        window = ids[starts + np.arange(n_seq + 1)]  # [n_batch, n_seq + 1]
        if repeats:
            for row in np.flatnonzero(rng.random(n_batch) < repeats):
                window[row] = repeated_window(n_seq + 1, n_vocab, rng)
        yield window[:, :-1], window[:, 1:]


def repeated_window(n: int, n_vocab: int, rng: np.random.Generator) -> np.ndarray:
    """n random token ids in which a run of them, between n / 6 and n / 2 long, comes again
    later, after a gap of random length: only the context says what follows in the copy."""
    window = rng.integers(0, n_vocab - 1, n)  # never the last id, <|endoftext|>
    length = int(rng.integers(n // 6, n // 2))
    start = int(rng.integers(0, n - 2 * length + 1))
    again = int(rng.integers(start + length, n - length + 1))
    window[again : again + length] = window[start : start + length]
    return window


def train(text_file: str, name: str = "trained", models_dir: str = "models", n_layer: int = 2,
          n_head: int = 4, n_embd: int = 128, n_ctx: int = 128, n_batch: int = 16,
          steps: int = 600, lr: float = 3e-3, seed: int = 0, repeats: float = 0.0,
          curve_every: int = 50, vocab_dir: str | None = None,
          n_vocab: int | None = None) -> dict:
    """Train a small GPT-2 on a text file and write it to models_dir/name. (The induction
    task needs no text: python -m picogpt.train --task induction --help.)

    Args:
        text_file: UTF-8 text to learn from; the last tenth is held out to measure the loss.
        name: the new model folder's name; run it with `picogpt "..." --model_size NAME`. A
            folder that exists is never overwritten.
        models_dir: where the folder goes, as picogpt's --models_dir.
        n_layer: number of transformer blocks.
        n_head: attention heads per block; n_embd must be a multiple of it.
        n_embd: width of the residual stream.
        n_ctx: the longest context, and the length of the training windows.
        n_batch: windows per step.
        steps: optimiser steps.
        lr: peak learning rate (after a warm-up of steps/10, a cosine down to lr/10).
        seed: makes the initial weights and the batches, and so the run, repeatable.
        repeats: the share of windows, from 0 to 1, that are random tokens with a run of them
            repeated later instead of text: what an induction head learns from.
        curve_every: every this many steps, measure the loss on held-out copies of random
            runs and each head's scores; saved with the model as curve.json.
        vocab_dir: folder with GPT-2's encoder.json and vocab.bpe (found by default).
        n_vocab: learn a vocabulary of this many tokens from the text (byte-level BPE, as
            GPT-2's: 256 bytes, the merges, <|endoftext|>) instead of using GPT-2's 50,257;
            a small model trains many times faster on a few hundred or thousand.
    """
    check_vocab(n_vocab, vocab_dir)
    check_settings({"n_layer": n_layer, "n_head": n_head, "n_embd": n_embd, "n_ctx": n_ctx,
                    "n_batch": n_batch, "steps": steps, "curve_every": curve_every}, lr, seed,
                   repeats, n_vocab or 50257)  # memory: the output layer's rows are the tokens
    model_dir = new_model_dir(models_dir, name)
    if n_vocab is None:
        vocab, files = find_vocab(vocab_dir, models_dir), {}
        encoder = read_encoder(vocab)
    else:  # the text's own merges, written into the model folder as GPT-2's two files
        merges, _ = learn_merges(read_text(text_file), n_vocab)
        vocab, files = None, bpe_files(merges)
        encoder = Encoder(files["encoder.json"], merges)
    ids = read_ids(text_file, encoder, n_ctx)
    split = int(len(ids) * 0.9)
    train_ids, held_out = ids[:split], ids[split:]
    if len(held_out) < n_ctx + 1:  # a short text: measure on a training window instead
        held_out = ids[: n_ctx + 1]
    hparams = {"n_vocab": len(encoder.encoder), "n_ctx": n_ctx, "n_embd": n_embd,
               "n_head": n_head, "n_layer": n_layer}
    rng = np.random.default_rng(seed)
    params = init_params(hparams, rng)
    held_out_batch = next(batches(held_out, n_batch, min(n_ctx, len(held_out) - 1), rng))
    before = held_out_loss(params, held_out_batch, n_head)
    curve = {"settings": {"repeats": repeats, "lr": lr, "n_batch": n_batch, "steps": steps,
                          "seed": seed, **hparams}, "loss": [], "measured": []}
    windows = batches(train_ids, n_batch, n_ctx, rng, repeats, hparams["n_vocab"])
    texts = probes(n_ctx, hparams["n_vocab"])  # none for a context under 6 tokens
    measure_at = (lambda params: measure(params, n_head, texts)) if texts else None
    params, loss = learn(params, windows, steps, lr, max(1, steps // 10), n_head, curve,
                         curve_every, measure_at)
    after = held_out_loss(params, held_out_batch, n_head)
    curve["held_out"] = {"per_token": [before, after], "per_byte": [
        per_byte(loss, held_out_batch[1], encoder) for loss in (before, after)]}
    save_model(model_dir, hparams, params, vocab, extra={"curve.json": curve, **files})
    return {"model_dir": str(model_dir), "held_out_loss_before": before,
            "held_out_loss_after": after, "last_train_loss": loss, "curve": curve,
            "held_out_per_byte": curve["held_out"]["per_byte"]}


def learn(params: dict, windows, steps: int, lr: float, warmup: int, n_head: int, curve: dict,
          curve_every: int, measure_at=None) -> tuple[dict, float]:
    """The training loop: steps of AdamW on the windows at the schedule's rate, the loss of each
    step and, every curve_every steps, measure_at(params) (held-out probes: "first" and
    "second" copy losses, "previous" and "induction" head scores) added to curve and printed.
    Returns the params and the last step's loss."""
    state, shown = {"step": 0}, {}
    bar = tqdm(zip(range(steps), windows), total=steps, desc="picogpt: training", unit="step",
               file=sys.stderr)
    for step, (inputs, targets) in bar:
        if measure_at and step % curve_every == 0:
            shown = progress(curve, {"step": step, **measure_at(params)}, bar)
        loss, grads = loss_and_grads(inputs, targets, params, n_head)
        params, state = adamw(params, grads, state, learning_rate(step, steps, lr, warmup))
        curve["loss"].append(round(loss, 4))
        bar.set_postfix(shown | {"loss": f"{loss:.3f}"})
    if measure_at:
        progress(curve, {"step": steps, **measure_at(params)}, bar)
    return params, loss


def progress(curve: dict, measured: dict, bar) -> dict:
    """Add a measurement to the curve and print it as a line; returns what the bar shows."""
    curve["measured"].append(measured)
    bar.write(summary(measured, curve["loss"][-1] if curve["loss"] else None), file=sys.stderr)
    return {"copy": f"{measured['second']:.2f}", "heads": "/".join(
        f"{score:.2f}" for score, _, _ in best_heads(measured).values())}


def held_out_loss(params: dict, batch, n_head: int) -> float:
    """The loss on windows the model never trains on: model.py's gpt2 and cross_entropy."""
    inputs, targets = batch
    return cross_entropy(gpt2(inputs, **params, n_head=n_head), targets)[0]


def main(argv: list[str] | None = None) -> None:
    """Entry point of `python -m picogpt.train`."""
    argv = sys.argv[1:] if argv is None else argv
    if any(word.split("=")[0] == "--task" for word in argv):  # a task makes its own data
        from .induction import main as task_main

        return task_main(argv)
    result = run_command(train, argv, "python -m picogpt.train", "text_file",
                         stopped="training stopped; nothing was written.")
    if isinstance(result, dict):
        name = Path(result["model_dir"]).name
        before, after = result["held_out_per_byte"]
        print(f"picogpt: wrote {result['model_dir']}. Loss on held-out text: "
              f"{result['held_out_loss_before']:.3f} -> {result['held_out_loss_after']:.3f} nats "
              f"per token, {before:.3f} -> {after:.3f} per byte (last training batch "
              f"{result['last_train_loss']:.3f} per token). Try: picogpt "
              f"\"Once upon a time\" --model_size {name} --models_dir "
              f"{Path(result['model_dir']).parent}", file=sys.stderr)


if __name__ == "__main__":
    main()
