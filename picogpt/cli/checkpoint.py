"""The folder a training run works in, its checkpoints, and the model folders it writes.

A run of `python -m picogpt.train --name NAME` works in `models_dir/NAME.part/`:

    run.json        the run's id, settings (a tasks.Run) and its data's digest: what --resume
                    runs again (the older forms, {"command", "settings"}, are read too)
    .lock           held while the run trains, so a second run of NAME is told so
    checkpoint.npz  at the last measurement: the params, the optimizer's state (its step, and
                    its trees: AdamW's m and v, as optimizer/m.<name>), the best params by
                    held-out loss and the curve so far, written whole or not at all (the older
                    form, m/<name> and v/<name> beside adam_step, is read too)
    hparams.json, params/, the vocabulary, curve.json
                    only when the model could not be written as NAME: then NAME.part is a
                    model folder that picogpt runs (--model_size NAME.part)

The batches need no saved state: a resumed run makes them again from the seed and skips the
ones already trained on, so it trains on the very windows the stopped run would have. When the
run ends, NAME is written (as save_model writes any model: whole, never over a folder that
exists) and NAME.part goes. On Ctrl-C, NAME gets the best model so far and NAME.part stays for
--resume; a resumed run may replace that NAME, and only that one: its curve.json carries the
run's id. Prints nothing: cli/training.py, which runs the run, says what happened.
"""

import contextlib
import json
import os
import shlex
import shutil
import signal
import stat
import zipfile
from dataclasses import MISSING, fields
from pathlib import Path

import numpy as np

from ..errors import PicoGPTError, _, reason
from ..files.params import flatten, nest
from ..files.store import (
    read_json,
    refuse_unless_regular,
    save_model,
    write_json_atomic,
    write_params,
)
from ..kinds import kind_of
from ..optim import optimizer_from
from ..tasks import Plan, Run, Task

RUN_FORMAT = 2  # run.json: {"format", "id", "run", "digest"}; 1 was {"id", "command", "settings"}


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
        probe = training_lock(part) if (part / ".lock").is_file() else None  # raises if held
        if probe is not None:
            probe.close()
        raise PicoGPTError(_("{part} holds a run of {name} that did not finish; continue it "
                             "with: {command} (or delete that folder to start again).").format(
            part=part, name=name, command=resume_command(name, models_dir)))


def begin(part: Path, record: dict) -> None:
    """Make the folder a run works in, holding run.json (record)."""
    try:
        part.mkdir(parents=True)
    except FileExistsError:  # another run of the same name made it a moment ago
        raise PicoGPTError(_("another run of {name} began at the same time and works in {part}; "
                             "wait for it, or choose another --name.").format(
            name=part.name.removesuffix(".part"), part=part)) from None
    except OSError as e:
        raise PicoGPTError(_("cannot write to {folder}: {reason}. Choose a folder you can write "
                             "with --models_dir.").format(folder=part, reason=reason(e))) from None
    try:
        write_json_atomic(part / "run.json", record)
    except BaseException:  # Ctrl-C, a full disk: no folder is left that holds no run
        shutil.rmtree(part, ignore_errors=True)
        raise


def training_lock(part: Path):
    """Hold part/.lock while the run trains (the lock ends with the process): a --resume or a
    second run of the same name, started meanwhile, is told that this one is training."""
    try:
        import fcntl  # POSIX only; elsewhere two runs are not told apart
    except ImportError:
        return None
    refuse_unless_regular(part / ".lock")  # a FIFO would block the open below
    lock = open(part / ".lock", "a")  # noqa: SIM115 (held until the process ends)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise PicoGPTError(_("a run of {name} is training now in {part}; wait for it to end, "
                             "or stop it with Ctrl-C first.").format(
            name=part.name.removesuffix(".part"), part=part)) from None
    return lock


