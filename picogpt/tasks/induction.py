"""The induction task: the windows, the vocabulary and the probes that grow an induction head.

    python -m picogpt.train --task induction --name ind
    picogpt "t5 t17 t3 t5" --model_size ind --explain page.html

The task's windows (`periodic_windows`), its vocabulary (`vocab_files`: t0 .. t62 and [CLS], a
WordPiece vocab.txt), its held-out windows, the copy probes it is measured on (probes.py), its
settings and their defaults, and `ablate`, which zeroes a head to see what it did. The learning
is train.py's; the command is picogpt/cli/train.py's. docs/induction.md explains each setting.

A window is the start token, then a block of p random tokens (p uniform in block_min ..
block_max), tiled to fill it: from the second copy on, each next token is the one that followed
the same token a period earlier, and the period changes from window to window, so no fixed
distance finds it. From step lead_in_from on, half the windows also get 0 .. lead_in_max random
tokens between the start token and the block, so that the copy no longer starts at a fixed place
either.
"""

from dataclasses import dataclass, field

import numpy as np

from ..backward import cross_entropy
from ..errors import PicoGPTError, _, whole_number
from ..llama.folder import hf_config
from . import Plan, Run, Task, block
from .probes import COPY_LENGTHS, copy_probes, measure_copies

HELD_OUT, HELD_OUT_SEED = 64, 2027  # windows held out, and the seed that makes them


@dataclass(frozen=True)
class Options:
    """The induction task's own settings: its vocabulary and how its windows are made."""

    n_vocab: int = field(default=64, metadata={"help": (
        "tokens in the vocabulary: t0 .. t{n_vocab - 2}, then the start token [CLS].")})
    block_min: int = field(default=4, metadata={"help": "the shortest block of random tokens "
                                                        "a window repeats."})
    block_max: int = field(default=32, metadata={"help": (
        "the longest block (its tokens are distinct: at most n_vocab - 1).")})
    lead_in_from: int = field(default=600, metadata={"help": (
        "the step from which half the windows have random tokens before the block.")})
    lead_in_max: int = field(default=24, metadata={"help": (
        "the most random tokens before the block (0 .. lead_in_max, uniform).")})


def vocab_files(n_vocab: int) -> dict[str, object]:
    """The task's vocabulary as a WordPiece folder's files: t0 .. t{n_vocab - 2}, then [CLS],
    the start token, last (as <|endoftext|> is GPT-2's); no [SEP], no [UNK]."""
    tokens = [f"t{i}" for i in range(n_vocab - 1)] + ["[CLS]"]
    return {"vocab.txt": "".join(f"{token}\n" for token in tokens),
            "tokenizer_config.json": {"do_lower_case": False, "cls_token": "[CLS]",
                                      "tokenize_chinese_chars": False},
            "special_tokens_map.json": {"cls_token": "[CLS]"}}


def periodic_windows(n_batch: int, n_seq: int, n_vocab: int, rng: np.random.Generator,
                     block: tuple[int, int] = (4, 32), lead_in: int = 0) -> np.ndarray:
    """[n_batch, n_seq] ids: the start token (n_vocab - 1), then, if lead_in, 0 .. lead_in random
    tokens in half the rows, then a block of p distinct random tokens (p uniform in block[0] ..
    block[1]) repeated to the end."""
    start = n_vocab - 1
    low, high = block
    p = rng.integers(low, high + 1, (n_batch, 1))  # [n_batch, 1] each row's period
    blocks = np.argsort(rng.random((n_batch, start)), axis=-1)[:, :high]  # distinct, never start
    lead = rng.integers(0, lead_in + 1, (n_batch, 1)) * (rng.random((n_batch, 1)) < 0.5)
    noise = rng.integers(0, start, (n_batch, n_seq))  # the lead-in's tokens
    j = np.arange(n_seq)[None, :]  # [1, n_seq]
    tiled = np.take_along_axis(blocks, np.maximum(j - 1 - lead, 0) % p, axis=-1)
    return np.where(j == 0, start, np.where(j <= lead, noise, tiled))


def task_batches(n_batch: int, n_seq: int, n_vocab: int, rng: np.random.Generator,
                 block: tuple[int, int], lead_in_from: int, lead_in: int):
    """Endless (inputs, targets) pairs of [n_batch, n_seq] windows, one pair a step; from step
    lead_in_from on, windows with lead-in tokens."""
    step = 0
    while True:
        window = periodic_windows(n_batch, n_seq + 1, n_vocab, rng, block,
                                  lead_in if step >= lead_in_from else 0)
        yield window[:, :-1], window[:, 1:]
        step += 1


