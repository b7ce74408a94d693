"""`python -m picogpt.train TEXT --name NAME`: read a text, train a small GPT-2 on it with
picogpt/train.py, and write a model folder every picogpt mode runs. `--task NAME` hands the
command to a task (cli/tasks.py), which makes its own data; `--resume --name NAME` continues a
run that stopped, text or task. The run itself (measurements, checkpoints, Ctrl-C, the folder
written at the end) is cli/training.py's."""

import hashlib
import shlex
import sys
import uuid
from pathlib import Path

import numpy as np

from ..chars import Chars, count_chars
from ..curve import measure, probes
from ..encoder import N_VOCAB, Encoder
from ..errors import PicoGPTError, _
from ..files.load import read_encoder
from ..files.store import read_json
from ..generate import generate
from ..merges import bpe_files, learn_merges
from ..ngram import bigram_loss, unigram_loss
from ..train import batches, held_out_loss, hold_out, init_params, paragraph_ids, paragraphs
from .checkpoint import check_free, part_dir
from .command import run_command, said
from .prepare import check_settings, check_vocab, find_vocab, new_model_dir, read_text
from .training import run_training

# Measured at every measurement: the held-out paragraphs up to this many tokens (the rest are
# neither trained on nor measured): on GPT-2's vocabulary, about a second of a CPU.
HELD_OUT_TOKENS = 4096


def train(text_file: str, name: str = "trained", models_dir: str = "models", n_layer: int = 2,
          n_head: int = 4, n_embd: int = 128, n_ctx: int = 128, n_batch: int = 16,
          steps: int = 600, lr: float = 3e-3, seed: int = 0, repeats: float = 0.0,
          curve_every: int = 50, vocab_dir: str | None = None,
          n_vocab: int | None = None, vocab: str | None = None) -> dict:
    """Train a small GPT-2 on a text file and write it to models_dir/name. (The induction
    task needs no text: python -m picogpt.train --task induction --help.) A run stopped with
    Ctrl-C goes on with: python -m picogpt.train --resume --name NAME --models_dir DIR.

    Args:
        text_file: UTF-8 text to learn from, in paragraphs (poems, passages) separated by blank
            lines; every tenth paragraph is held out, never trained on, to measure the loss.
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
        curve_every: every this many steps, measure the held-out loss, keep a checkpoint and
            print a sample; the curve is saved with the model as curve.json.
        vocab_dir: folder with GPT-2's encoder.json and vocab.bpe (found by default).
        n_vocab: learn a vocabulary of this many tokens from the text (byte-level BPE, as
            GPT-2's: 256 bytes, the merges, <|endoftext|>) instead of using GPT-2's 50,257. A
            small model trains many times faster on a few hundred or thousand tokens.
        vocab: chars for a character vocabulary: each character the training paragraphs hold
            twice or more is a token (line breaks and spaces too), the rest one unknown token;
            for Chinese, or a character-level model of a book (docs/poems.md).
    """
    check_vocab(n_vocab, vocab_dir)
    if vocab is not None and (vocab != "chars" or n_vocab is not None or vocab_dir is not None):
        raise PicoGPTError(_("--vocab {vocab!r}: the one vocabulary it names is chars (a "
                             "character vocabulary), which takes neither --n_vocab nor "
                             "--vocab_dir.").format(vocab=vocab))
    check_settings({"n_layer": n_layer, "n_head": n_head, "n_embd": n_embd, "n_ctx": n_ctx,
                    "n_batch": n_batch, "steps": steps, "curve_every": curve_every}, lr, seed,
                   repeats, n_vocab or N_VOCAB)  # memory: the output layer's rows are the tokens
    new_model_dir(models_dir, name)
    check_free(models_dir, name)
    settings = {key: value for key, value in locals().items() if key != "text_file"}
    return train_text({"text_file": str(Path(text_file).absolute()), **settings}, None)