def read_run(part: Path, tasks: dict[str, Task]) -> tuple[Run, dict]:
    """The stopped run in part: its Run and run.json's record ({"id", "digest", ...}), from
    run.json in this form or the one before it. PicoGPTError, naming the file, when it cannot
    be read as one."""
    path = part / "run.json"
    record = read_json(path)
    if not path.is_file() and not part.is_dir():
        raise PicoGPTError(_("there is no stopped run of {name} in {models_dir} (no {part}); "
                             "check --name and --models_dir.").format(
            name=part.name.removesuffix(".part"), models_dir=part.parent, part=part))
    try:
        if record.get("format") == RUN_FORMAT:
            settings, digest = dict(record["run"]), record.get("digest")
        else:  # the first form: the command's flags as they were named then
            settings, digest = older_settings(record), record.get("sha256")
        task = tasks[settings["task"]]
        known = {f.name for f in fields(task.options)}
        options = task.options(**{k: v for k, v in settings.pop("options").items() if k in known})
        run = Run(**{f.name: settings[f.name] for f in fields(Run)
                     if f.name not in ("options", "optimizer")
                     and (f.name in settings or f.default is MISSING)},  # a field since added
                  options=options, optimizer=optimizer_from(settings.get("optimizer")))
        return run, {"id": record["id"], "digest": digest, "run": run.settings()}
    except (AttributeError, KeyError, TypeError, ValueError):
        raise PicoGPTError(_("{file} does not describe a run that can go on (it is damaged or "
                             "lacks a setting); delete {part} and train again. The model it kept "
                             "so far, if any, is in {model}.").format(
            file=path, part=part, model=part.with_name(part.name.removesuffix(".part"))
        )) from None


def older_settings(record: dict) -> dict:
    """A run.json of the first form ({"command": "text" or "task", "settings"}) as a Run's
    settings: the text's flag was text_file, a text run's warm-up was a tenth of its steps,
    and a poems run read chinese-poetry as it was stored (traditional characters)."""
    s = dict(record["settings"])
    task = "text" if record["command"] == "text" else s.pop("task")
    shared = {key: s.pop(key) for key in ("name", "models_dir", "n_layer", "n_head", "n_embd",
                                          "n_ctx", "n_batch", "steps", "lr", "seed",
                                          "curve_every")}
    warmup = s.pop("warmup", None)
    if warmup is None:
        warmup = max(1, shared["steps"] // 10)
    options = s | ({"traditional": True} if task == "poems" else {})
    return {"task": task, "text": s.pop("text_file", None), "warmup": warmup, **shared,
            "options": {k: v for k, v in options.items() if k != "text_file"}}


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
    trees = {key: tree for key, tree in state.items() if key != "step"}  # AdamW's m and v
    arrays |= {f"optimizer/{k}": a for k, a in flatten(trees).items()}
    if best["step"] != step:
        arrays |= {f"best/{k}": a for k, a in flatten(best["params"]).items()}
    about = {"step": step, "optimizer_step": state["step"], "best_step": best["step"],
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
            step=step, part=part, reason=reason(e))) from None


def expected_checkpoint(plan: Plan, optimizer) -> dict[str, tuple[tuple, np.dtype]]:
    """The arrays a checkpoint of plan's run holds once a step is taken, name -> (shape, dtype):
    the params, and the optimizer's state trees as optimizer/<tree>.<name>. (best/ repeats
    params/ when the best step is not the last; before the first step there are only the
    params. A checkpoint of the older form holds AdamW's m/<name> and v/<name> instead.)"""
    state = optimizer.init(plan.params)
    trees = {key: tree for key, tree in state.items() if key != "step"}
    return {**{f"params/{key}": (array.shape, array.dtype)
               for key, array in flatten(plan.params).items()},
            **{f"optimizer/{key}": (array.shape, array.dtype)
               for key, array in flatten(trees).items()}}


def older_form(expected: dict) -> dict:
    """expected_checkpoint's arrays as a checkpoint written before optimizers were values holds
    them: AdamW's optimizer/m.<name> as m/<name>, and v alike."""
    older = {}
    for key, shape in expected.items():
        tree, _dot, name = key.removeprefix("optimizer/").partition(".")
        older[f"{tree}/{name}" if key.startswith("optimizer/") else key] = shape
    return older


