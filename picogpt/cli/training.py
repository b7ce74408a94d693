"""One training run as `python -m picogpt.train` runs it, whatever its task.

Owns what happens around train.py's loop: at each measurement the task's held-out loss (beside
the baselines, when the task has them), its probes, a short sample, all printed as a line and
kept in the curve; the best model by held-out loss, and the step after which held-out loss rose;
a checkpoint (cli/checkpoint.py) at every measurement and where Ctrl-C stops the run; Ctrl-C,
which keeps the best model so far under its name and says how to go on; a loss that runs away,
which ends the run with the best model and one line; --resume; and the model folder written at
the end, or kept in NAME.part when it cannot be. The run's settings are a `Run`, what its task
made of them a `Plan` (picogpt/tasks/).
"""

import math
import shutil
import sys
from pathlib import Path

from threadpoolctl import threadpool_limits
from tqdm import tqdm

from ..errors import PicoGPTError, _, reason
from ..files.safetensors_header import safetensors_bytes
from ..kinds import kind_of
from ..tasks import Plan, Run
from ..tasks.probes import best_heads
from ..train import Diverged, Stopped, learn
from .checkpoint import (
    begin,
    expected_checkpoint,
    keep_in_part,
    part_dir,
    read_checkpoint,
    resume_command,
    save_run_model,
    training_lock,
    uninterrupted,
    write_checkpoint,
)
from .command import said
from .threads import chosen_threads


def run_training(run: Run, plan: Plan, record: dict, resuming: bool,
                 threads: int | None = None) -> dict:
    """Train plan's model to run's planned steps, from the start or from its checkpoint, on
    threads (None: the count cli/threads.py chooses), and write it; record is run.json's (the
    run's id and settings). Returns {"model_dir", "curve", "best", "finish"}."""
    part = part_dir(run.models_dir, run.name)
    curve = {"settings": run.flat() | plan.hparams, **plan.curve,
             **({"baselines": plan.baselines} if plan.baselines else {}), "loss": [],
             "measured": []}
    params, state = plan.params, None
    kept = {"best": None}  # the best measurement so far, with its params
    if resuming:
        saved = read_checkpoint(part, expected_checkpoint(plan, run.optimizer), run.steps)
        params, state, curve = saved["params"], saved["state"], saved["curve"]
        kept["best"] = saved["best"]
        for _step in range(saved["step"]):  # the batches it trained on, drawn again
            next(plan.batches)
    plan, count, line = chosen_threads(threads, plan)  # before begin: Ctrl-C leaves nothing
    print(said(line), file=sys.stderr)
    if not resuming:
        begin(part, record)
        lock = training_lock(part)  # noqa: F841 (held while this process trains)

    def measure_at(step: int, params: dict, state: dict) -> dict:
        if curve["measured"] and curve["measured"][-1]["step"] == step:  # before it stopped
            return bar_fields(curve["measured"][-1])
        measured = {"step": step, **plan.held_out(params)}
        if not math.isfinite(measured["held_out"]):  # the weights are no longer numbers
            raise Diverged(step, measured["held_out"], measured["held_out"])
        measured |= plan.probes(params) if plan.probes else {}
        measured |= {"sample": plan.sample(params, step)} if plan.sample else {}
        with uninterrupted():  # the curve, the best model and the checkpoint agree
            curve["measured"].append(measured)
            if kept["best"] is None or measured["held_out"] < kept["best"]["held_out"]:
                kept["best"] = {"step": step, "held_out": measured["held_out"], "params": params}
            curve["best"] = {key: kept["best"][key] for key in ("step", "held_out")}
            write_checkpoint(part, step, params, state, kept["best"], curve)
        tqdm.write(measurement_lines(measured, curve, plan.baselines, plan.figures),
                   file=sys.stderr)
        return bar_fields(measured)

    with threadpool_limits(count, user_api="blas"):  # fasttrain's pool follows it
        try:
            try:
                learn(params, plan.batches, run.steps, run.lr, run.warmup, plan.loss_and_grads,
                      curve, run.curve_every, measure_at, state, run.optimizer,
                      kind_of(plan.hparams).param_groups(plan.params), run.schedule)
            except Stopped as stop:
                stopped(run, plan, part, curve, kept, record, stop)
            except Diverged as diverged:
                ran_away(run, plan, part, curve, kept, record, diverged)
        except KeyboardInterrupt as stop:  # one no line has explained: a second, while keeping
            if stop.args:
                raise
            raise KeyboardInterrupt(left_behind(run, part)) from None
        best = kept["best"]
        curve = {**curve, "run": record["id"],
                 "rising_after": best["step"] if best["step"] < run.steps else None}
        finish = plan.finish(best["params"]) if plan.finish else {}
        save_or_keep(run, plan, part, best["params"], curve | {"finish": finish}, record,
                     finished=True)  # Ctrl-C waits for it
        shutil.rmtree(part, ignore_errors=True)
    return {"model_dir": str(Path(run.models_dir) / run.name), "curve": curve,
            "best": curve["best"], "finish": finish}


