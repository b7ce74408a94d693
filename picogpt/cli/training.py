"""A training run as `python -m picogpt.train` runs it, for a text and for a task alike.

Owns what happens around train.py's loop: at each measurement the held-out loss (beside the
unigram and bigram baselines, when the run has a text), the random-run probes (when the run
trains on them), a short sample, all printed as a line and kept in the curve; the best model by
held-out loss, and the step after which held-out loss rose; a checkpoint (cli/checkpoint.py);
Ctrl-C, which keeps the best model so far under its name and says how to go on; --resume; and
the model folder written at the end, or kept in NAME.part when it cannot be.

A job is a dict the text command (cli/train.py) or a task (cli/tasks.py) makes: name,
models_dir, run (its settings, for run.json), resume, hparams, params, windows, steps, lr,
warmup, curve_every, curve, vocab_dir, files (the vocabulary's), held_out(params) -> {"held_out",
...}, probes(params) -> dict or None, sample(params, step) -> str or None, baselines (or None).
"""

import shutil
import sys
from pathlib import Path

from tqdm import tqdm

from ..curve import best_heads
from ..errors import PicoGPTError, _
from ..train import learn
from .checkpoint import (
    begin,
    keep_in_part,
    part_dir,
    read_checkpoint,
    resume_command,
    save_run_model,
    write_checkpoint,
)


def run_training(job: dict) -> dict:
    """Train job's model to its planned steps, from the start or from its checkpoint, and
    write it; returns {"model_dir", "curve", "best"}."""
    part = part_dir(job["models_dir"], job["name"])
    curve, params, state = job["curve"], job["params"], None
    kept = {"best": None, "checkpoint": None}  # what the measurements found so far
    if job["resume"]:
        saved = read_checkpoint(part)
        if saved is None:
            raise PicoGPTError(_("{part} holds no checkpoint to continue from (the run stopped "
                                 "before its first measurement); delete it and train again."
                                 ).format(part=part))
        params, state, curve = saved["params"], saved["state"], saved["curve"]
        kept.update(best=saved["best"], checkpoint=saved["step"])
        for _step in range(saved["step"]):  # the windows it trained on, drawn again
            next(job["windows"])
    else:
        begin(part, job["run"])

    def measure_at(step: int, params: dict, state: dict) -> dict:
        if curve["measured"] and curve["measured"][-1]["step"] == step:  # before it stopped
            return bar_fields(curve["measured"][-1])
        measured = {"step": step, **job["held_out"](params), **(job["probes"](params) or {})}
        sample = job["sample"](params, step)
        measured |= {"sample": sample} if sample is not None else {}
        curve["measured"].append(measured)
        if kept["best"] is None or measured["held_out"] < kept["best"]["held_out"]:
            kept["best"] = {"step": step, "held_out": measured["held_out"], "params": params}
        curve["best"] = {key: kept["best"][key] for key in ("step", "held_out")}
        write_checkpoint(part, step, params, state, kept["best"], curve)
        kept["checkpoint"] = step
        tqdm.write(measurement_lines(measured, curve, job["baselines"]), file=sys.stderr)
        return bar_fields(measured)

    try:
        learn(params, job["windows"], job["steps"], job["lr"], job["warmup"],
              job["hparams"]["n_head"], curve, job["curve_every"], measure_at, state)
        best = kept["best"]
        curve = {**curve, "run": job["run"]["id"],
                 "rising_after": best["step"] if best["step"] < job["steps"] else None}
    except KeyboardInterrupt:
        stopped(job, part, curve, kept)
    save_or_keep(job, part, best["params"], curve, finished=True)  # Ctrl-C waits for it
    shutil.rmtree(part, ignore_errors=True)
    return {"model_dir": str(Path(job["models_dir"]) / job["name"]), "curve": curve,
            "best": curve["best"]}


def stopped(job: dict, part: Path, curve: dict, kept: dict) -> None:
    """After Ctrl-C: keep the best model so far under its name and raise KeyboardInterrupt with
    the line that says where training stopped and how to go on."""
    reached = len(curve["loss"])
    if kept["checkpoint"] is None:
        shutil.rmtree(part, ignore_errors=True)
        raise KeyboardInterrupt(_("training stopped before its first measurement; nothing was "
                                  "written."))
    command = resume_command(job["name"], job["models_dir"])
    best = kept["best"]
    curve = {**curve, "run": job["run"]["id"], "stopped_at": reached, "resume": command}
    where = save_or_keep(job, part, best["params"], curve, finished=False)
    raise KeyboardInterrupt(_("training stopped at step {reached} of {steps}; {where} Continue "
                              "from step {step} with: {command}").format(
        reached=reached, steps=job["steps"], where=where, step=kept["checkpoint"],
        command=command))


