"""The text task: a small GPT-2 learns a text, `python -m picogpt.train book.txt --name mine`.

The text is cut into paragraphs by one rule (`paragraphs`), every tenth is held out whole and
never trained on, and each paragraph is opened by the start token, so a model learns how a
paragraph begins and predicts the start token where one ends. The vocabulary is GPT-2's, one
learned from the training paragraphs (--n_vocab, merges.py) or their characters (--vocab chars,
chars.py). Windows come from anywhere in the training ids; with --repeats, a share of them are
random tokens with a run repeated (what an induction head learns from), and the copy probes are
measured. The held-out loss is read beside the unigram and bigram models' (ngram.py).
"""

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..chars import Chars, count_chars, paragraphs
from ..encoder import N_VOCAB, Encoder
from ..errors import PicoGPTError, _, whole_number
from ..merges import N_BYTES, bpe_files, learn_merges
from ..train import batches
from . import Plan, Run, Task, block
from .ngram import bigram_loss, unigram_loss
from .probes import copy_probes, measure_copies

# Measured at every measurement: the held-out paragraphs up to this many tokens (the rest are
# neither trained on nor measured): on GPT-2's vocabulary, about a second of a CPU.
HELD_OUT_TOKENS = 4096
# Where a text of one line is cut into sentences: after an end mark and the spaces that follow


@dataclass(frozen=True)
class Options:
    """The text task's own settings."""

    repeats: float = field(default=0.0, metadata={"help": (
        "the share of windows, from 0 to 1, that are random tokens with a run of them repeated "
        "later instead of text: what an induction head learns from.")})
    n_vocab: int | None = field(default=None, metadata={"help": (
        "learn a vocabulary of this many tokens from the text (byte-level BPE, as GPT-2's: 256 "
        "bytes, the merges, <|endoftext|>) instead of using GPT-2's 50,257. A small model "
        "trains many times faster on a few hundred or thousand tokens.")})
    vocab_dir: str | None = field(default=None, metadata={"help": (
        "folder with GPT-2's encoder.json and vocab.bpe (found by default).")})
    vocab: str | None = field(default=None, metadata={"help": (
        "chars for a character vocabulary: each character the training paragraphs hold twice "
        "or more is a token (line breaks and spaces too), the rest one unknown token; for "
        "Chinese, or a character-level model of a book (docs/poems.md).")})


@dataclass(frozen=True)
class Text:
    """The text task's data: the text, and GPT-2's vocabulary when the run uses it."""

    text: str
    gpt2: Encoder | None = None  # read by the command from vocab_dir, when the run needs it
    vocab_dir: Path | None = None

    @property
    def digest(self) -> str:
        """What a resumed run checks: the text is the one the run began with."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def hold_out(parts: list[str], every: int = 10) -> tuple[list[str], list[str]]:
    """(training, held-out) paragraphs: every tenth one (the 10th, 20th, ...; the last, if there
    are fewer than ten) is held out whole, from all through the text, and never trained on."""
    held = set(range(every - 1, len(parts), every)) or {len(parts) - 1}
    return ([part for i, part in enumerate(parts) if i not in held],
            [part for i, part in enumerate(parts) if i in held])


def paragraph_ids(parts: list[str], encoder) -> np.ndarray:
    """The paragraphs' token ids one after another, each opened by the start token (GPT-2's
    <|endoftext|>), so that a model learns how a paragraph begins from the start token alone, and
    predicts it where a paragraph ends."""
    return np.array([i for part in parts for i in [encoder.start, *encoder.encode(part)]],
                    dtype=np.int64)


def vocabulary(options: Options, trained: list[str], data: Text):
    """The run's encoder, the files that write it into the model folder, and the folder of
    GPT-2's files to copy (or None)."""
    if options.vocab == "chars":  # the characters of the training paragraphs
        encoder = Chars(count_chars("\n\n".join(trained)))
        return encoder, {"chars.json": encoder.tokens}, None
    if options.n_vocab is None:
        return data.gpt2, {}, data.vocab_dir
    merges, _pieces = learn_merges("\n\n".join(trained), options.n_vocab)
    files = bpe_files(merges)
    return Encoder(files["encoder.json"], merges), files, None


def plan(run: Run, data: Text) -> Plan:
    """The text run of run's settings on data's text."""
    parts = paragraphs(data.text)
    if len(parts) < 2:
        raise PicoGPTError(_("{text_file} holds {n} characters, too few to hold a part of it "
                             "out to measure the loss on; give a longer text.").format(
            text_file=run.text, n=len(data.text.strip())))
    trained, held = hold_out(parts)
    encoder, files, vocab_dir = vocabulary(run.options, trained, data)
    lengths = np.cumsum([len(encoder.encode(part)) + 1 for part in held])
    held = held[: max(1, int(np.searchsorted(lengths, HELD_OUT_TOKENS, "right")))]
    train_ids, held_ids = paragraph_ids(trained, encoder), paragraph_ids(held, encoder)
    check_lengths(run.text, len(train_ids), len(held_ids), run.n_ctx)
    n_vocab = encoder.n_vocab
    model = block(run, n_vocab)
    rng = np.random.default_rng(run.seed)
    params = model.init_params(rng)
    windows = batches(train_ids, run.n_batch, run.n_ctx, rng, run.options.repeats, n_vocab)
    per_char = (len(held_ids) - 1) / sum(len(part) for part in held)  # tokens per character
    baselines = {"unigram": round(unigram_loss(train_ids, held_ids, n_vocab), 4),
                 "bigram": round(bigram_loss(train_ids, held_ids, n_vocab), 4)}

    def held_out(params: dict) -> dict:
        loss = model.held_out_loss(params, held_ids)
        return {"held_out": round(loss, 4), "held_out_per_char": round(loss * per_char, 4)}

    groups = copy_probes(run.n_ctx, n_vocab) if run.options.repeats else []
    return Plan(
        hparams=model.hparams, params=params, batches=windows, loss_and_grads=model.step,
        held_out=held_out, files=model.files(encoder, files), hf_weights=model.hf_weights,
        vocab_dir=vocab_dir, baselines=baselines,
        probes=(lambda params: measure_copies(params, run.n_head, groups, model.trace))
        if groups else None,
        sample=lambda params, step: model.continuation(params, encoder, "",
                                                       min(32, run.n_ctx - 1), 40, run.seed + step),
        curve={"held_out_tokens": len(held_ids) - 1, "held_out_paragraphs": len(held)},
        prompt=hint_prompt(held[0]))


