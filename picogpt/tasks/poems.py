"""The poems task: a character-level GPT-2 of classical Chinese verse (docs/poems.md).

    python -m picogpt.train --task poems --name shi
    picogpt "床前明月光，" --model_size shi --top_k 8

It holds what the model meets of the poems: which poems are regular verse (句 of five or seven
characters), the held-out verses (whole poems, never trained on), the ids a model trains on (a
start token before each poem), windows that begin where a line begins, the share of a
continuation's 句 that keep a prompt's length, the sample, the task's settings and their
defaults, and the closing verdict against the goals and reference runs of the corpus it read.
Reading the poems from disk is picogpt/files/poems.py's; the character vocabulary is chars.py's.
"""

import re
from dataclasses import dataclass, field

import numpy as np

from ..chars import Chars, count_chars
from ..errors import PicoGPTError, _, whole_number
from ..train import batches, gpt2_step, held_out_loss, init_params
from . import Plan, Run, Task, continuation
from .ngram import bigram_loss, unigram_loss

PUNCTUATION = "，。？！；："  # what ends a 句 in classical verse
# Goals and reference runs, by the corpus a run read: how far under the bigram model the
# held-out loss must be (nats per character) and the share of 句 that must keep the prompt's
# length; and the range docs/poems.md reports for the default recipe (seeds 0, 1, 2)
GOALS = {"fortunes": {"under_bigram": 0.1, "line_share": 0.5,
                      "reference": {"under_bigram": (0.119, 0.156), "line_share": (0.88, 0.92)}}}


@dataclass(frozen=True)
class Options:
    """The poems task's own settings."""

    verse_share: float = field(default=0.5, metadata={"help": (
        "the share of each batch's windows drawn from regular verse (five or seven characters a "
        "句), each beginning where a line begins, as a prompt does; the rest from anywhere in "
        "all the poems and sayings.")})
    n_held_out: int = field(default=200, metadata={"help": (
        "verses set aside, never trained on, to measure the loss and the form.")})
    collection: str | None = field(default=None, metadata={"help": (
        "which of chinese-poetry's collections --text's folder is read for: tangshi (the "
        "default), songshi, songci, shijing ... (their Chinese names too).")})
    traditional: bool = field(default=False, metadata={"help": (
        "keep chinese-poetry's traditional characters (by default OpenCC makes them "
        "simplified, as learners type them).")})


def half_lines(text: str) -> list[str]:
    """The 句 of a text: the runs of characters each punctuation mark ends."""
    return re.findall(f"([^{PUNCTUATION}\n]+)[{PUNCTUATION}]", text)


def is_verse(poem: str, min_halves: int = 4) -> bool:
    """Whether a poem is regular verse: at least min_halves 句, every one five characters
    long, or every one seven."""
    halves = half_lines(poem)
    return {len(half) for half in halves} in ({5}, {7}) and len(halves) >= min_halves