def plan(run: Run, data: None) -> Plan:
    """The induction run of run's settings: its windows, held-out windows and probes."""
    o = run.options
    model = block(run, o.n_vocab)
    rng = np.random.default_rng(run.seed)
    params = model.init_params(rng)
    periods = (o.block_min, o.block_max)
    windows = task_batches(run.n_batch, run.n_ctx, o.n_vocab, rng, periods, o.lead_in_from,
                           o.lead_in_max)
    groups = copy_probes(run.n_ctx, o.n_vocab)
    # held out: windows as the task makes them at the end (with lead-in), from a seed of their own
    held = periodic_windows(HELD_OUT, run.n_ctx + 1, o.n_vocab,
                            np.random.default_rng(HELD_OUT_SEED), periods, o.lead_in_max)

    def held_out(params: dict) -> dict:
        logits = model.logits(held[:, :-1], params)  # [HELD_OUT, n_ctx, n_vocab]
        return {"held_out": round(cross_entropy(logits, held[:, 1:])[0], 4)}

    tokens = [f"t{5 * i % (o.n_vocab - 1)}" for i in range(1, 5)]
    return Plan(hparams=model.hparams, params=params, batches=windows,
                loss_and_grads=model.step, held_out=held_out,
                files=vocab_files(o.n_vocab) | ({"config.json": hf_config(
                    model.hparams, o.n_vocab - 1)} if model.hf_weights else {}),
                hf_weights=model.hf_weights,
                probes=lambda params: measure_copies(params, run.n_head, groups, model.trace),
                prompt=" ".join(tokens + tokens[:2]))


def check(run: Run) -> None:
    """Raise PicoGPTError for the first of the task's settings that cannot train."""
    o, n_ctx = run.options, run.n_ctx
    whole_number("n_vocab", o.n_vocab, 7, hint=_("t0 .. t5 and [CLS] at least, for the probes"))
    if run.text is not None:
        raise PicoGPTError(_("--task induction makes its own windows and reads no text; drop "
                             "{file}.").format(file=repr(run.text)))
    if n_ctx < 1 + 2 * COPY_LENGTHS[0]:
        raise PicoGPTError(_("n_ctx={n_ctx} is too short for the held-out probes: the shortest "
                             "run ({run} tokens) and its copy after the start token need "
                             "{need}; give --n_ctx {need} or more.").format(
                                 n_ctx=n_ctx, run=COPY_LENGTHS[0], need=1 + 2 * COPY_LENGTHS[0]))
    low = whole_number("block_min", o.block_min, 1, hint=_("the shortest block"))
    whole_number("block_max", o.block_max, low, min(o.n_vocab - 1, n_ctx - 1),
                 hint=_("its tokens are distinct, so at most n_vocab - 1 = {most}, and it must "
                        "fit in n_ctx - 1 = {fit}; and from block_min up").format(
                            most=o.n_vocab - 1, fit=n_ctx - 1))
    whole_number("lead_in_from", o.lead_in_from, 0, hint=_("a step; 0 is from the start"))
    whole_number("lead_in_max", o.lead_in_max, 0, n_ctx - 2,
                 hint=_("random tokens before the block; 0 is none"))


def summary(curve: dict, finish: dict) -> list[str]:
    """The end of an induction run: the held-out windows' loss and the probes."""
    best = next(m for m in curve["measured"] if m["step"] == curve["best"]["step"])
    return [_("held-out task windows: {before:.3f} -> {after:.3f} nats per token at step "
              "{step}, the model kept; random-run probes: first copy {first:.2f}, second copy "
              "{second:.2f} nats per token.").format(
        before=curve["measured"][0]["held_out"], after=best["held_out"], step=best["step"],
        first=best["first"], second=best["second"])]


def defaults(source: str | None) -> dict:
    """The shared settings' defaults: the recipe of docs/induction.md."""
    return {"n_layer": 2, "n_head": 2, "n_embd": 64, "n_ctx": 64, "n_batch": 32, "steps": 1600,
            "lr": 3e-3, "warmup": 300, "seed": 0, "curve_every": 25}


def ablate(params: dict, layer: int, head: int, n_head: int) -> dict:
    """params with one head silenced: its rows of c_proj, what it writes into the residual
    stream, zeroed, so that every other head and block runs as before. params is not changed."""
    d_head = params["wte"].shape[1] // n_head
    w = params["blocks"][layer]["attn"]["c_proj"]["w"].copy()  # [n_embd, n_embd]
    w[head * d_head : (head + 1) * d_head] = 0  # merged heads: head h is rows h*d .. h*d + d
    blocks = list(params["blocks"])
    attn = blocks[layer]["attn"]
    blocks[layer] = {**blocks[layer], "attn": {**attn, "c_proj": {**attn["c_proj"], "w": w}}}
    return {**params, "blocks": blocks}


TASK = Task(name="induction", about="grow an induction head on random runs that come again; no "
                                     "text", reads=None, options=Options, defaults=defaults,
            plan=plan, check=check, vocab_size=lambda run: run.options.n_vocab,
            summary=summary, model_name="induction")
