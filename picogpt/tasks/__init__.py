"""The training tasks: what `python -m picogpt.train` can teach a model, one module each.

    text       a text's paragraphs, in GPT-2's vocabulary, a learned one or characters (text.py)
    induction  random runs that come again: an induction head grows (induction.py)
    poems      classical Chinese verse, a character a token (poems.py)

A task says in its own module everything a model meets of it: its own settings (`Options`, a
dataclass whose fields are its flags), the shared settings' defaults, which data it reads, and
`plan`, which turns a run's settings and that data into a `Plan`: the vocabulary, the shape and
first weights, the batches, the step's loss and gradients, the held-out measurement, the probes,
a sample, and what the run says when it ends. train.py's loop learns from a plan. The command
(picogpt/cli/train.py) holds the one table of tasks, reads their data, and writes the model.

`Run` is one run's settings, built once (from the flags, or from a stopped run's run.json).
Nothing here reads a file, prints or parses a command line.
"""

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ..generate import generate
from ..optim import AdamW

# The settings every task shares, as a Run holds them after the task's own (`options`)
SHARED = ("n_layer", "n_head", "n_embd", "n_ctx", "n_batch", "steps", "lr", "warmup", "seed",
          "curve_every")


@dataclass(frozen=True)
class Run:
    """One training run's settings: where the model goes, what it learns from, the shape and
    schedule every task shares, and the task's own settings (its Options)."""

    task: str
    name: str
    models_dir: str
    text: str | None  # the text or folder it learns from; None when the task makes its data
    n_layer: int
    n_head: int
    n_embd: int
    n_ctx: int
    n_batch: int
    steps: int
    lr: float
    warmup: int
    seed: int
    curve_every: int
    options: Any  # the task's Options
    optimizer: Any = field(default_factory=AdamW)  # an optimizer of optim.py, with its settings

    def settings(self) -> dict:
        """The run as run.json keeps it: every setting, the task's own inside "options", the
        optimizer's inside "optimizer"."""
        return {**{f.name: getattr(self, f.name) for f in fields(self)
                   if f.name not in ("options", "optimizer")},
                "options": asdict(self.options), "optimizer": self.optimizer.settings()}

    def flat(self) -> dict:
        """The run as curve.json keeps it: every setting side by side, the task's own too, and
        the optimizer's settings under "optimizer"."""
        return {**{f.name: getattr(self, f.name) for f in fields(self)
                   if f.name not in ("options", "optimizer")},
                **asdict(self.options), "optimizer": self.optimizer.settings()}


@dataclass
class Plan:
    """What a task makes of a run and its data: everything the loop, the measurements and the
    model folder need. Functions take the params they are to measure."""

    hparams: dict  # the model's shape, as hparams.json holds it
    params: dict  # the first weights
    batches: Iterator  # endless batches, one a step, the same for the same seed
    loss_and_grads: Callable[[Any, dict], tuple[float, dict]]  # (batch, params) -> loss, grads
    held_out: Callable[[dict], dict]  # params -> {"held_out": nats per token, ...}
    files: dict  # the vocabulary's files, written into the model folder
    vocab_dir: Any = None  # a folder whose GPT-2 encoder.json and vocab.bpe it copies
    baselines: dict | None = None  # {"unigram", "bigram", ...} on the same held-out tokens
    probes: Callable[[dict], dict] | None = None  # params -> more figures (head scores ...)
    sample: Callable[[dict, int], str] | None = None  # (params, step) -> a short text
    # a measurement's figures beside its held-out loss, when not the unigram and bigram models'
    figures: Callable[[dict], str] | None = None
    curve: dict = field(default_factory=dict)  # what curve.json records about the data
    finish: Callable[[dict], dict] | None = None  # the kept params -> closing figures
    prompt: str = ""  # a prompt to try the model with, in its own language
    sampler: dict = field(default_factory=dict)  # the sampler it writes best with: {"top_k": 8}


@dataclass(frozen=True)
class Task:
    """A training task: its name, the data it reads, its own settings and their defaults, and
    plan(run, data) -> Plan. `reads` is None (it makes its data), "text" (a text file) or
    "poems" (poems: fortunes-zh, a chinese-poetry folder or a text of one poem a paragraph).
    `defaults(source)` gives the shared settings' defaults for the data's source: None, "text",
    "fortunes" or "chinese-poetry". `check(run)` raises PicoGPTError for a setting of its own
    that cannot train, before any data is read; `summary(curve, finish)` gives the closing lines
    (in the user's language)."""

    name: str
    about: str
    reads: str | None
    options: type
    defaults: Callable[[str | None], dict]
    plan: Callable[[Run, Any], Plan]
    check: Callable[[Run], None]
    vocab_size: Callable[[Run], int]  # the tokens a run's vocabulary holds, 0 if its data tells
    summary: Callable[[dict, dict], list[str]]
    model_name: str  # the --name a run takes when none is given


def continuation(params: dict, n_head: int, encoder, prompt: str, n_tokens: int, top_k: int,
                 seed: int) -> str:
    """The text a model writes after prompt (after the start token, as a paragraph or poem
    began in training), top-k sampled, up to n_tokens or the end token: a measurement's sample."""
    ids = generate(encoder.prompt_ids(prompt), params, n_head, n_tokens,
                   top_k=min(top_k, encoder.n_vocab), seed=seed, encoder=encoder)
    return encoder.decode(list(ids))