def split_poems(poems: list[str], n_held_out: int, seed: int = 41) -> tuple[list, list]:
    """Training poems and n_held_out verses drawn from the poems at random (the same draw for
    every run's --seed, so baselines and runs compare), at most half of them; paragraphs when
    there is no verse. Never a window of the training text."""
    verses = [i for i, poem in enumerate(poems) if is_verse(poem)]
    if len(verses) < 2:  # a text with no verse (prose, English): hold out whole paragraphs
        verses = list(range(len(poems)))
    held = set(np.random.default_rng(seed).choice(verses, min(n_held_out, len(verses) // 2),
                                                  replace=False).tolist())
    return ([poem for i, poem in enumerate(poems) if i not in held],
            [poem for i, poem in enumerate(poems) if i in held])


def poem_ids(poems: list[str], encoder) -> np.ndarray:
    """The ids a model trains on: each poem after the start token, ending with a line break."""
    ids = []
    for poem in poems:
        ids += [encoder.start, *encoder.encode(poem + "\n")]
    return np.array(ids, dtype=np.int64)


def line_starts(ids: np.ndarray, encoder) -> np.ndarray:
    """Where lines begin in ids (poem_ids'): each start token, and each line break that a line
    follows (not a poem's last, which the next start token follows). A window that begins there
    puts a line's first character at position 1, as a prompt after the start token has it."""
    newline = [i for i in encoder.encode("\n") if i != encoder.unknown]
    before_line = np.isin(ids, newline)
    before_line[:-1] &= ids[1:] != encoder.start
    before_line[-1:] = False  # the text's last token: no line follows it
    return np.flatnonzero((ids == encoder.start) | before_line)


def mixed(verse, rest, n_verse: int, n_batch: int):
    """Batches of n_batch windows: n_verse from verse's batches, the rest from rest's."""
    for (v_in, v_out), (r_in, r_out) in zip(verse, rest):
        yield (np.concatenate([v_in[:n_verse], r_in])[:n_batch],
               np.concatenate([v_out[:n_verse], r_out])[:n_batch])


def kept_length(prompt: str, continuation: str) -> tuple[int, int]:
    """How many whole 句 of continuation have the length of prompt's last one, and how many
    whole 句 it has (a 句 ends at a punctuation mark)."""
    halves = half_lines(prompt)
    wanted = len(halves[-1]) if halves else len(prompt)
    lengths = [len(half.strip()) for half in half_lines(continuation)]
    return sum(n == wanted for n in lengths), len(lengths)


def first_halves(verses: list[str]) -> list[str]:
    """Each verse's first 句 with its punctuation mark: the prompts of line_share."""
    return [re.match(f"[^{PUNCTUATION}]*[{PUNCTUATION}]?", verse)[0] for verse in verses]


def line_share(params: dict, n_head: int, encoder, prompts: list[str], n_tokens: int = 24,
               top_k: int = 8, seed: int = 0) -> tuple[float, list[str]]:
    """The share of whole 句, over a continuation of each prompt (top-k sampling, no
    constraint), that keep the prompt's 句 length; and the continuations."""
    texts = [continuation(params, n_head, encoder, prompt, n_tokens, top_k, seed + i)
             for i, prompt in enumerate(prompts)]
    counts = np.array([kept_length(prompt, text) for prompt, text in zip(prompts, texts)])
    return float(counts[:, 0].sum() / max(1, counts[:, 1].sum())), texts


@dataclass(frozen=True)
class Poems:
    """The poems task's data: the poems, and the corpus they came from ("fortunes",
    "chinese-poetry" or "text"), which chooses the goals a run is judged by."""

    poems: list[str]
    source: str
    digest: str = ""
    note: str = ""  # what was read, said before training


def plan(run: Run, data: Poems) -> Plan:
    """The poems run of run's settings on data's poems."""
    trained, held = split_poems(data.poems, run.options.n_held_out)
    encoder = Chars(count_chars("".join(trained)))
    all_ids, held_ids = poem_ids(trained, encoder), poem_ids(held, encoder)
    verse_ids = poem_ids([poem for poem in trained if is_verse(poem, 2)], encoder)
    n_ctx, n_head, n_batch = run.n_ctx, run.n_head, run.n_batch
    if min(len(all_ids), len(held_ids)) < n_ctx + 1:
        raise PicoGPTError(_("the poems are {n} characters; training on windows of {m} needs "
                             "at least {need}. Give a longer text.").format(
                                 n=len(all_ids), m=n_ctx + 1, need=2 * (n_ctx + 1)))
    hparams = {"n_vocab": encoder.n_vocab, "n_ctx": n_ctx, "n_embd": run.n_embd,
               "n_head": n_head, "n_layer": run.n_layer}
    rng = np.random.default_rng(run.seed)
    params = init_params(hparams, rng)
    n_verse = round(n_batch * run.options.verse_share) if len(verse_ids) > n_ctx + 1 else 0
    verse = verse_ids if n_verse else all_ids  # its windows begin where a line begins
    windows = mixed(batches(verse, max(1, n_verse), n_ctx, rng,
                            starts=line_starts(verse, encoder)),
                    batches(all_ids, n_batch - n_verse, n_ctx, rng), n_verse, n_batch)
    baselines = {"unigram": round(unigram_loss(all_ids, held_ids, encoder.n_vocab), 4),
                 "bigram": round(bigram_loss(all_ids, held_ids, encoder.n_vocab), 4)}
    prompts = [prompt[-(n_ctx // 2) :] for prompt in first_halves(held[:48])]  # they fit

    def finish(params: dict) -> dict:
        share, texts = line_share(params, n_head, encoder, prompts,
                                  min(24, n_ctx - n_ctx // 2 - 1), seed=run.seed)
        return {"line_share": round(share, 4), "source": data.source,
                "samples": [p + t for p, t in zip(prompts[:8], texts)]}

    return Plan(
        hparams=hparams, params=params, batches=windows, loss_and_grads=gpt2_step(n_head),
        held_out=lambda params: {"held_out": round(held_out_loss(params, held_ids, n_head), 4)},
        files={"chars.json": encoder.tokens}, baselines=baselines,
        sample=lambda params, step: continuation(params, n_head, encoder, "",
                                                 min(32, n_ctx - 1), 8, run.seed + step),
        curve={"held_out_tokens": len(held_ids) - 1, "held_out_poems": len(held)},
        finish=finish, prompt=prompts[0], sampler={"top_k": 8})


def check(run: Run) -> None:
    """Raise PicoGPTError for the first of the task's settings that cannot train."""
    whole_number("n_ctx", run.n_ctx, 8, hint=_("a 句 and what follows it must fit"))
    share = run.options.verse_share
    if not (isinstance(share, int | float) and not isinstance(share, bool) and 0 <= share <= 1):
        raise PicoGPTError(_("verse_share={value!r} is not a share from 0 to 1; 0.5 draws half "
                             "of each batch's windows from regular verse.").format(value=share))
    whole_number("n_held_out", run.options.n_held_out, 1)


def summary(curve: dict, finish: dict) -> list[str]:
    """The end of a poems run: the held-out loss beside the baselines and the kept length, each
    against the goals and the reference runs of the corpus it read."""
    best, base = curve["best"], curve["baselines"]
    lines = [_("held-out verses: {held:.3f} nats per character (the model of step {step}); "
               "unigram {unigram:.3f}, bigram {bigram:.3f}.").format(
        held=best["held_out"], step=best["step"], **base)]
    goals = GOALS.get(finish["source"])
    share = finish["line_share"]
    if goals is None:  # a text of one's own: no goals to judge it by
        lines.append(_("句 that keep the prompt's length: {share:.0%}.").format(share=share))
        return lines
    under = base["bigram"] - best["held_out"]
    ref = goals["reference"]
    lines.append(_("{under:.3f} under the bigram (goal {goal}) {mark}; the reference runs: "
                   "{low:.3f} to {high:.3f}.").format(
        under=under, goal=f"≥ {goals['under_bigram']}",
        mark="✓" if under >= goals["under_bigram"] else "✗", low=ref["under_bigram"][0],
        high=ref["under_bigram"][1]))
    lines.append(_("句 that keep the prompt's length: {share:.0%} (goal {goal}) {mark}; the "
                   "reference runs: {low:.0%} to {high:.0%}.").format(
        share=share, goal=f"≥ {goals['line_share']:.0%}",
        mark="✓" if share >= goals["line_share"] else "✗", low=ref["line_share"][0],
        high=ref["line_share"][1]))
    return lines


def defaults(source: str | None) -> dict:
    """The shared settings' defaults: the recipe docs/poems.md measured on fortunes-zh."""
    return {"n_layer": 4, "n_head": 4, "n_embd": 128, "n_ctx": 64, "n_batch": 16,
            "steps": 1200, "lr": 3e-3, "warmup": None, "seed": 0, "curve_every": 300}


TASK = Task(name="poems", about="a character-level GPT-2 of classical Chinese verse",
            reads="poems", options=Options, defaults=defaults, plan=plan, check=check,
            vocab_size=lambda run: 0, summary=summary, model_name="shi")
