"""`python -m picogpt.train --task NAME`: training runs whose data a task makes (picogpt/
induction.py's random runs; the poems task, cli/poems.py, reads files/poems.py's classical
poems), with the task's recipe as the flags' defaults."""

import sys
import uuid
from pathlib import Path

import numpy as np

from ..backward import cross_entropy
from ..errors import PicoGPTError, _, whole_number
from ..induction import (
    COPY_LENGTHS,
    copy_probes,
    measure_copies,
    periodic_windows,
    task_batches,
    vocab_files,
)
from ..model import gpt2
from ..train import init_params
from .checkpoint import check_free
from .command import run_command, said
from .prepare import check_settings, new_model_dir
from .training import run_training

HELD_OUT, HELD_OUT_SEED = 64, 2027  # windows held out, and the seed that makes them


def train_task(task: str = "induction", name: str = "induction", models_dir: str = "models",
               n_layer: int = 2, n_head: int = 2, n_embd: int = 64, n_ctx: int = 64,
               n_batch: int = 32,
               steps: int = 1600, lr: float = 3e-3, warmup: int = 300, seed: int = 0,
               n_vocab: int = 64, block_min: int = 4, block_max: int = 32,
               lead_in_from: int = 600, lead_in_max: int = 24, curve_every: int = 25,
               text_file: str | None = None) -> dict:
    """Grow an induction head: train a small GPT-2 on the induction task, no text needed.

    The defaults are the recipe of docs/induction.md; every flag can change it. The model
    folder runs in every picogpt mode: picogpt "t5 t17 t3 t5" --model_size NAME.

    Args:
        task: what to learn; the one task is induction.
        name: the new model folder's name. A folder that exists is never overwritten.
        models_dir: where the folder goes, as picogpt's --models_dir.
        n_layer: number of transformer blocks.
        n_head: attention heads per block; n_embd must be a multiple of it.
        n_embd: width of the residual stream.
        n_ctx: the longest context, and the length of the training windows.
        n_batch: windows per step.
        steps: optimiser steps.
        lr: peak learning rate, reached after the warm-up; then a cosine down to lr/10.
        warmup: steps of the linear rise to lr.
        seed: makes the initial weights and the windows, and so the run, repeatable.
        n_vocab: tokens in the vocabulary: t0 .. t{n_vocab - 2}, then the start token [CLS].
        block_min: the shortest block of random tokens a window repeats.
        block_max: the longest block (its tokens are distinct: at most n_vocab - 1).
        lead_in_from: the step from which half the windows have random tokens before the block.
        lead_in_max: the most random tokens before the block (0 .. lead_in_max, uniform).
        curve_every: every this many steps, measure the held-out windows, the random-run
            probes and the head scores, and keep a checkpoint; saved as curve.json.
        text_file: none: the task makes its own windows.
    """
    settings = check_task(locals())
    new_model_dir(models_dir, name)
    check_free(models_dir, name)
    return run_task({**settings, "name": name, "models_dir": models_dir}, None)


def run_task(settings: dict, run: dict | None) -> dict:
    """The task run of settings (check_task's, with name and models_dir): a new one, or run's,
    stopped, resumed."""
    if settings["task"] == "poems":
        from .poems import run_poems

        return run_poems(settings, run)
    s, resuming = settings, run is not None
    run = run or {"id": uuid.uuid4().hex, "command": "task", "settings": s}
    n_vocab, n_ctx, n_head = s["n_vocab"], s["n_ctx"], s["n_head"]
    hparams = {"n_vocab": n_vocab, "n_ctx": n_ctx, "n_embd": s["n_embd"], "n_head": n_head,
               "n_layer": s["n_layer"]}
    rng = np.random.default_rng(s["seed"])
    params = init_params(hparams, rng)
    block = (s["block_min"], s["block_max"])
    windows = task_batches(s["n_batch"], n_ctx, n_vocab, rng, block, s["lead_in_from"],
                           s["lead_in_max"])
    groups = copy_probes(n_ctx, n_vocab)
    # held out: windows as the task makes them at the end (with lead-in), from a seed of their own
    held = periodic_windows(HELD_OUT, n_ctx + 1, n_vocab, np.random.default_rng(HELD_OUT_SEED),
                            block, s["lead_in_max"])  # [HELD_OUT, n_ctx + 1]

    def held_out(params: dict) -> dict:
        logits = gpt2(held[:, :-1], **params, n_head=n_head)  # [HELD_OUT, n_ctx, n_vocab]
        return {"held_out": round(cross_entropy(logits, held[:, 1:])[0], 4)}

    curve = {"settings": {key: value for key, value in s.items()
                          if key not in ("name", "models_dir")}, "loss": [], "measured": []}
    return run_training({
        "name": s["name"], "models_dir": s["models_dir"], "run": run, "resume": resuming,
        "hparams": hparams, "params": params, "windows": windows, "steps": s["steps"],
        "lr": s["lr"], "warmup": s["warmup"], "curve_every": s["curve_every"], "curve": curve,
        "vocab_dir": None, "files": vocab_files(n_vocab), "held_out": held_out,
        "probes": lambda params: measure_copies(params, n_head, groups),
        "sample": lambda params, step: None, "baselines": None})


