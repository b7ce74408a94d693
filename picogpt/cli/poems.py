"""`python -m picogpt.train --task poems`: a character-level GPT-2 of classical Chinese verse.

The poems, their cleaning, the held-out verses and the kept-length share are files/poems.py's;
the character vocabulary is picogpt/chars.py's; the run (measurements beside the unigram and
bigram baselines, checkpoints, Ctrl-C, --resume, the best model) is cli/training.py's. This room
chooses the recipe (its flags' defaults, measured in docs/poems.md), reads the poems, draws each
batch's windows from verse and from all the text, and says what was written.
"""

import sys
import uuid
from pathlib import Path

import numpy as np

from ..chars import Chars, count_chars
from ..errors import PicoGPTError, _, whole_number
from ..files.load import load_encoder_hparams_and_params
from ..files.poems import (
    FORTUNES,
    first_halves,
    is_verse,
    line_share,
    line_starts,
    poem_ids,
    read_fortunes,
    read_paragraphs,
    read_poetry_json,
    sample,
    split_poems,
)
from ..ngram import bigram_loss, unigram_loss
from ..train import batches, held_out_loss, init_params
from .checkpoint import check_free
from .command import run_command
from .prepare import check_settings, new_model_dir, read_text
from .training import run_training


def train_poems(task: str = "poems", name: str = "shi", models_dir: str = "models",
                text_file: str | None = None, n_layer: int = 4, n_head: int = 4,
                n_embd: int = 128, n_ctx: int = 64, n_batch: int = 16, steps: int = 1200,
                lr: float = 3e-3, warmup: int | None = None, seed: int = 0,
                verse_share: float = 0.5, n_held_out: int = 200, curve_every: int = 300) -> dict:
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
            seven characters a half-line), each beginning where a line begins, as a prompt
            does; the rest from anywhere in all the poems and sayings.
        n_held_out: verses set aside, never trained on, to measure the loss and the form.
        curve_every: every this many steps, measure the held-out loss and write a sample;
            the model kept is the one with the lowest held-out loss. Saved as curve.json.
    """
    whole_number("n_ctx", n_ctx, 8, hint="a half-line and what follows it must fit")
    sizes = {"n_layer": n_layer, "n_head": n_head, "n_embd": n_embd, "n_ctx": n_ctx,
             "n_batch": n_batch, "steps": steps, "curve_every": curve_every}
    check_settings(sizes, lr, seed, 0.0, 8000)  # memory: about as many rows as characters
    if not (isinstance(verse_share, int | float) and not isinstance(verse_share, bool)
            and 0 <= verse_share <= 1):
        raise PicoGPTError(_("verse_share={value!r} is not a share from 0 to 1; 0.5 draws half "
                             "of each batch's windows from regular verse.").format(
                                 value=verse_share))
    warmup = max(1, steps // 10) if warmup is None else whole_number(
        "warmup", warmup, 0, steps, hint="steps of the rise to --lr, within --steps")
    whole_number("n_held_out", n_held_out, 1)
    new_model_dir(models_dir, name)
    check_free(models_dir, name)
    if text_file is not None:
        text_file = str(Path(text_file).absolute())
    settings = {key: value for key, value in locals().items() if key not in ("sizes", "b")}
    return run_poems(settings, None)


def run_poems(settings: dict, run: dict | None) -> dict:
    """The poems run of settings (train_poems's): a new one, or run's, stopped, resumed."""
    s, resuming = settings, run is not None
    run = run or {"id": uuid.uuid4().hex, "command": "task", "settings": s}
    trained, held = split_poems(read_poems(s["text_file"]), s["n_held_out"])
    encoder = Chars(count_chars("".join(trained)))
    all_ids, held_ids = poem_ids(trained, encoder), poem_ids(held, encoder)
    verse_ids = poem_ids([poem for poem in trained if is_verse(poem, 2)], encoder)
    n_ctx, n_head, n_batch = s["n_ctx"], s["n_head"], s["n_batch"]
    if min(len(all_ids), len(held_ids)) < n_ctx + 1:
        raise PicoGPTError(_("the poems are {n} characters; training on windows of {m} needs "
                             "at least {need}. Give a longer text.").format(
                                 n=len(all_ids), m=n_ctx + 1, need=2 * (n_ctx + 1)))
    hparams = {"n_vocab": encoder.n_vocab, "n_ctx": n_ctx, "n_embd": s["n_embd"],
               "n_head": n_head, "n_layer": s["n_layer"]}
    rng = np.random.default_rng(s["seed"])
    params = init_params(hparams, rng)
    n_verse = round(n_batch * s["verse_share"]) if len(verse_ids) > n_ctx + 1 else 0
    verse = verse_ids if n_verse else all_ids  # its windows begin where a line begins
    windows = mixed(batches(verse, max(1, n_verse), n_ctx, rng,
                            starts=line_starts(verse, encoder)),
                    batches(all_ids, n_batch - n_verse, n_ctx, rng), n_verse, n_batch)
    baselines = {"unigram": round(unigram_loss(all_ids, held_ids, encoder.n_vocab), 4),
                 "bigram": round(bigram_loss(all_ids, held_ids, encoder.n_vocab), 4)}
    curve = {"settings": {key: value for key, value in s.items()
                          if key not in ("name", "models_dir", "text_file")} | hparams,
             "held_out_tokens": len(held_ids) - 1, "held_out_poems": len(held),
             "baselines": baselines, "loss": [], "measured": []}
    result = run_training({
        "name": s["name"], "models_dir": s["models_dir"], "run": run, "resume": resuming,
        "hparams": hparams, "params": params, "windows": windows, "steps": s["steps"],
        "lr": s["lr"], "warmup": s["warmup"], "curve_every": s["curve_every"], "curve": curve,
        "vocab_dir": None, "files": {"chars.json": encoder.tokens},
        "held_out": lambda params: {"held_out": round(held_out_loss(params, held_ids, n_head),
                                                      4)},
        "probes": lambda params: None, "baselines": baselines,
        "sample": lambda params, step: sample(params, n_head, encoder, "", min(32, n_ctx - 1),
                                              seed=s["seed"] + step)})
    prompts = [prompt[-(n_ctx // 2) :] for prompt in first_halves(held[:48])]  # they fit
    model_dir = Path(result["model_dir"])
    best = load_encoder_hparams_and_params(model_dir.name, str(model_dir.parent))[2]
    share, texts = line_share(best, n_head, encoder, prompts, min(24, n_ctx - n_ctx // 2 - 1),
                              seed=s["seed"])
    form = {"line_share": round(share, 4), "samples": [p + t for p, t in zip(prompts[:8], texts)]}
    return {**result, "baselines": baselines, "form": form, "prompt": prompts[0]}


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


def main_poems(argv: list[str]) -> None:
    """`python -m picogpt.train --task poems ...`: train, then say what was written and how
    the model compares with the baselines, in the model's language."""
    argv = ["--text_file" if word == "--text" else word.replace("--text=", "--text_file=", 1)
            for word in argv]
    result = run_command(train_poems, argv, "python -m picogpt.train --task poems",
                         "text_file", stopped=_("training stopped before it began; nothing "
                                                "was written."))
    if isinstance(result, dict):
        model_dir, curve = Path(result["model_dir"]), result["curve"]
        print(_("picogpt: wrote {model_dir} (the model of step {step}). Held-out verses: "
                "{held:.3f} nats per character; unigram {unigram:.3f}, bigram {bigram:.3f}. "
                "Half-lines that keep the prompt's length: {share:.0%}.").format(
                    model_dir=model_dir, step=curve["best"]["step"],
                    held=curve["best"]["held_out"], share=result["form"]["line_share"],
                    **curve["baselines"]), file=sys.stderr)
        print(_("Try: picogpt \"{prompt}\" --model_size {name} --models_dir {models_dir} "
                "--top_k 8").format(prompt=result["prompt"], name=model_dir.name,
                                    models_dir=model_dir.parent), file=sys.stderr)