def train_text(settings: dict, run: dict | None) -> dict:
    """The text run of settings (train's arguments): a new one, or run's, stopped, resumed."""
    s, resuming = settings, run is not None
    text = read_text(s["text_file"])
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if resuming and run["sha256"] != digest:
        raise PicoGPTError(_("{text_file} changed since the run began, and a resumed run must "
                             "read the same text; put it back, or train anew under another "
                             "--name.").format(text_file=s["text_file"]))
    run = run or {"id": uuid.uuid4().hex, "command": "text", "settings": s, "sha256": digest}
    parts = paragraphs(text)
    trained, held = hold_out(parts)
    if s.get("vocab") == "chars":  # the characters of the training paragraphs
        encoder = Chars(count_chars("\n\n".join(trained)))
        vocab, files = None, {"chars.json": encoder.tokens}
    elif s["n_vocab"] is None:
        vocab, files = find_vocab(s["vocab_dir"], s["models_dir"]), {}
        encoder = read_encoder(vocab)
    else:  # merges of the training paragraphs, written into the model folder as GPT-2's files
        merges, _pieces = learn_merges("\n\n".join(trained), s["n_vocab"])
        vocab, files = None, bpe_files(merges)
        encoder = Encoder(files["encoder.json"], merges)
    held = held[: max(1, int(np.searchsorted(np.cumsum([len(encoder.encode(part)) + 1 for part
                                                         in held]), HELD_OUT_TOKENS, "right")))]
    train_ids, held_ids = paragraph_ids(trained, encoder), paragraph_ids(held, encoder)
    check_lengths(s["text_file"], len(parts), len(train_ids), len(held_ids), s["n_ctx"])
    n_vocab, n_head = encoder.n_vocab, s["n_head"]
    hparams = {"n_vocab": n_vocab, "n_ctx": s["n_ctx"], "n_embd": s["n_embd"],
               "n_head": n_head, "n_layer": s["n_layer"]}
    rng = np.random.default_rng(s["seed"])
    params = init_params(hparams, rng)
    windows = batches(train_ids, s["n_batch"], s["n_ctx"], rng, s["repeats"], n_vocab)
    per_char = (len(held_ids) - 1) / sum(len(part) for part in held)  # tokens per character
    baselines = {"unigram": unigram_loss(train_ids, held_ids, n_vocab),
                 "bigram": bigram_loss(train_ids, held_ids, n_vocab)}
    baselines = {key: round(value, 4) for key, value in baselines.items()}

    def held_out(params: dict) -> dict:
        loss = held_out_loss(params, held_ids, n_head)
        return {"held_out": round(loss, 4), "held_out_per_char": round(loss * per_char, 4)}

    def sample(params: dict, step: int) -> str:
        ids = generate([encoder.start], params, n_head, min(32, s["n_ctx"] - 1),
                       top_k=min(40, n_vocab), seed=s["seed"] + step, encoder=encoder)
        return encoder.decode(list(ids))

    texts = probes(s["n_ctx"], n_vocab) if s["repeats"] else []
    curve = {"settings": {key: s[key] for key in ("repeats", "lr", "n_batch", "steps", "seed")}
             | hparams, "held_out_tokens": len(held_ids) - 1,
             "held_out_paragraphs": len(held), "baselines": baselines, "loss": [],
             "measured": []}
    result = run_training({
        "name": s["name"], "models_dir": s["models_dir"], "run": run, "resume": resuming,
        "hparams": hparams, "params": params, "windows": windows, "steps": s["steps"],
        "lr": s["lr"], "warmup": max(1, s["steps"] // 10), "curve_every": s["curve_every"],
        "curve": curve, "vocab_dir": vocab, "files": files, "held_out": held_out,
        "probes": (lambda params: measure(params, n_head, texts)) if texts else lambda p: None,
        "sample": sample, "baselines": baselines})
    return {**result, "baselines": baselines, "prompt": hint_prompt(held[0])}


def check_lengths(text_file: str, n_parts: int, n_train: int, n_held: int, n_ctx: int) -> None:
    """Raise PicoGPTError if the text cannot fill a training window and a held-out one."""
    window = n_ctx + 1
    if n_parts < 2:
        raise PicoGPTError(_("{text_file} holds fewer than two paragraphs; training holds whole "
                             "paragraphs out to measure the loss on, so it needs two or more, "
                             "separated by a blank line (or one to a line).").format(
            text_file=text_file))
    if n_held < window or n_train < window:
        need = -(-window * (n_train + n_held) // max(1, min(n_held, n_train)))
        raise PicoGPTError(_("{text_file} is too short: its held-out paragraphs (every tenth) "
                             "are {n_held} tokens and the rest {n_train}, and each must fill a "
                             "window of n_ctx + 1 = {window}. Give a text of about {need} tokens "
                             "or more, or lower --n_ctx.").format(
            text_file=text_file, n_held=n_held, n_train=n_train, window=window, need=need))


def hint_prompt(paragraph: str) -> str:
    """A prompt in the model's own language: the start of a paragraph it never trained on."""
    line = paragraph.strip().splitlines()[0].strip()
    words = line.split()
    return " ".join(words[:3]) if len(words) > 1 else line[:5]


def resume(name: str, models_dir: str = "models", resume: bool = True) -> dict:
    """Continue a stopped training run to its planned steps, with the settings it began with.

    Args:
        name: the stopped run's model name (its folder in progress is models_dir/NAME.part).
        models_dir: where that folder is, as the run's --models_dir.
        resume: continue the run (the flag that chose this command).
    """
    run = read_json(part_dir(models_dir, name) / "run.json")
    if not isinstance(run, dict) or "settings" not in run:
        raise PicoGPTError(_("there is no stopped run of {name} in {models_dir} (no {part}); "
                             "check --name and --models_dir.").format(
            name=name, models_dir=models_dir, part=part_dir(models_dir, name)))
    if run["command"] == "task":
        from .tasks import run_task

        return {**run_task(run["settings"], run), "task": True}
    return train_text(run["settings"], run)


def quoted(prompt: str) -> str:
    """prompt as a shell reads it, in double quotes where they are enough."""
    return shlex.quote(prompt) if set(prompt) & set('"$`\\!') else f'"{prompt}"'


def flag_given(argv: list[str], flag: str) -> bool:
    return any(word.split("=")[0] == flag for word in argv)


def main(argv: list[str] | None = None) -> None:
    """Entry point of `python -m picogpt.train`."""
    argv = sys.argv[1:] if argv is None else argv
    if flag_given(argv, "--resume"):
        result = run_command(resume, argv, "python -m picogpt.train --resume", "name",
                             misplaced=lambda flag: _("--resume goes on with the settings the "
                                                      "run began with; drop --{flag}.").format(
                                 flag=flag), stopped=_("training stopped."))
    elif flag_given(argv, "--task"):  # a task makes its own data
        from .tasks import main as task_main

        return task_main(argv)
    else:
        result = run_command(train, argv, "python -m picogpt.train", "text_file",
                             stopped=_("training stopped before it began; nothing was written."))
    if isinstance(result, dict) and result.get("task"):
        from .tasks import say_written as say_task_written

        say_task_written(result)
    elif isinstance(result, dict):
        say_written(result)


def say_written(result: dict) -> None:
    """The end of a text run: the held-out loss beside the baselines, a sample, the model."""
    model_dir, curve = Path(result["model_dir"]), result["curve"]
    first = curve["measured"][0]
    best = next(m for m in curve["measured"] if m["step"] == curve["best"]["step"])
    print(said(_("held-out text: {before:.3f} -> {after:.3f} nats per token "
                          "({per_char:.3f} per character) at step {step}, the model kept; on the "
                          "same tokens a unigram model scores {unigram:.3f} and a bigram model "
                          "{bigram:.3f}.").format(before=first["held_out"], after=best["held_out"],
                                   per_char=best["held_out_per_char"], step=best["step"],
                                   **result["baselines"])), file=sys.stderr)
    if curve["rising_after"] is not None:
        print(said(_("held-out loss rose after step {step} (to {last:.3f} at step "
                              "{end}): the model began to learn its training text by "
                              "heart.").format(
            step=curve["rising_after"], last=curve["measured"][-1]["held_out"],
            end=curve["measured"][-1]["step"])), file=sys.stderr)
    print(said(_("sample: {sample}").format(
        sample=best.get("sample", "").replace("\n", " ⏎ "))), file=sys.stderr)
    print(said(_("wrote {folder}. Try: picogpt {prompt} --model_size {name} "
                          "--models_dir {models_dir}").format(
        folder=model_dir, prompt=quoted(result["prompt"]), name=model_dir.name,
        models_dir=model_dir.parent)), file=sys.stderr)


if __name__ == "__main__":
    main()