def check_task(settings: dict) -> dict:
    """The task's settings, each checked, as curve.json records them; PicoGPTError for the
    first that cannot train, before any work."""
    if settings["task"] != "induction":
        raise PicoGPTError(_("task={task!r} is not a task picogpt knows; the tasks are "
                             "induction and poems (--task poems).").format(task=settings["task"]))
    if settings["text_file"] is not None:
        raise PicoGPTError(_("--task induction makes its own windows and reads no text; drop "
                             "{file}.").format(file=repr(settings["text_file"])))
    sizes = ("n_layer", "n_head", "n_embd", "n_ctx", "n_batch", "steps", "curve_every")
    check_settings({key: settings[key] for key in sizes}, settings["lr"], settings["seed"], 0,
                   n_vocab=whole_number("n_vocab", settings["n_vocab"], 7,
                                        hint=_("t0 .. t5 and [CLS] at least, for the probes")))
    n_ctx, n_vocab = settings["n_ctx"], settings["n_vocab"]
    if n_ctx < 1 + 2 * COPY_LENGTHS[0]:
        raise PicoGPTError(_("n_ctx={n_ctx} is too short for the held-out probes: the shortest "
                             "run ({run} tokens) and its copy after the start token need "
                             "{need}; give --n_ctx {need} or more.").format(
                                 n_ctx=n_ctx, run=COPY_LENGTHS[0], need=1 + 2 * COPY_LENGTHS[0]))
    whole_number("warmup", settings["warmup"], 0, settings["steps"],
                 hint=_("steps of the rise to --lr, within --steps"))
    low = whole_number("block_min", settings["block_min"], 1, hint=_("the shortest block"))
    whole_number("block_max", settings["block_max"], low, min(n_vocab - 1, n_ctx - 1),
                 hint=_("its tokens are distinct, so at most n_vocab - 1 = {most}, and it must "
                        "fit in n_ctx - 1 = {fit}; and from block_min up").format(
                            most=n_vocab - 1, fit=n_ctx - 1))
    whole_number("lead_in_from", settings["lead_in_from"], 0,
                 hint=_("a step; 0 is from the start"))
    whole_number("lead_in_max", settings["lead_in_max"], 0, n_ctx - 2,
                 hint=_("random tokens before the block; 0 is none"))
    return {key: value for key, value in settings.items() if key not in ("text_file", "name",
                                                                           "models_dir")}


def main(argv: list[str]) -> None:
    """`python -m picogpt.train --task induction ...`: train, then say what was written."""
    if task_name(argv) == "poems":
        from .poems import main_poems

        return main_poems(argv)
    result = run_command(train_task, argv, "python -m picogpt.train --task induction",
                         "text_file", stopped=_("training stopped before it began; nothing was "
                                                "written."))
    if isinstance(result, dict):
        say_written(result)


def say_written(result: dict) -> None:
    """The end of a task run: the held-out windows' loss, the probes, the model and a prompt."""
    model_dir, curve = Path(result["model_dir"]), result["curve"]
    best = next(m for m in curve["measured"] if m["step"] == curve["best"]["step"])
    print(said(_("held-out task windows: {before:.3f} -> {after:.3f} nats per token at "
                          "step {step}, the model kept; random-run probes: first copy "
                          "{first:.2f}, second copy {second:.2f} nats per token.").format(
        before=curve["measured"][0]["held_out"], after=best["held_out"], step=best["step"],
        first=best["first"], second=best["second"])), file=sys.stderr)
    run = [f"t{5 * i % (curve['settings']['n_vocab'] - 1)}" for i in range(1, 5)]
    print(said(_("wrote {folder}. Try: picogpt \"{prompt}\" --model_size {name} "
                          "--models_dir {models_dir} --explain page.html").format(
        folder=model_dir, prompt=" ".join(run + run[:2]), name=model_dir.name,
        models_dir=model_dir.parent)), file=sys.stderr)


def task_name(argv: list[str]) -> str | None:
    """The value of --task on a command line (--task NAME or --task=NAME)."""
    for i, word in enumerate(argv):
        if word.startswith("--task="):
            return word.split("=", 1)[1]
        if word == "--task" and i + 1 < len(argv):
            return argv[i + 1]
    return None