def check_lengths(text_file: str, n_train: int, n_held: int, n_ctx: int) -> None:
    """Raise PicoGPTError if the text cannot fill a training window and a held-out one."""
    window = n_ctx + 1
    if n_held < window or n_train < window:
        need = -(-window * (n_train + n_held) // max(1, min(n_held, n_train)))
        raise PicoGPTError(_("{text_file} is too short: its held-out paragraphs (every tenth) "
                             "are {n_held} tokens and the rest {n_train}, and each must fill a "
                             "window of n_ctx + 1 = {window}. Give a text of about {need} tokens "
                             "or more, or lower --n_ctx.").format(
            text_file=text_file, n_held=n_held, n_train=n_train, window=window, need=need))


def check(run: Run) -> None:
    """Raise PicoGPTError for a text setting that cannot train, before the text is read."""
    options = run.options
    if not (isinstance(options.repeats, int | float) and not isinstance(options.repeats, bool)
            and 0 <= options.repeats <= 1):
        raise PicoGPTError(_("repeats={value} is not a share from 0 to 1; 0.5 makes half of the "
                             "windows repeated random tokens.").format(
                                 value=repr(options.repeats)))
    if options.vocab is not None and (options.vocab != "chars" or options.n_vocab is not None
                                      or options.vocab_dir is not None):
        raise PicoGPTError(_("--vocab {vocab!r}: the one vocabulary it names is chars (a "
                             "character vocabulary), which takes neither --n_vocab nor "
                             "--vocab_dir.").format(vocab=options.vocab))
    if options.n_vocab is not None:
        whole_number("n_vocab", options.n_vocab, N_BYTES + 1, hint=_(
            "a vocabulary learned from the text holds the {n_bytes} byte tokens and "
            "<|endoftext|>, then its merges").format(n_bytes=N_BYTES))
        if options.vocab_dir is not None:
            raise PicoGPTError(_("--n_vocab learns a vocabulary from the text and --vocab_dir "
                                 "names GPT-2's; give one of them."))


def hint_prompt(paragraph: str) -> str:
    """A prompt in the model's own language: the start of a paragraph it never trained on."""
    line = paragraph.strip().splitlines()[0].strip()
    words = line.split()
    return " ".join(words[:3]) if len(words) > 1 else line[:5]


def summary(curve: dict, finish: dict) -> list[str]:
    """The end of a text run: the held-out loss beside the baselines, and a rise if it rose."""
    first = curve["measured"][0]
    best = next(m for m in curve["measured"] if m["step"] == curve["best"]["step"])
    lines = [_("held-out text: {before:.3f} -> {after:.3f} nats per token ({per_char:.3f} per "
               "character) at step {step}, the model kept; on the same tokens a unigram model "
               "scores {unigram:.3f} and a bigram model {bigram:.3f}.").format(
        before=first["held_out"], after=best["held_out"], per_char=best["held_out_per_char"],
        step=best["step"], **curve["baselines"])]
    if curve["rising_after"] is not None:
        lines.append(_("held-out loss rose after step {step} (to {last:.3f} at step {end}): the "
                       "model began to learn its training text by heart.").format(
            step=curve["rising_after"], last=curve["measured"][-1]["held_out"],
            end=curve["measured"][-1]["step"]))
    lines.append(_("sample: {sample}").format(
        sample=best.get("sample", "").replace("\n", " ⏎ ")))
    return lines


def defaults(source: str | None) -> dict:
    """The shared settings' defaults for a text: the shape of docs/trained-model.md."""
    return {"n_layer": 2, "n_head": 4, "n_embd": 128, "n_ctx": 128, "n_batch": 16,
            "steps": 600, "lr": 3e-3, "warmup": None, "seed": 0, "curve_every": 50}


def vocab_size(run: Run) -> int:
    """GPT-2's 50,257 tokens, the learned vocabulary's --n_vocab, or 0: characters are counted
    once the text is read."""
    if run.options.vocab == "chars":
        return 0
    return N_VOCAB if run.options.n_vocab is None else run.options.n_vocab


TASK = Task(name="text", about="a small GPT-2 of a text's paragraphs", reads="text",
            options=Options, defaults=defaults, plan=plan, check=check, vocab_size=vocab_size,
            summary=summary, model_name="trained")