def stopped(run: Run, plan: Plan, part: Path, curve: dict, kept: dict, record: dict,
            stop: Stopped) -> None:
    """After Ctrl-C: keep where training stopped (params and optimizer state) for --resume and the
    best model so far under its name, and raise KeyboardInterrupt with the line that says so."""
    if kept["best"] is None:
        shutil.rmtree(part, ignore_errors=True)
        raise KeyboardInterrupt(_("training stopped before its first measurement; nothing was "
                                  "written."))
    with uninterrupted(stop_after=False):
        write_checkpoint(part, stop.step, stop.params, stop.state, kept["best"], curve)
    command = resume_command(run.name, run.models_dir)
    curve = {**curve, "run": record["id"], "stopped_at": stop.step, "resume": command}
    where = save_or_keep(run, plan, part, kept["best"]["params"], curve, record, finished=False)
    raise KeyboardInterrupt(_("training stopped at step {reached} of {steps}; {where} Continue "
                              "from step {step} with: {command}").format(
        reached=stop.step, steps=run.steps, where=where, step=stop.step, command=command))


def left_behind(run: Run, part: Path) -> str:
    """What a Ctrl-C that came outside the loop's own handling (a second one while the stop
    was being kept) left, as a sentence: part's last checkpoint and how to go on, or nothing."""
    command = resume_command(run.name, run.models_dir)
    if (part / "checkpoint.npz").is_file():
        return _("training stopped; {part} keeps its last checkpoint. Continue with: "
                 "{command}").format(part=part, command=command)
    shutil.rmtree(part, ignore_errors=True)
    return _("training stopped before its first measurement; nothing was written.")


def ran_away(run: Run, plan: Plan, part: Path, curve: dict, kept: dict, record: dict,
             diverged: Diverged) -> None:
    """After a loss that ran away: the best model so far under its name (if a measurement came
    before), the folder in progress gone, and one line that says to lower --lr."""
    said = _("training diverged at step {step}: its loss was {loss} (the first step's: "
             "{first:.3f}); the learning rate --lr {lr} is too high for this model. Train again "
             "with a lower --lr, as {lower};").format(
        step=diverged.step, loss=f"{diverged.loss:.3f}" if math.isfinite(diverged.loss)
        else str(diverged.loss), first=diverged.first, lr=run.lr, lower=f"{run.lr / 3:.2g}")
    if kept["best"] is None:
        shutil.rmtree(part, ignore_errors=True)
        raise PicoGPTError(said + " " + _("nothing was written."))
    curve = {**curve, "run": record["id"], "diverged_at": diverged.step}
    where = save_or_keep(run, plan, part, kept["best"]["params"], curve, record, finished=True)
    shutil.rmtree(part, ignore_errors=True)
    raise PicoGPTError(said + " " + where)


def save_or_keep(run: Run, plan: Plan, part: Path, params: dict, curve: dict, record: dict,
                 finished: bool) -> str:
    """Write the model as models_dir/name; when that fails, keep it in part and say where (a
    PicoGPTError when the run had finished). Returns where the model is, as a sentence."""
    model_dir = Path(run.models_dir) / run.name
    files = {**plan.files, **({"sampler.json": plan.sampler} if plan.sampler else {})}
    if plan.hf_weights:  # a model in Hugging Face's layout: its weights as model.safetensors
        files["model.safetensors"] = safetensors_bytes(plan.hf_weights(params))
    args = (plan.hparams, params, plan.vocab_dir, files, curve)
    best = curve["best"]
    try:
        save_run_model(model_dir, record["id"], *args)
        return _("the model of step {step} (held-out loss {loss:.3f} nats per token) is in "
                 "{folder}.").format(step=best["step"], loss=best["held_out"], folder=model_dir)
    except PicoGPTError as e:
        failed = _("cannot write the model to {folder} ({reason});").format(
            folder=model_dir, reason=reason(e.__context__ or e))
    if keep_in_part(part, *args):
        kept = _("the model of step {step} is kept in {part}, a model folder picogpt runs "
                 "(--model_size {part_name} --models_dir {models_dir}); rename it, or free the "
                 "name or the disk and finish with: {command}")
    else:
        kept = _("its parameters are kept in {part}/checkpoint.npz; free some space, then "
                 "finish with: {command}")
    where = f"{failed} " + kept.format(step=best["step"], part=part, part_name=part.name,
                                       models_dir=run.models_dir,
                                       command=resume_command(run.name, run.models_dir))
    if finished:
        raise PicoGPTError(where)
    return where + "."


def bar_fields(measured: dict) -> dict:
    """What the progress bar shows of a measurement: the held-out loss and its step."""
    return {_("held-out at step {step}").format(step=measured["step"]):
            f"{measured['held_out']:.3f}"}


def measurement_lines(measured: dict, curve: dict, baselines: dict | None,
                      figures=None) -> str:
    """A measurement as printed: one line of figures, then the sample (if any) on its own."""
    loss = curve["loss"][-1] if curve["loss"] else None
    parts = [_("step {step}: training loss {loss}").format(
        step=measured["step"], loss="-" if loss is None else f"{loss:.3f}")]
    parts.append(held_out_text(measured, None if figures else baselines)
                 + (_(", ") + figures(measured) if figures else ""))
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
