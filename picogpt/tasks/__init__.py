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

import numpy as np

from .. import inside
from .. import train as training
from ..generate import generate
from ..kinds import KINDS
from ..llama import folder as llama_folder
from ..llama import train as llama_training
from ..llama import variant
from ..model import gpt2
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
    model: str = "gpt2"  # the block it trains: "gpt2", or "llama" (picogpt/llama/)
    n_kv_head: int | None = None  # llama: key/value heads (None: llama/train.py's default)
    n_ffn: int | None = None  # llama: SwiGLU's width
    rope_theta: float | None = None  # llama: RoPE's base
    variant: str | None = None  # a training-only block of llama/variant.py (by its name)
    schedule: str = "cosine"  # the learning rate's shape after the warm-up: "cosine" or "wsd"

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
    # params -> the arrays of a Hugging Face model.safetensors, for a model in that layout
    hf_weights: Callable[[dict], dict] | None = None


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


@dataclass(frozen=True)
class Block:
    """The model a run trains, as a task uses it: GPT-2's block (picogpt/train, model.py) or
    LLaMA's (picogpt/llama/train.py), with its hparams bound. The two rows of `block` are the
    training side of the table of model kinds."""

    hparams: dict  # the model's shape, as hparams.json holds it
    init_params: Callable[[np.random.Generator], dict]
    step: Callable[[Any, dict], tuple[float, dict]]  # (batch, params) -> loss, grads
    logits: Callable[[Any, dict], np.ndarray]  # (ids [..., n_seq], params) -> logits
    held_out_loss: Callable[[dict, np.ndarray], float]  # (params, ids) -> nats per token
    trace: Callable[..., tuple]  # (ids [n_seq], params, names=None) -> logits, values
    continuation: Callable[..., str]  # (params, encoder, prompt, n_tokens, top_k, seed)
    # a model written in Hugging Face's layout: its JSON files for a character vocabulary
    # (encoder -> {name: JSON}), and its weights by checkpoint name (params -> arrays)
    hf_files: Callable[[Any], dict] | None = None
    hf_weights: Callable[[dict], dict] | None = None

    def files(self, encoder, own: dict) -> dict:
        """The model folder's vocabulary files: Hugging Face's when the block writes that
        layout (encoder is then a character vocabulary), else the task's own."""
        return self.hf_files(encoder) if self.hf_files else own


def kind_block(row, hparams: dict, n_ctx: int, hf_files=None, hf_weights=None) -> Block:
    """A Block of another kind than GPT-2, through its row of the table of kinds."""
    return Block(
        hparams, lambda rng: row.init(hparams, rng),
        lambda batch, params: row.loss_and_grads(batch, params, hparams),
        lambda ids, params: row.forward(ids, params, hparams),
        lambda params, ids: training.windowed_loss(
            ids, n_ctx, lambda rows: row.forward(rows, params, hparams), hparams["n_vocab"]),
        lambda ids, params, names=None: row.trace(ids, params, hparams, names),
        lambda params, *args: continuation(params, row.runs_with(hparams), *args),
        hf_files, hf_weights)


def block(run: Run, n_vocab: int, line_ends=()) -> Block:
    """The block run trains, for a vocabulary of n_vocab tokens (line_ends: the ids that end a
    line, for the line-end variant)."""
    if run.variant is not None:  # one change at a time (llama/variant.py), for measuring
        return kind_block(KINDS["variant"], variant.variant_hparams(
            run.variant, n_vocab, run.n_ctx, run.n_embd, run.n_head, run.n_layer, line_ends),
            run.n_ctx)
    if run.model == "llama":  # its row of the table of kinds, hparams from the run's flags
        hparams = llama_training.hparams(n_vocab, run.n_ctx, run.n_embd, run.n_head,
                                         run.n_layer, run.n_kv_head, run.n_ffn, run.rope_theta)
        return kind_block(KINDS["llama"], hparams, run.n_ctx,
                          lambda chars: llama_folder.hf_files(hparams, chars.tokens, chars.start,
                                                              chars.unknown),
                          llama_folder.hf_arrays)
    n_head = run.n_head
    hparams = {"n_vocab": n_vocab, "n_ctx": run.n_ctx, "n_embd": run.n_embd, "n_head": n_head,
               "n_layer": run.n_layer}
    return Block(  # each looked up when called, so a test may stand in for any of them
        hparams, lambda rng: training.init_params(hparams, rng), training.gpt2_step(n_head),
        lambda ids, params: gpt2(ids, **params, n_head=n_head),
        lambda params, ids: training.held_out_loss(params, ids, n_head),
        lambda ids, params, names=None: inside.trace(ids, params, n_head, names),
        lambda params, *args: continuation(params, n_head, *args))