def save_or_keep(job: dict, part: Path, params: dict, curve: dict, finished: bool) -> str:
    """Write the model as models_dir/name; when that fails, keep it in part and say where (a
    PicoGPTError when the run had finished). Returns where the model is, as a sentence."""
    model_dir = Path(job["models_dir"]) / job["name"]
    args = (job["hparams"], params, job["vocab_dir"], job["files"], curve)
    best = curve["best"]
    try:
        save_run_model(model_dir, job["run"]["id"], *args)
        return _("the model of step {step} (held-out loss {loss:.3f} nats per token) is in "
                 "{folder}.").format(step=best["step"], loss=best["held_out"], folder=model_dir)
    except PicoGPTError as e:
        reason = getattr(e.__context__, "strerror", None) or str(e)
        failed = _("cannot write the model to {folder} ({reason});").format(
            folder=model_dir, reason=reason)
    if keep_in_part(part, *args):
        kept = _("the model of step {step} is kept in {part}, a model folder picogpt runs "
                 "(--model_size {part_name} --models_dir {models_dir}); rename it, or free the "
                 "name or the disk and finish with: {command}")
    else:
        kept = _("its parameters are kept in {part}/checkpoint.npz; free some space, then "
                 "finish with: {command}")
    where = f"{failed} " + kept.format(step=best["step"], part=part, part_name=part.name,
                                       models_dir=job["models_dir"],
                                       command=resume_command(job["name"], job["models_dir"]))
    if finished:
        raise PicoGPTError(where)
    return where + "."


def bar_fields(measured: dict) -> dict:
    """What the progress bar shows of a measurement."""
    return {"held_out": f"{measured['held_out']:.3f}"}


def measurement_lines(measured: dict, curve: dict, baselines: dict | None) -> str:
    """A measurement as printed: one line of figures, then the sample (if any) on its own."""
    loss = curve["loss"][-1] if curve["loss"] else None
    parts = [_("step {step}: training loss {loss}").format(
        step=measured["step"], loss="-" if loss is None else f"{loss:.3f}")]
    parts.append(held_out_text(measured, baselines))
    if "second" in measured:  # the run trains on random runs: the probes mean something
        parts.append(_("random-run probes: first copy {first:.2f}, second copy {second:.2f} "
                       "nats per token").format(first=measured["first"],
                                                second=measured["second"]))
        kinds = {"previous": _("previous"), "induction": _("induction")}
        parts.append(_("best heads: {heads}").format(heads=_(", ").join(
            _("{kind} {score:.2f} (layer {layer} head {head})").format(
                kind=kinds[kind], score=score, layer=layer, head=head)
            for kind, (score, layer, head) in best_heads(measured).items())))
    best = curve["best"]
    if best["step"] < measured["step"]:
        parts.append(_("held-out loss has risen since step {step} ({loss:.3f}), whose model is "
                       "kept").format(step=best["step"], loss=best["held_out"]))
    line = _("; ").join(parts)
    return line + ("\n  " + _("sample: {sample}").format(sample=shown(measured["sample"]))
                   if "sample" in measured else "")


def held_out_text(measured: dict, baselines: dict | None) -> str:
    """The held-out loss per token (and per character), beside the baselines when there are."""
    if "held_out_per_char" in measured:
        text = _("held-out {loss:.3f} nats per token ({per_char:.3f} per character)").format(
            loss=measured["held_out"], per_char=measured["held_out_per_char"])
    else:
        text = _("held-out {loss:.3f} nats per token").format(loss=measured["held_out"])
    if baselines:
        text += _(", ") + _("unigram {unigram:.3f}, bigram {bigram:.3f}").format(**baselines)
    return text


def shown(sample: str) -> str:
    """A sample on one line: line breaks shown as ⏎."""
    return sample.replace("\r", "").replace("\n", " ⏎ ")
