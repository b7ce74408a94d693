"""`python -m picogpt.train [TEXT] [--task NAME] [flags]`: train a small model with one of the
tasks (picogpt/tasks/) and write a model folder every picogpt mode runs.

`TASKS` is the one table of tasks: each entry is a task of the book and the reader of the data
it learns from. The command reads its flags once (the shared ones and every task's own), builds
one `Run` from them and the task's defaults, checks it before any work, reads the data, has the
task make its `Plan`, and hands both to cli/training.py, which trains and writes the folder. Then
it says what was written, in the task's words. `--resume --name NAME` continues a stopped run
with the settings it began with (run.json, cli/checkpoint.py).
"""

import hashlib
import inspect
import shlex
import sys
import textwrap
import uuid
from dataclasses import MISSING, fields, replace
from pathlib import Path

from ..errors import PicoGPTError, _, number, reason, whole_number
from ..files.chinese_poetry import find_collection, simplifier
from ..files.openai import read_encoder
from ..files.poems import read_poems, read_text
from ..files.store import write_json_atomic
from ..optim import GROUPS, OPTIMIZERS
from ..tasks import SHARED, Run, Task, couplet, induction, poems, text
from .checkpoint import RUN_FORMAT, check_free, part_dir, read_run, training_lock
from .command import run_command, said
from .prepare import check_memory, check_name, check_run, find_vocab, new_model_dir
from .training import run_training

PROGRAM = "python -m picogpt.train"
# the block's and the schedule's, Run's last fields
BLOCK_FLAGS = ("model", "n_kv_head", "n_ffn", "rope_theta", "variant", "schedule")


def read_text_data(run: Run) -> text.Text:
    """The text task's data: the text, and GPT-2's vocabulary when the run uses it."""
    options = run.options
    if options.vocab == "chars" or options.n_vocab is not None:
        return text.Text(read_text(run.text))
    vocab_dir = find_vocab(options.vocab_dir, run.models_dir)
    return text.Text(read_text(run.text), read_encoder(vocab_dir), vocab_dir)


def read_poems_data(run: Run) -> poems.Poems:
    """The poems of the poems and couplet tasks: fortunes-zh's, a collection of a chinese-poetry
    folder's, or a text's."""
    found, source, note = read_poems(run.text, run.options.collection, run.options.traditional)
    digest = hashlib.sha256("\n\n".join(found).encode()).hexdigest()
    return poems.Poems(found, source, digest, note)


# The one table of tasks: name -> (the task, the reader of its data, or None: it makes its own)
TASKS: dict[str, tuple[Task, object]] = {
    "text": (text.TASK, read_text_data),
    "induction": (induction.TASK, None),
    "poems": (poems.TASK, read_poems_data),
    "couplet": (couplet.TASK, read_poems_data),
}

