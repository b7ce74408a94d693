"""`python -m picogpt.train --task NAME`: training runs whose data a task makes (picogpt/
induction.py's random runs, picogpt/poems.py's classical poems), with the task's recipe as the
flags' defaults."""

import sys
from pathlib import Path

import numpy as np

from ..chars import Chars, count_chars
from ..errors import PicoGPTError, _, whole_number
from ..files.store import save_model
from ..induction import (
    COPY_LENGTHS,
    copy_probes,
    measure_copies,
    task_batches,
    vocab_files,
)
from ..poems import (
    FORTUNES,
    baselines,
    first_halves,
    is_verse,
    line_share,
    poem_ids,
    read_fortunes,
    read_paragraphs,
    read_poetry_json,
    sample,
    split_poems,
    stream_loss,
)
from ..train import batches, init_params, learn
from .command import run_command
from .prepare import check_settings, new_model_dir, read_text


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
        curve_every: every this many steps, measure the held-out copies and the head scores;
            saved with the model as curve.json.
        text_file: none: the task makes its own windows.
    """
    settings = check_task(locals())
    model_dir = new_model_dir(models_dir, name)
    hparams = {"n_vocab": n_vocab, "n_ctx": n_ctx, "n_embd": n_embd, "n_head": n_head,
               "n_layer": n_layer}
    rng = np.random.default_rng(seed)
    params = init_params(hparams, rng)
    windows = task_batches(n_batch, n_ctx, n_vocab, rng, (block_min, block_max), lead_in_from,
                           lead_in_max)
    groups = copy_probes(n_ctx, n_vocab)
    curve = {"settings": settings, "loss": [], "measured": []}
    params, loss = learn(params, windows, steps, lr, warmup, n_head, curve, curve_every,
                         lambda params: measure_copies(params, n_head, groups))
    save_model(model_dir, hparams, params, None, {**vocab_files(n_vocab), "curve.json": curve})
    return {"model_dir": str(model_dir), "last_train_loss": loss, "curve": curve}


def check_task(settings: dict) -> dict:
    """The task's settings, each checked, as curve.json records them; PicoGPTError for the
    first that cannot train, before any work."""
    if settings["task"] != "induction":
        raise PicoGPTError(_("task={task!r} is not a task picogpt knows; the tasks are "
                             "induction and poems (--task poems).").format(task=settings["task"]))
    if settings["text_file"] is not None:
        raise PicoGPTError(f"--task induction makes its own windows and reads no text; drop "
                           f"{settings['text_file']!r}.")
    sizes = ("n_layer", "n_head", "n_embd", "n_ctx", "n_batch", "steps", "curve_every")
    check_settings({key: settings[key] for key in sizes}, settings["lr"], settings["seed"], 0,
                   n_vocab=whole_number("n_vocab", settings["n_vocab"], 7,
                                        hint="t0 .. t5 and [CLS] at least, for the probes"))
    n_ctx, n_vocab = settings["n_ctx"], settings["n_vocab"]
    if n_ctx < 1 + 2 * COPY_LENGTHS[0]:
        raise PicoGPTError(f"n_ctx={n_ctx} is too short for the held-out probes: the shortest "
                           f"run ({COPY_LENGTHS[0]} tokens) and its copy after the start token "
                           f"need {1 + 2 * COPY_LENGTHS[0]}; give --n_ctx 11 or more.")
    whole_number("warmup", settings["warmup"], 0, settings["steps"],
                 hint="steps of the rise to --lr, within --steps")
    low = whole_number("block_min", settings["block_min"], 1, hint="the shortest block")
    whole_number("block_max", settings["block_max"], low, min(n_vocab - 1, n_ctx - 1),
                 hint=f"its tokens are distinct, so at most n_vocab - 1 = {n_vocab - 1}, and "
                      f"it must fit in n_ctx - 1 = {n_ctx - 1}; and from block_min up")
    whole_number("lead_in_from", settings["lead_in_from"], 0, hint="a step; 0 is from the start")
    whole_number("lead_in_max", settings["lead_in_max"], 0, n_ctx - 2,
                 hint="random tokens before the block; 0 is none")
    return {key: value for key, value in settings.items() if key not in ("text_file", "name",
                                                                           "models_dir")}


def train_poems(task: str = "poems", name: str = "shi", models_dir: str = "models",
                text_file: str | None = None, n_layer: int = 4, n_head: int = 4,
                n_embd: int = 128, n_ctx: int = 64, n_batch: int = 32, steps: int = 1500,
                lr: float = 3e-3, warmup: int | None = None, seed: int = 0,
                verse_share: float = 0.5,
                n_held_out: int = 200, curve_every: int = 250) -> dict:
    """Train a character-level GPT-2 on classical Chinese poems: the recipe of docs/poems.md.

    With no text it reads Debian's fortunes-zh (apt-get install fortunes-zh), keeping the
    classical verse and sayings. Every flag can change the recipe; the model folder runs in
    every picogpt mode: picogpt "床前明月光，" --model_size NAME.

    Args:
        task: poems.
        name: the new model folder's name. A folder that exists is never overwritten.
        models_dir: where the folder goes, as picogpt's --models_dir.
        text_file: a UTF-8 text with one poem or passage per paragraph, or a folder of
            chinese-poetry's poet.*.json files, instead of fortunes-zh (--text for short).
        n_layer: number of transformer blocks.
        n_head: attention heads per block; n_embd must be a multiple of it.
        n_embd: width of the residual stream.
        n_ctx: the longest context, and the length of the training windows.
        n_batch: windows per step.
        steps: optimiser steps.
        lr: peak learning rate, reached after the warm-up; then a cosine down to lr/10.
        warmup: steps of the linear rise to lr (by default a tenth of --steps).
        seed: makes the initial weights and the windows, and so the run, repeatable.
        verse_share: the share of each batch's windows drawn from regular verse (five or
            seven characters a half-line); the rest from all the poems and sayings.
        n_held_out: verses set aside, never trained on, to measure the loss and the form.
        curve_every: every this many steps, measure the held-out loss and write a sample;
            the model kept is the one with the lowest held-out loss. Saved as curve.json.
    """
    whole_number("n_ctx", n_ctx, 8, hint="a half-line and what follows it must fit")
    sizes = {"n_layer": n_layer, "n_head": n_head, "n_embd": n_embd, "n_ctx": n_ctx,
             "n_batch": n_batch, "steps": steps, "curve_every": curve_every}
    check_settings(sizes, lr, seed, verse_share, 8000)  # the repeats check: a share, 0 to 1
    warmup = max(1, steps // 10) if warmup is None else whole_number(
        "warmup", warmup, 0, steps, hint="steps of the rise to --lr, within --steps")
    whole_number("n_held_out", n_held_out, 1)
    model_dir = new_model_dir(models_dir, name)
    train_poems_, held_out = split_poems(read_poems(text_file), n_held_out)
    encoder = Chars(count_chars("".join(train_poems_)))
    all_ids, held_ids = poem_ids(train_poems_, encoder), poem_ids(held_out, encoder)
    verse_ids = poem_ids([poem for poem in train_poems_ if is_verse(poem, 2)], encoder)
    if len(all_ids) < 2 * (n_ctx + 1):
        raise PicoGPTError(_("the poems are {n} characters; training on windows of {m} needs "
                             "at least {need}. Give a longer text.").format(
                                 n=len(all_ids), m=n_ctx + 1, need=2 * (n_ctx + 1)))
    hparams = {"n_vocab": encoder.n_vocab, "n_ctx": n_ctx, "n_embd": n_embd, "n_head": n_head,
               "n_layer": n_layer}
    rng = np.random.default_rng(seed)
    params = init_params(hparams, rng)
    n_verse = round(n_batch * verse_share) if len(verse_ids) > n_ctx + 1 else 0
    windows = mixed(batches(verse_ids if n_verse else all_ids, max(1, n_verse), n_ctx, rng),
                    batches(all_ids, n_batch - n_verse, n_ctx, rng), n_verse, n_batch)
    base = baselines(all_ids, held_ids, encoder.n_vocab)
    curve = {"settings": {"task": task, "seed": seed, "lr": lr, "warmup": warmup,
                          "n_batch": n_batch, "steps": steps, "verse_share": verse_share,
                          "n_held_out": len(held_out), **hparams},
             "baselines": base, "loss": [], "measured": []}
    best = {"held_out": float("inf")}

    def measure_at(params):
        held = stream_loss(params, n_head, held_ids)
        if held < best["held_out"]:
            best.update(held_out=held, params=params, step=len(curve["loss"]))
        return {"held_out": round(held, 4),
                "sample": sample(params, n_head, encoder, "", min(32, n_ctx - 1), seed=seed)}

    params, loss = learn(params, windows, steps, lr, warmup, n_head, curve, curve_every,
                         measure_at, lambda curve, measured, bar: show(curve, measured, bar,
                                                                        base))
    prompts = [prompt[-(n_ctx // 2) :] for prompt in first_halves(held_out[:48])]  # they fit
    share, texts = line_share(best["params"], n_head, encoder, prompts,
                              min(24, n_ctx - n_ctx // 2 - 1), seed=seed)
    curve["best"] = {"step": best["step"], "held_out": best["held_out"], "line_share": share,
                     "samples": [p + t for p, t in zip(prompts[:8], texts)]}
    save_model(model_dir, hparams, best["params"], None,
               {"chars.json": encoder.tokens, "curve.json": curve})
    return {"model_dir": str(model_dir), "curve": curve, "prompt": prompts[0]}


def read_poems(text_file: str | None) -> list[str]:
    """The poems to learn from: fortunes-zh's, a folder of chinese-poetry's JSON, or a text's
    paragraphs."""
    if text_file is None:
        poems = read_fortunes()
        if poems is None:
            raise PicoGPTError(_("no poems to learn from: fortunes-zh is not in {folder}. Run "
                                 "apt-get install fortunes-zh, or give --text a UTF-8 text (one "
                                 "poem a paragraph) or a folder of chinese-poetry's poet.*.json "
                                 "files.").format(folder=FORTUNES))
    elif Path(text_file).is_dir():
        poems = read_poetry_json(Path(text_file))
    else:
        poems = read_paragraphs(read_text(text_file))
    if len(poems) < 2:
        raise PicoGPTError(_("{text} holds {n} poems; the poems task needs two or more, one a "
                             "paragraph, to hold some out.").format(text=text_file or FORTUNES,
                                                                   n=len(poems)))
    return poems


def mixed(verse, rest, n_verse: int, n_batch: int):
    """Batches of n_batch windows: n_verse from verse's batches, the rest from rest's."""
    for (v_in, v_out), (r_in, r_out) in zip(verse, rest):
        yield (np.concatenate([v_in[:n_verse], r_in])[:n_batch],
               np.concatenate([v_out[:n_verse], r_out])[:n_batch])


def show(curve: dict, measured: dict, bar, base: dict) -> dict:
    """Add a measurement to the curve and print it: the held-out loss beside the baselines."""
    curve["measured"].append(measured)
    loss = curve["loss"][-1] if curve["loss"] else float("nan")
    bar.write(_("step {step}: loss {loss:.3f}, held-out verses {held:.3f} nats per character "
                "(unigram {unigram:.3f}, bigram {bigram:.3f}); sample: {sample}").format(
                    step=measured["step"], loss=loss, held=measured["held_out"],
                    sample=measured["sample"].replace("\n", " / "), **base), file=sys.stderr)
    return {"held-out": f"{measured['held_out']:.3f}"}


def main(argv: list[str]) -> None:
    """`python -m picogpt.train --task induction ...`: train, then say what was written."""
    if task_name(argv) == "poems":
        return main_poems(argv)
    result = run_command(train_task, argv, "python -m picogpt.train --task induction",
                         "text_file", stopped="training stopped; nothing was written.")
    if isinstance(result, dict):
        model_dir = Path(result["model_dir"])
        last = result["curve"]["measured"][-1]
        run = [f"t{5 * i % (result['curve']['settings']['n_vocab'] - 1)}" for i in range(1, 5)]
        print(f"picogpt: wrote {model_dir}. Held-out copies: first {last['first']:.2f}, second "
              f"{last['second']:.2f} nats per token. Try: picogpt \"{' '.join(run + run[:2])}\""
              f" --model_size {model_dir.name} --models_dir {model_dir.parent} --explain "
              f"page.html", file=sys.stderr)


def task_name(argv: list[str]) -> str | None:
    """The value of --task on a command line (--task NAME or --task=NAME)."""
    for i, word in enumerate(argv):
        if word.startswith("--task="):
            return word.split("=", 1)[1]
        if word == "--task" and i + 1 < len(argv):
            return argv[i + 1]
    return None


def main_poems(argv: list[str]) -> None:
    """`python -m picogpt.train --task poems ...`: train, then say what was written and how
    the model compares with the baselines, in the model's language."""
    argv = ["--text_file" if word == "--text" else word.replace("--text=", "--text_file=", 1)
            for word in argv]
    result = run_command(train_poems, argv, "python -m picogpt.train --task poems",
                         "text_file", stopped="training stopped; nothing was written.")
    if isinstance(result, dict):
        model_dir, curve = Path(result["model_dir"]), result["curve"]
        print(_("picogpt: wrote {model_dir} (the model of step {step}). Held-out verses: "
                "{held:.3f} nats per character; unigram {unigram:.3f}, bigram {bigram:.3f}. "
                "Half-lines that keep the prompt's length: {share:.0%}.").format(
                    model_dir=model_dir, step=curve["best"]["step"],
                    held=curve["best"]["held_out"], share=curve["best"]["line_share"],
                    **curve["baselines"]), file=sys.stderr)
        print(_("Try: picogpt \"{prompt}\" --model_size {name} --models_dir {models_dir} "
                "--top_k 8").format(prompt=result["prompt"], name=model_dir.name,
                                    models_dir=model_dir.parent), file=sys.stderr)
