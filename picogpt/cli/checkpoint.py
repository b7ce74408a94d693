"""The folder a training run works in, its checkpoints, and the model folders it writes.

A run of `python -m picogpt.train --name NAME` works in `models_dir/NAME.part/`:

    run.json        the command's settings (and the text's SHA-256): what --resume runs again
    checkpoint.npz  at the last measurement: the params, AdamW's m and v and step, the best
                    params by held-out loss and the curve so far, written whole or not at all
    hparams.json, params/, the vocabulary, curve.json
                    only when the model could not be written as NAME: then NAME.part is a
                    model folder that picogpt runs (--model_size NAME.part)

The batches need no saved state: a resumed run makes them again from the seed and skips the
ones already trained on, so it trains on the very windows the stopped run would have. When the
run ends, NAME is written (as save_model writes any model: whole, never over a folder that
exists) and NAME.part goes. On Ctrl-C, NAME gets the best model so far and NAME.part stays for
--resume; a resumed run may replace that NAME, and only that one: its curve.json carries the
run's id. Prints nothing: cli/training.py says what happened.
"""

import contextlib
import json
import os
import shlex
import shutil
import signal
from pathlib import Path

import numpy as np

from ..errors import PicoGPTError, _
from ..files.params import flatten, nest
from ..files.store import read_json, save_model, write_json_atomic, write_params


def part_dir(models_dir: str, name: str) -> Path:
    """The folder a run of name works in."""
    return Path(models_dir) / f"{name}.part"


def resume_command(name: str, models_dir: str) -> str:
    """The command that continues the run of name, as a shell reads it."""
    return (f"python -m picogpt.train --resume --name {shlex.quote(name)} --models_dir "
            f"{shlex.quote(str(models_dir))}")


def check_free(models_dir: str, name: str) -> None:
    """Raise PicoGPTError if a run of name stopped before and was not finished."""
    part = part_dir(models_dir, name)
    if part.exists():
        raise PicoGPTError(_("{part} holds a run of {name} that did not finish; continue it "
                             "with: {command} (or delete that folder to start again).").format(
            part=part, name=name, command=resume_command(name, models_dir)))


def begin(part: Path, run: dict) -> None:
    """Make the folder a run works in, holding run.json."""
    try:
        part.mkdir(parents=True)
        write_json_atomic(part / "run.json", run)
    except OSError as e:
        raise PicoGPTError(_("cannot write to {folder}: {reason}. Choose a folder you can write "
                             "with --models_dir.").format(folder=part, reason=e.strerror)) from None


@contextlib.contextmanager
def uninterrupted(stop_after: bool = True):
    """Ctrl-C waits until the block is done, then stops the run (unless not stop_after: a model
    being written as the run ends, which Ctrl-C would stop anyway): a file half written is worse
    than a stop that comes a moment late."""
    caught = []
    try:
        previous = signal.signal(signal.SIGINT, lambda *_: caught.append(True))
    except ValueError:  # not the main thread: signals cannot be caught here
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught and stop_after:
        raise KeyboardInterrupt


def write_checkpoint(part: Path, step: int, params: dict, state: dict, best: dict,
                     curve: dict) -> None:
    """Keep what resuming at step needs in part/checkpoint.npz, replacing the last one at once.
    best is {"step", "held_out", "params"}; its params are stored unless they are step's."""
    arrays = {f"params/{k}": a for k, a in flatten(params).items()}
    for moment in ("m", "v") if "m" in state else ():
        arrays |= {f"{moment}/{k}": a for k, a in flatten(state[moment]).items()}
    if best["step"] != step:
        arrays |= {f"best/{k}": a for k, a in flatten(best["params"]).items()}
    about = {"step": step, "adam_step": state["step"], "best_step": best["step"],
             "best_held_out": best["held_out"], "curve": curve}
    tmp = part / f"checkpoint.tmp-{os.getpid()}.npz"
    try:
        with uninterrupted():
            np.savez(tmp, about=np.array(json.dumps(about)), **arrays)
            os.replace(tmp, part / "checkpoint.npz")
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise PicoGPTError(_("cannot write the checkpoint of step {step} to {part}: {reason}. "
                             "Free some space; the last checkpoint is kept.").format(
            step=step, part=part, reason=e.strerror)) from None


def read_checkpoint(part: Path) -> dict | None:
    """What write_checkpoint kept: {"step", "params", "state", "best", "curve"}, or None."""
    try:
        with np.load(part / "checkpoint.npz") as stored:
            about = json.loads(str(stored["about"]))
            trees = {}
            for key in stored.files:
                if "/" in key:
                    kind, name = key.split("/", 1)
                    trees.setdefault(kind, {})[name] = stored[key]
    except (OSError, ValueError, KeyError):
        return None
    params = nest(trees["params"])
    state = {"step": about["adam_step"]}
    if "m" in trees:
        state |= {"m": nest(trees["m"]), "v": nest(trees["v"])}
    best = {"step": about["best_step"], "held_out": about["best_held_out"],
            "params": nest(trees["best"]) if "best" in trees else params}
    return {"step": about["step"], "params": params, "state": state, "best": best,
            "curve": about["curve"]}


def save_run_model(model_dir: Path, run_id: str, hparams: dict, params: dict, vocab_dir,
                   files: dict, curve: dict) -> None:
    """Write the run's model as model_dir: a new folder, or in place of the one an earlier part
    of this run wrote when it was stopped (its curve.json names the run); never another."""
    ours = (read_json(model_dir / "curve.json") or {}).get("run") == run_id
    if model_dir.exists() and not ours:
        raise PicoGPTError(_("{folder} already exists, and training never overwrites a model "
                             "folder").format(folder=model_dir))
    with uninterrupted(stop_after=False):
        if not model_dir.exists():
            return save_model(model_dir, hparams, params, vocab_dir, {**files, "curve.json": curve})
        new = model_dir.with_name(f".{model_dir.name}.new-{os.getpid()}")
        old = model_dir.with_name(f".{model_dir.name}.old-{os.getpid()}")
        save_model(new, hparams, params, vocab_dir, {**files, "curve.json": curve})
        model_dir.rename(old)
        new.rename(model_dir)
        shutil.rmtree(old, ignore_errors=True)


def keep_in_part(part: Path, hparams: dict, params: dict, vocab_dir, files: dict,
                 curve: dict) -> bool:
    """Make part a model folder picogpt runs, holding params; False if that fails too."""
    try:
        with uninterrupted(stop_after=False):
            for name in ("encoder.json", "vocab.bpe") if vocab_dir is not None else ():
                shutil.copyfile(Path(vocab_dir) / name, part / name)
            for name, value in {**files, "curve.json": curve}.items():
                if isinstance(value, str):
                    (part / name).write_text(value, encoding="utf-8")
                else:
                    write_json_atomic(part / name, value)
            write_params(part, flatten(params).items(), source=None)
            write_json_atomic(part / "hparams.json", hparams)  # last: a model from here on
        return True
    except (OSError, PicoGPTError):
        (part / "hparams.json").unlink(missing_ok=True)
        return False