# The flags every task takes, in --help's order, with what they mean
SHARED_FLAGS = {
    "text": (str | None, "what to learn from: a UTF-8 text (the text task: paragraphs separated "
                         "by blank lines, every tenth held out to measure the loss), or for "
                         "--task poems and couplet chinese-poetry's folder or a text of one "
                         "poem a paragraph (fortunes-zh when none; --task induction reads "
                         "none)."),
    "task": (str | None, "what to learn: text (the default), induction, poems or couplet; each "
                         "has its own flags and defaults, below."),
    "name": (str | None, "the new model folder's name; run it with picogpt \"...\" --model_size "
                         "NAME. A folder that exists is never overwritten."),
    "models_dir": (str | None, "where the folder goes, as picogpt's --models_dir (models)."),
    "resume": (bool, "continue the stopped run of --name (its folder NAME.part) with the "
                     "settings it began with; no other flag but --models_dir."),
    "model": (str | None, "the block to train: gpt2 (the default), or llama (RMSNorm, rotary "
                          "positions, SwiGLU, shared key/value heads: picogpt/llama/), whose "
                          "folder is a Hugging Face model transformers loads as it is; for "
                          "--task text, poems and induction, with a character vocabulary."),
    "n_layer": (int | None, "number of transformer blocks."),
    "n_head": (int | None, "attention heads per block; n_embd must be a multiple of it."),
    "n_embd": (int | None, "width of the residual stream."),
    "n_ctx": (int | None, "the longest context, and the length of the training windows."),
    "n_kv_head": (int | None, "--model llama: key/value heads, each shared by n_head / n_kv_head "
                              "query heads (default: half of n_head when it is even)."),
    "n_ffn": (int | None, "--model llama: the SwiGLU MLP's width (default: 8/3 n_embd, up to a "
                          "multiple of 32)."),
    "rope_theta": (float | None, "--model llama: the base of the rotary positions' angles "
                                 "(default 10000)."),
    "variant": (str | None, "train a training-only block of picogpt/llama/variant.py, one "
                            "change between GPT-2's block and LLaMA's at a time, for measuring "
                            "(docs/why-llama.md): rope, rmsnorm, swiglu, gqa (each alone on "
                            "GPT-2's block), relu2, qk-norm, zero-proj, untied, line-end (on "
                            "LLaMA's; line-end: --task poems), gpt2 or llama (the blocks "
                            "themselves)."),
    "n_batch": (int | None, "windows per step."),
    "steps": (int | None, "optimiser steps."),
    "lr": (float | None, "peak learning rate, reached after the warm-up; then a cosine down to "
                         "lr/10."),
    "schedule": (str | None, "the learning rate after the warm-up: cosine (the default, down to "
                             "lr/10), or wsd (warmup-stable-decay: lr until the last fifth, "
                             "then a straight line down to lr/10)."),
    "warmup": (int | None, "steps of the linear rise to lr (by default a tenth of --steps, or "
                           "the task's own)."),
    "seed": (int | None, "makes the initial weights and the batches, and so the run, "
                         "repeatable."),
    "curve_every": (int | None, "every this many steps, measure the held-out loss, keep a "
                                "checkpoint and print a sample; the curve is saved with the "
                                "model as curve.json."),
    "optimizer": (str | None, "how gradients become steps: adamw (the default), or muon (the "
                              "hidden matrices made orthogonal, AdamW for the rest; --model "
                              "llama or --variant); its settings below are recorded in "
                              "run.json."),
    "weight_decay": (float | None, "how hard each step pulls the decayed weights towards 0, "
                                   "apart from the gradient (0.1)."),
    "decay": (object, "the parameter groups weight decay pulls, comma-separated, from matrices, "
                      "embeddings, gains and biases (matrices,embeddings: every table and "
                      "matrix, never a gain or a bias)."),
    "beta1": (float | None, "how slowly the running mean of each gradient moves (0.9)."),
    "beta2": (float | None, "how slowly the running mean of each squared gradient moves "
                            "(0.95)."),
    "eps": (float | None, "added to the root mean square before dividing by it (1e-8)."),
    "clip": (float | None, "the largest norm of all the gradients together: a step whose "
                           "gradients pass it is scaled down to it (none by default)."),
    "threads": (int | None, "threads for the matrix products and the element-wise work; by "
                            "default OPENBLAS_NUM_THREADS when set, else the fastest count of "
                            "a step timed at start (1 is steadiest on a busy machine). Also "
                            "with --resume."),
}
OPTIMIZER_FLAGS = ("optimizer", "weight_decay", "decay", "beta1", "beta2", "eps", "clip")


def own_flags(task: Task) -> dict[str, object]:
    """A task's own flags: its Options' fields."""
    return {f.name: f for f in fields(task.options)}


def signature() -> inspect.Signature:
    """The command's flags, the shared ones and every task's own, each None until given."""
    flags = {name: kind for name, (kind, _help) in SHARED_FLAGS.items()}
    for task, _reader in TASKS.values():
        for name, f in own_flags(task).items():
            flags.setdefault(name, f.type if f.type in (str | None, bool) else object)
    return inspect.Signature([
        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD if name == "text"
                          else inspect.Parameter.KEYWORD_ONLY, default=None, annotation=kind)
        for name, kind in flags.items()])


