"""`python -m picogpt.train TEXT --name NAME`: read a text, train a small GPT-2 on it with
picogpt/train.py, and write a model folder every picogpt mode runs. `--task NAME` hands the
command to a task (cli/tasks.py), which makes its own data."""

import sys
from pathlib import Path

import numpy as np

from ..chars import Chars, count_chars
from ..curve import measure, probes
from ..encoder import N_VOCAB, Encoder
from ..errors import PicoGPTError, _
from ..files.load import read_encoder
from ..files.store import save_model
from ..merges import bpe_files, learn_merges
from ..poems import poem_ids, read_paragraphs
from ..train import batches, held_out_loss, init_params, learn
from .command import run_command
from .prepare import (
    check_settings,
    check_vocab,
    find_vocab,
    new_model_dir,
    per_byte,
    read_ids,
    read_text,
)


def train(text_file: str, name: str = "trained", models_dir: str = "models", n_layer: int = 2,
          n_head: int = 4, n_embd: int = 128, n_ctx: int = 128, n_batch: int = 16,
          steps: int = 600, lr: float = 3e-3, seed: int = 0, repeats: float = 0.0,
          curve_every: int = 50, vocab_dir: str | None = None,
          n_vocab: int | None = None, vocab: str | None = None) -> dict:
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
        vocab: chars for a character vocabulary: each character the training text holds twice
            or more is a token (line breaks and spaces too), the rest one unknown token, and a
            start token before each paragraph; for Chinese, or a character-level model of a book.
    """
    check_vocab(n_vocab, vocab_dir)
    if vocab is not None and (vocab != "chars" or n_vocab is not None or vocab_dir is not None):
        raise PicoGPTError(_("--vocab {vocab!r}: the one vocabulary it names is chars (a "
                             "character vocabulary), which takes neither --n_vocab nor "
                             "--vocab_dir.").format(vocab=vocab))
    check_settings({"n_layer": n_layer, "n_head": n_head, "n_embd": n_embd, "n_ctx": n_ctx,
                    "n_batch": n_batch, "steps": steps, "curve_every": curve_every}, lr, seed,
                   repeats, n_vocab or N_VOCAB)  # memory: the output layer's rows are the tokens
    model_dir = new_model_dir(models_dir, name)
    if vocab == "chars":  # counted on the text before the held-out tenth
        text = read_text(text_file)
        paragraphs = read_paragraphs(text[: int(len(text) * 0.9)])
        encoder = Chars(count_chars("\n\n".join(paragraphs)))
        vocab, files = None, {"chars.json": encoder.tokens}
    elif n_vocab is None:
        vocab, files = find_vocab(vocab_dir, models_dir), {}
        encoder = read_encoder(vocab)
    else:  # the text's own merges, written into the model folder as GPT-2's two files
        merges = learn_merges(read_text(text_file), n_vocab)[0]
        vocab, files = None, bpe_files(merges)
        encoder = Encoder(files["encoder.json"], merges)
    ids = read_ids(text_file, encoder, n_ctx) if vocab != "chars" else poem_ids(
        read_paragraphs(text), encoder)  # the start token before each paragraph
    if len(ids) < 2 * (n_ctx + 1):
        raise PicoGPTError(_("{text_file} is {n} tokens; training on windows of {m} needs at "
                             "least {need}. Give a longer text.").format(
                                 text_file=text_file, n=len(ids), m=n_ctx + 1,
                                 need=2 * (n_ctx + 1)))
    split = int(len(ids) * 0.9)
    train_ids, held_out = ids[:split], ids[split:]
    if len(held_out) < n_ctx + 1:  # a short text: measure on a training window instead
        held_out = ids[: n_ctx + 1]
    hparams = {"n_vocab": encoder.n_vocab, "n_ctx": n_ctx, "n_embd": n_embd,
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


def main(argv: list[str] | None = None) -> None:
    """Entry point of `python -m picogpt.train`."""
    argv = sys.argv[1:] if argv is None else argv
    if any(word.split("=")[0] == "--task" for word in argv):  # a task makes its own data
        from .tasks import main as task_main

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