def read_checkpoint(part: Path, expected: dict[str, tuple[tuple, np.dtype]], steps: int) -> dict:
    """What write_checkpoint kept: {"step", "params", "state", "best", "curve"}, checked against
    the arrays the run expects (expected_checkpoint) and its steps before any is read;
    PicoGPTError, naming the file and what can still be done, when it is missing, damaged, not
    a regular file, or of another run."""
    path = part / "checkpoint.npz"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO never blocks
        with os.fdopen(fd, "rb") as file:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise PicoGPTError(_("it is not a regular file"))
            with np.load(file) as stored:
                about = json.loads(str(stored["about"]))
                why = mismatch(stored.zip, expected, about, steps)
                if why:
                    raise PicoGPTError(why)
                trees = {}
                for key in stored.files:
                    if "/" in key:
                        kind, name = key.split("/", 1)
                        trees.setdefault(kind, {})[name] = stored[key]
        params = nest(trees["params"])
        if "optimizer_step" in about:
            state = {"step": about["optimizer_step"], **nest(trees.get("optimizer", {}))}
        else:  # the form before optimizers were values: AdamW's m/ and v/, and adam_step
            state = {"step": about["adam_step"]}
            if "m" in trees:
                state |= {"m": nest(trees["m"]), "v": nest(trees["v"])}
        best = {"step": about["best_step"], "held_out": about["best_held_out"],
                "params": nest(trees["best"]) if "best" in trees else params}
        return {"step": about["step"], "params": params, "state": state, "best": best,
                "curve": about["curve"]}
    except FileNotFoundError:
        why = _("the run stopped before its first measurement, so there is none")
    except PicoGPTError as e:
        why = str(e)
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile):
        why = _("it is damaged")
    raise PicoGPTError(_("cannot go on from {file}: {reason}. Delete {part} and train again; "
                         "the model kept so far, if any, is in {model}.").format(
        file=path, reason=why, part=part, model=part.with_name(part.name.removesuffix(".part"))))


def mismatch(stored: zipfile.ZipFile, expected: dict, about: dict, steps: int) -> str | None:
    """Why a checkpoint (its zip, its "about") cannot be this run's, or None: read from the
    arrays' headers, so a shape it declares is never allocated."""
    stepped = "optimizer_step" if "optimizer_step" in about else "adam_step"  # new form, old
    if stepped == "adam_step":
        expected = older_form(expected)
    for key in ("step", stepped, "best_step"):
        value = about.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= steps:
            return _("its {key} is {value}, not a step from 0 to the run's {steps}").format(
                key=key, value=repr(value), steps=steps)
    curve = about.get("curve")
    if not (isinstance(curve, dict) and isinstance(curve.get("loss"), list)
            and isinstance(curve.get("measured"), list)
            and isinstance(about.get("best_held_out"), int | float)):
        return _("it is damaged")
    found = {}
    for info in stored.infolist():
        key = info.filename.removesuffix(".npy")
        if key != "about":
            with stored.open(info) as file:
                version = np.lib.format.read_magic(file)
                read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                               (2, 0): np.lib.format.read_array_header_2_0}[version]
                shape, _fortran, dtype = read_header(file)
            found[key] = (tuple(shape), np.dtype(dtype))
    best = {f"best/{key[len('params/'):]}": shape for key, shape in expected.items()
            if key.startswith("params/")}
    optional = best if any(key.startswith("best/") for key in found) else {}
    needed = {key: shape for key, shape in expected.items()
              if about[stepped] or key.startswith("params/")}
    for key, (shape, dtype) in {**needed, **optional}.items():
        if key not in found:
            return _("it lacks {name}").format(name=key)
        if found[key] != (tuple(shape), np.dtype(dtype)):
            return _("its {name} is {found}, where the run's is {shape} {dtype}").format(
                name=key, found=f"{found[key][0]} {found[key][1]}", shape=tuple(shape),
                dtype=np.dtype(dtype))
    extra = sorted(set(found) - set(expected) - set(best))
    return _("it holds {name}, which the run has not").format(name=extra[0]) if extra else None


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
                elif isinstance(value, bytes):
                    (part / name).write_bytes(value)
                else:
                    write_json_atomic(part / name, value)
            write_params(part, flatten(params).items(), source=None)
            # last: a model from here on; as the kind declares its hparams (files/store.py too)
            write_json_atomic(part / "hparams.json", kind_of(hparams).saved(hparams))
        return True
    except (OSError, PicoGPTError):
        (part / "hparams.json").unlink(missing_ok=True)
        return False