def train(text: str | None = None, **given) -> dict:
    """The command, called with the flags the command line gave."""
    given |= {} if text is None else {"text": text}
    threads = given.pop("threads", None)  # the process's, not the run's: not in run.json
    if threads is not None:
        whole_number("threads", threads, 1, hint=_("1 is steadiest on a busy machine"))
    if given.pop("resume", None):
        return resume(**given, threads=threads)
    run, task = build_run(given)
    check_free(run.models_dir, run.name)
    record = {"format": RUN_FORMAT, "id": uuid.uuid4().hex, "run": run.settings()}
    return train_run(run, task, record, resuming=False, threads=threads)


train.__signature__ = signature()


def build_run(given: dict) -> tuple[Run, Task]:
    """The Run the flags describe: the task's defaults for its data, the flags given over
    them, every setting checked before any work."""
    name = given.pop("task", None)
    if name is None and given.get("text") is None:
        raise PicoGPTError(_("{program} needs a text to learn from ({program} book.txt), or a "
                             "task that makes its own data: --task {tasks}; see {program} "
                             "--help.").format(program=PROGRAM, tasks=" | ".join(
            other for other, (task, _r) in TASKS.items() if task.reads != "text")))
    name = "text" if name is None else name
    if name not in TASKS:
        raise PicoGPTError(_("task={task!r} is not a task picogpt knows; the tasks are {tasks}."
                             ).format(task=name, tasks=", ".join(TASKS)))
    task, _reader = TASKS[name]
    own = own_flags(task)
    for flag in given:
        if flag not in SHARED_FLAGS and flag not in own:
            owners = [other for other, (t, _r) in TASKS.items() if flag in own_flags(t)]
            raise PicoGPTError(_("--{flag} is a flag of --task {owner}, not of --task {task}; "
                                 "see {program} --help.").format(
                flag=flag, owner=" / ".join(owners), task=name, program=PROGRAM))
    source = data_source(task, given.get("text"))
    defaults = task.defaults(source)
    shared = {key: defaults[key] for key in SHARED} | {key: given[key] for key in SHARED
                                                      if key in given}
    block = {key: given[key] for key in BLOCK_FLAGS if key in given}
    if shared["warmup"] is None:
        shared["warmup"] = max(1, shared["steps"] // 10) if isinstance(shared["steps"], int) else 1
    options = task.options(**{key: defaults[key] for key in own if key in defaults}
                           | {key: given[key] for key in own if key in given})
    text_path = given.get("text")
    run = Run(task=name, name=given.get("name", task.model_name),
              models_dir=given.get("models_dir", "models"),
              text=None if text_path is None else str(Path(text_path).absolute()), **shared,
              options=options, optimizer=optimizer_of(given), **block)
    check_settings(run, task, source)
    new_model_dir(run.models_dir, run.name)
    return run, task


def check_settings(run: Run, task: Task, source: str | None) -> None:
    """Raise PicoGPTError for the first setting of run that cannot train, the task's own and
    the memory its shape needs included: the same checks for a new run's flags and for a
    stopped run's run.json, before any data is read or weights made."""
    check_run(run)
    task.check(run)
    check_memory(run.n_layer, run.n_head, run.n_embd, run.n_ctx, run.n_batch,
                 task.vocab_size(run))  # once more when the data has told the vocabulary
    if source == "chinese-poetry":  # the collection is there, and so is OpenCC when needed
        find_collection(run.text, run.options.collection)
        if not run.options.traditional:
            simplifier()


def optimizer_of(given: dict):
    """The optimizer the flags describe, its defaults under the flags given, every setting
    checked."""
    name = given.get("optimizer", "adamw")
    if name not in OPTIMIZERS:
        raise PicoGPTError(_("optimizer={name!r} is not an optimizer picogpt knows; the "
                             "optimizers are {names}.").format(name=name,
                                                               names=", ".join(OPTIMIZERS)))
    default = OPTIMIZERS[name]()
    betas = (given.get("beta1", default.betas[0]), given.get("beta2", default.betas[1]))
    for flag, beta in zip(("beta1", "beta2"), betas):
        if not (isinstance(beta, int | float) and not isinstance(beta, bool) and 0 <= beta < 1):
            raise PicoGPTError(_("{name}={value} must be a number from 0 up to, but not "
                                 "including, 1.").format(name=flag, value=repr(beta)))
    weight_decay = given.get("weight_decay", default.weight_decay)
    if weight_decay != 0:
        number("weight_decay", weight_decay, 0, hint=_("0 decays nothing"))
    decay = given.get("decay", ",".join(default.decay))
    if isinstance(decay, tuple | list):  # fire reads matrices,embeddings as a tuple
        decay = ",".join(str(part) for part in decay)
    groups = tuple(part.strip() for part in decay.split(",") if part.strip()) \
        if isinstance(decay, str) else None
    if groups is None or not set(groups) <= set(GROUPS):
        raise PicoGPTError(_("decay={value} is not a list of parameter groups; give some of "
                             "{groups}, comma-separated.").format(value=repr(decay),
                                                                  groups=", ".join(GROUPS)))
    clip = given.get("clip")
    if clip is not None:
        number("clip", clip, 0, hint=_("the largest gradient norm; leave it out to not clip"))
    return replace(default, betas=tuple(float(b) for b in betas),
                   eps=number("eps", given.get("eps", default.eps), 0),
                   weight_decay=float(weight_decay), decay=groups,
                   clip=None if clip is None else float(clip))


def data_source(task: Task, given_text: str | None) -> str | None:
    """Where the task's data comes from, which may choose its defaults: None (it makes its
    own), "text", "fortunes" (the poems task without a text) or "chinese-poetry" (a folder)."""
    if task.reads is None:
        if given_text is not None:
            raise PicoGPTError(_("--task {task} makes its own data and reads no text; drop "
                                 "{file}.").format(task=task.name, file=repr(given_text)))
        return None
    if task.reads == "poems":
        if given_text is None:
            return "fortunes"
        return "chinese-poetry" if Path(given_text).is_dir() else "text"
    return "text"


def train_run(run: Run, task: Task, record: dict, resuming: bool,
              threads: int | None = None) -> dict:
    """Read run's data, have its task plan it, and train (on threads, or the count
    cli/threads.py chooses); the run and what it wrote."""
    reader = TASKS[run.task][1]
    data = reader(run) if reader else None
    if getattr(data, "note", ""):
        print(said(data.note), file=sys.stderr)
    digest = getattr(data, "digest", None)
    if resuming and record.get("digest") not in (None, digest):
        if run.text is None:  # the poems of the fortunes-zh package picogpt ships with
            raise PicoGPTError(_("fortunes-zh's poems changed since the run began (another "
                                 "version of picogpt or fortunes-zh?), and a resumed run must "
                                 "read the same poems; go back to that version, or train anew "
                                 "under another --name."))
        raise PicoGPTError(_("{text_file} changed since the run began, and a resumed run must "
                             "read the same text; put it back, or train anew under another "
                             "--name.").format(text_file=run.text))
    plan = task.plan(run, data)
    check_memory(run.n_layer, run.n_head, run.n_embd, run.n_ctx, run.n_batch,
                 plan.hparams["n_vocab"])
    record = {**record, "digest": digest}
    result = run_training(run, plan, record, resuming, threads)
    return {**result, "run": run, "task": task, "prompt": plan.prompt, "sampler": plan.sampler}


def resume(name: str | None = None, models_dir: str = "models", threads: int | None = None,
           **others) -> dict:
    """Continue the stopped run in models_dir/name.part with the settings it began with: the
    flags name the folder, whatever its run.json says, and run.json's settings pass the checks
    a new run's flags pass."""
    if others:
        raise PicoGPTError(_("--resume goes on with the settings the run began with; drop "
                             "--{flag}.").format(flag=next(iter(others))))
    if name is None:
        raise PicoGPTError(_("--resume needs --name, the stopped run's model name."))
    check_name(name)
    part = part_dir(models_dir, name)
    run, record = read_run(part, {key: task for key, (task, _r) in TASKS.items()})
    lock = training_lock(part)  # noqa: F841 (held while this process trains)
    task = TASKS[run.task][0]
    try:
        check_settings(run, task, data_source(task, run.text))
    except (PicoGPTError, TypeError, ValueError, AttributeError) as e:  # a value, or its type
        raise PicoGPTError(_("{file} holds a setting that cannot train ({reason}); delete "
                             "{part} and train again.").format(
            file=part / "run.json", reason=str(e).rstrip(".") if isinstance(e, PicoGPTError)
            else reason(e), part=part)) from None
    run = moved_here(run, record, part, name, models_dir)
    return train_run(run, task, {**record, "run": run.settings()}, resuming=True,
                     threads=threads)


def moved_here(run: Run, record: dict, part: Path, name: str, models_dir: str) -> Run:
    """run as the flags place it (models_dir/name.part); when run.json names another place (a
    folder moved, renamed or copied), one line says so and run.json is rewritten to match."""
    if run.name == name and same_folder(run.models_dir, models_dir):
        return run
    print(said(_("{file} names the run {old} in {old_dir}; it goes on as {name} in "
                 "{models_dir}, as --name and --models_dir say, and {file} now says so.").format(
        file=part / "run.json", old=repr(run.name), old_dir=run.models_dir, name=repr(name),
        models_dir=models_dir)), file=sys.stderr)
    run = replace(run, name=name, models_dir=models_dir)
    write_json_atomic(part / "run.json", {"format": RUN_FORMAT, "id": record["id"],
                                          "run": run.settings(), "digest": record["digest"]})
    return run


def same_folder(recorded, given: str) -> bool:
    """Whether the models_dir run.json recorded names the folder given (from here)."""
    try:
        return Path(recorded).resolve() == Path(given).resolve()
    except (TypeError, ValueError, OSError):
        return False


def quoted(prompt: str) -> str:
    """prompt as a shell reads it, in double quotes where they are enough."""
    return shlex.quote(prompt) if set(prompt) & set('"$`\\!') else f'"{prompt}"'


def say_written(result: dict) -> None:
    """The end of a run: the task's closing lines, then the model and a command to try."""
    model_dir, task = Path(result["model_dir"]), result["task"]
    for line in task.summary(result["curve"], result["finish"]):
        print(said(line), file=sys.stderr)
    sampler = " ".join(f"--{key} {value}" for key, value in result["sampler"].items())
    print(said(_("wrote {folder}. Try: picogpt {prompt} --model_size {name} --models_dir "
                 "{models_dir}").format(folder=model_dir, prompt=quoted(result["prompt"]),
                                        name=model_dir.name, models_dir=model_dir.parent)
               + (f" {sampler}" if sampler else "")), file=sys.stderr)


def help_page() -> str:
    """--help: the shared flags once, then each task's own, with its defaults."""
    lines = ["NAME", f"    {PROGRAM} - train a small model in NumPy and write a folder every "
             "picogpt mode runs", "", "SYNOPSIS",
             f"    {PROGRAM} [TEXT] [--task TASK] <flags>",
             f"    {PROGRAM} --resume --name NAME [--models_dir DIR]", "",
             "FLAGS (every task)"]
    wrapped = textwrap.TextWrapper(width=96, initial_indent=" " * 8, subsequent_indent=" " * 8,
                                   break_on_hyphens=False)
    for name, (_kind, said_) in SHARED_FLAGS.items():
        lines += [f"    --{name}={name.upper()}", wrapped.fill(said_)]
    for name, (task, _reader) in TASKS.items():
        defaults = {key: value for key, value in task.defaults(None).items() if value is not None}
        lines += ["", f"TASK {name}: {task.about}", textwrap.fill(
            "defaults: " + ", ".join(f"--{k} {v}" for k, v in defaults.items())
            + f", --name {task.model_name}", width=96, initial_indent=" " * 4,
            subsequent_indent=" " * 4, break_on_hyphens=False)]
        for flag, f in own_flags(task).items():
            default = None if f.default is MISSING else f.default
            lines += [f"    --{flag}={flag.upper()} (default {default})",
                      wrapped.fill(f.metadata.get("help", ""))]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    """Entry point of `python -m picogpt.train`."""
    argv = sys.argv[1:] if argv is None else argv
    result = run_command(train, argv, PROGRAM, "text", help_page=help_page,
                         stopped=_("training stopped before it began; nothing was written."))
    if isinstance(result, dict):
        say_written(result)


if __name__ == "__main__":
    main()
