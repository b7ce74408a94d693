"""The poems task: a character-level model of classical Chinese verse (docs/poems.md; GPT-2's
block, or the LLaMA block with --model llama, docs/why-llama.md).

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

from .. import verse
from ..chars import Chars, count_chars
from ..errors import PicoGPTError, _, whole_number
from ..inside import last_break_score, previous_line_score, rhyme_score
from ..train import batches
from ..verse import PUNCTUATION
from . import Plan, Run, Task, block
from .ngram import bigram_loss, unigram_loss

# Goals and reference runs, by the corpus a run read: how far under the bigram model the
# held-out loss must be (nats per character) and the share of 句 that must keep the prompt's
# length; and the range docs/poems.md reports for the default recipe (seeds 0, 1, 2)
GOALS = {"fortunes": {"under_bigram": 0.1, "line_share": 0.5,
                      "reference": {"under_bigram": (0.119, 0.156), "line_share": (0.88, 0.92)}},
         "chinese-poetry": {"under_bigram": 0.5, "line_share": 0.9, "rhyme": 0.5,
                            "reference": {"under_bigram": (0.726, 0.726),
                                          "line_share": (1.0, 1.0), "rhyme": (0.10, 0.10)}}}
# "Is my loss normal?": docs/poems.md's table, a row a corpus, with its default recipe's run
# (seed 0): the corpus's characters and distinct ones, the baselines and the model's held-out
# loss (nats per character), the minutes it took, and the shares of its closing measurement
ROWS = {"fortunes-zh": {"characters": 205008, "distinct": 5653, "unigram": 6.495,
                        "bigram": 5.760, "held_out": 5.634, "minutes": 2, "rhyme": 0.0,
                        "line_share": 0.89},
        "chinese-poetry": {"characters": 3843628, "distinct": 9169, "unigram": 6.407,
                           "bigram": 5.238, "held_out": 4.512, "minutes": 10, "rhyme": 0.10,
                           "line_share": 0.99}}


@dataclass(frozen=True)
class Corpus:
    """Which poems a task reads from a chinese-poetry folder (the poems and couplet tasks)."""

    collection: str | None = field(default=None, metadata={"help": (
        "which of chinese-poetry's collections --text's folder is read for: tangshi (the "
        "default), songshi, songci, shijing ... (their Chinese names too).")})
    traditional: bool = field(default=False, metadata={"help": (
        "keep chinese-poetry's traditional characters (by default OpenCC makes them "
        "simplified, as learners type them).")})


@dataclass(frozen=True)
class Options(Corpus):
    """The poems task's own settings, after the corpus's."""

    verse_share: float = field(default=0.5, metadata={"help": (
        "the share of each batch's windows drawn from regular verse (five or seven characters a "
        "句), each beginning where a line begins, as a prompt does; the rest from anywhere in "
        "all the poems and sayings.")})
    n_held_out: int = field(default=200, metadata={"help": (
        "verses set aside, never trained on, to measure the loss and the form.")})
    judge_each: bool = field(default=False, metadata={"help": (
        "judge the rhyme at every measurement too, not only at the end (a few seconds each): "
        "the curve then says when the model began to rhyme.")})


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


def is_regulated(poem: str) -> bool:
    """Whether a poem is regulated verse (律诗): eight 句 of one length, five or seven."""
    return len(half_lines(poem)) == 8 and is_verse(poem)


def sentences(poem: str) -> list[str]:
    """The 句 of a poem, each with the mark that ends it."""
    return re.findall(f"[^{PUNCTUATION}\n]+[{PUNCTUATION}]", poem)


def form_shares(params: dict, write, encoder, poems: list[list[str]], top_k: int = 8,
                seed: int = 0) -> dict:  # poems: each regulated poem's sentences
    """How the model writes a regulated poem's second 联 after its first (top-k sampling, no
    constraint), beside the held-out poems' own second 联 and a shuffled one (the next poem's of
    the same length: chance): the share of second 下句 that rhyme with the first (verse.py's
    十三辙), and of even places whose 平仄 oppose in the second 联; with the model's 联. write
    is the model's continuation (a tasks.Block's)."""
    lengths = [len(said[0]) - 1 for said in poems]
    written = [half_lines(write(params, encoder, said[0] + said[1], 2 * n + 3, top_k,
                                seed + i))[:2]
               for i, (said, n) in enumerate(zip(poems, lengths))]
    firsts = [said[1][-2] for said in poems]  # each first 下句's last character
    real = [(said[2][:-1], said[3][:-1]) for said in poems]  # the second 联
    model = [(first, *pair) for first, pair in zip(firsts, written) if len(pair) == 2]
    chance = [(first, up, down) for first, (up, _d), (_u, down)
              in zip(firsts, real, verse.shuffled(real, lengths))]
    shares = {}
    for name, rows in (("model", model), ("held_out", [(f, *pair) for f, pair in
                                                       zip(firsts, real)]),
                       ("shuffled", chance)):
        rhyme, judged = verse.rhyme_share([(first, down[-1]) for first, _up, down in rows])
        tones = verse.tone_shares([(up, down) for _first, up, down in rows])
        shares[name] = {"rhyme": rhyme, "judged": judged, "opposition": tones["opposition"]}
    return {**shares, "poems": len(poems),
            "written": ["".join(said[:2]) + "／" + "，".join(pair) for said, pair in
                        zip(poems[:8], written)]}


def first_halves(verses: list[str]) -> list[str]:
    """Each verse's first 句 with its punctuation mark: the prompts of line_share."""
    return [re.match(f"[^{PUNCTUATION}]*[{PUNCTUATION}]?", verse)[0] for verse in verses]


def kept_share(prompts: list[str], texts: list[str]) -> float:
    """The share of whole 句, over the texts that follow the prompts, that keep the length of
    their prompt's last 句."""
    counts = np.array([kept_length(prompt, text) for prompt, text in zip(prompts, texts)])
    return float(counts[:, 0].sum() / max(1, counts[:, 1].sum()))


def line_share(params: dict, write, encoder, prompts: list[str], n_tokens: int = 24,
               top_k: int = 8, seed: int = 0) -> tuple[float, list[str]]:
    """The share of whole 句, over a continuation of each prompt (top-k sampling, no
    constraint), that keep the prompt's 句 length; and the continuations. write is the model's
    continuation (a tasks.Block's)."""
    texts = [write(params, encoder, prompt, n_tokens, top_k, seed + i)
             for i, prompt in enumerate(prompts)]
    return kept_share(prompts, texts), texts


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
    n_ctx, n_batch = run.n_ctx, run.n_batch
    if min(len(all_ids), len(held_ids)) < n_ctx + 1:
        raise PicoGPTError(_("the poems are {n} characters; training on windows of {m} needs "
                             "at least {need}. Give a longer text.").format(
                                 n=len(all_ids), m=n_ctx + 1, need=2 * (n_ctx + 1)))
    model = block(run, encoder.n_vocab, line_ends=sorted(
        {encoder.start, *encoder.encode(PUNCTUATION + "\n")} - {encoder.unknown}))
    rng = np.random.default_rng(run.seed)
    params = model.init_params(rng)
    n_verse = round(n_batch * run.options.verse_share) if len(verse_ids) > n_ctx + 1 else 0
    aligned = verse_ids if n_verse else all_ids  # its windows begin where a line begins
    windows = mixed(batches(aligned, max(1, n_verse), n_ctx, rng,
                            starts=line_starts(aligned, encoder)),
                    batches(all_ids, n_batch - n_verse, n_ctx, rng), n_verse, n_batch)
    baselines = {"unigram": round(unigram_loss(all_ids, held_ids, encoder.n_vocab), 4),
                 "bigram": round(bigram_loss(all_ids, held_ids, encoder.n_vocab), 4)}
    firsts = first_halves(held[:48])
    prompts = [prompt[-(n_ctx // 2) :] for prompt in firsts]  # they fit
    rests = [poem[len(first) :] for poem, first in zip(held, firsts)]  # what followed them
    kept = {"held_out": round(kept_share(firsts, rests), 4),
            "shuffled": round(kept_share(firsts, verse.shuffled(rests, [0] * len(rests))), 4)}
    regulated = [poem for poem in held if is_regulated(poem)]  # the held-out 律诗
    rhymed = [sentences(poem) for poem in regulated]
    fits = [said for said in rhymed if 4 * len(said[0]) + 2 <= n_ctx]  # with the second 联
    probes, figures = heads(regulated, encoder, model.hparams, baselines, model.trace)
    if run.options.judge_each and probes and fits and verse.available():
        probes = judged_too(probes, lambda params: form_shares(
            params, model.continuation, encoder, fits, seed=run.seed)["model"])

    def finish(params: dict) -> dict:
        share, texts = line_share(params, model.continuation, encoder, prompts,
                                  min(24, n_ctx - n_ctx // 2 - 1), seed=run.seed)
        form = {"skipped": "pypinyin"} if not verse.available() else \
            form_shares(params, model.continuation, encoder, fits, seed=run.seed) if fits else \
            {"skipped": "n_ctx"}
        return {"line_share": round(share, 4), "kept": kept, "form": form,
                "source": data.source, "samples": [p + t for p, t in zip(prompts[:8], texts)]}

    return Plan(
        hparams=model.hparams, params=params, batches=windows, loss_and_grads=model.step,
        held_out=lambda params: {"held_out": round(model.held_out_loss(params, held_ids), 4)},
        files=model.files(encoder, {"chars.json": encoder.tokens}), hf_weights=model.hf_weights,
        baselines=baselines, probes=probes,
        figures=figures,
        sample=lambda params, step: model.continuation(params, encoder, "", min(32, n_ctx - 1),
                                                       8, run.seed + step),
        curve={"held_out_tokens": len(held_ids) - 1, "held_out_poems": len(held),
               "regulated_poems": len(rhymed), "characters": sum(map(len, data.poems)),
               "distinct": len(set("".join(data.poems)) - {"\n"})},
        finish=finish, prompt=prompts[0], sampler={"top_k": 8})


HEADS = ("last_break", "previous_line", "rhyme_head")  # the probes' keys in the curve


def judged_too(probes, judge):
    """The probes, and the rhyme share of the model's continuations (judge(params): form_shares'
    "model" figures) beside them, as "rhyme" and "judged"."""
    def both(params: dict) -> dict:
        shares = judge(params)
        return probes(params) | {"rhyme": shares["rhyme"], "judged": shares["judged"]}
    return both


def heads(regulated: list[str], encoder, hparams: dict, baselines: dict, trace):
    """The probes of a poems run (each head's last-break, previous-line and rhyme score,
    [n_layer][n_head], inside.py's, averaged over up to 32 held-out 律诗 as far as n_ctx holds
    them, each read as training reads a poem: its start token, its line breaks) and the
    figures a measurement prints with them; (None, None) when no 律诗 has two 下句 within
    n_ctx. trace(ids, params, names) is the model's forward with its attention patterns."""
    breaks = [i for i in encoder.encode(PUNCTUATION + "\n") if i != encoder.unknown]
    ends = [i for i in encoder.encode("。？！") if i != encoder.unknown]
    n_ctx = hparams["n_ctx"]
    texts = [poem_ids([poem], encoder)[:n_ctx] for poem in regulated[:32]]  # as trained
    texts = [ids for ids in texts if np.isin(ids[1:], ends).sum() >= 2]
    if not texts:
        return None, None
    names = {f"blocks.{i}.attn.pattern" for i in range(hparams["n_layer"])}

    def probes(params: dict) -> dict:
        scores = {kind: [] for kind in HEADS}
        for ids in texts:
            _logits, values = trace(ids, params, names)
            scores["last_break"].append(last_break_score(values, ids, breaks))
            scores["previous_line"].append(previous_line_score(values, ids, breaks))
            scores["rhyme_head"].append(rhyme_score(values, ids, ends))
        return {kind: np.mean(s, axis=0).round(4).tolist() for kind, s in scores.items()}

    def figures(measured: dict) -> str:
        best, said = [], (_("last break"), _("句 above"), _("rhyme"))
        for kind, name in zip(HEADS, said):
            scores = np.asarray(measured[kind])
            layer, head = np.unravel_index(np.argmax(scores), scores.shape)
            best.append(_("{kind} {score:.2f} (layer {layer} head {head})").format(
                kind=name, score=scores[layer, head], layer=layer, head=head))
        return _("unigram {unigram:.3f}, bigram {bigram:.3f}").format(**baselines) + _(
            "; ") + _("best heads: {heads}").format(heads=_(", ").join(best))

    return probes, figures


def check(run: Run) -> None:
    """Raise PicoGPTError for the first of the task's settings that cannot train."""
    whole_number("n_ctx", run.n_ctx, 8, hint=_("a 句 and what follows it must fit"))
    share = run.options.verse_share
    if not (isinstance(share, int | float) and not isinstance(share, bool) and 0 <= share <= 1):
        raise PicoGPTError(_("verse_share={value!r} is not a share from 0 to 1; 0.5 draws half "
                             "of each batch's windows from regular verse.").format(value=share))
    whole_number("n_held_out", run.options.n_held_out, 1)
    if not isinstance(run.options.judge_each, bool):
        raise PicoGPTError(_("judge_each={value!r} is not true or false.").format(
            value=run.options.judge_each))


def summary(curve: dict, finish: dict) -> list[str]:
    """The end of a poems run: the held-out loss beside the baselines, then the kept length,
    the rhyme and the 平仄 (the model's, the held-out poems' and chance's), each against the
    goals and the reference runs of the corpus it read, and the docs' row it is near."""
    best, base = curve["best"], curve["baselines"]
    lines = [_("held-out verses: {held:.3f} nats per character (the model of step {step}); "
               "unigram {unigram:.3f}, bigram {bigram:.3f}.").format(
        held=best["held_out"], step=best["step"], **base)]
    goals = GOALS.get(finish["source"], {})
    under, share, form = base["bigram"] - best["held_out"], finish["line_share"], finish["form"]
    if "under_bigram" in goals:
        low, high = goals["reference"]["under_bigram"]
        said = _("{under:.3f} under the bigram (goal {goal}) {mark}; the reference runs: "
                 "{low:.3f} to {high:.3f}.") if low != high else _(
            "{under:.3f} under the bigram (goal {goal}) {mark}; the reference run: {low:.3f}.")
        lines.append(said.format(under=under, goal=f"≥ {goals['under_bigram']}",
                                 mark=mark(under, goals, "under_bigram"), low=low, high=high))
    lines.append(_("句 that keep the prompt's length: {share:.0%}{goal}; the held-out poems "
                   "{real:.0%}, another poem's {chance:.0%}.").format(
        share=share, goal=goal_text(share, goals, "line_share"), real=finish["kept"]["held_out"],
        chance=finish["kept"]["shuffled"]))
    if form.get("skipped") == "pypinyin":
        lines.append(_("rhyme and 平仄 not measured: pypinyin is not installed (pip install "
                       "pypinyin)."))
    elif form.get("skipped"):
        lines.append(_("rhyme and 平仄 not measured: no held-out 律诗 fits n_ctx with its "
                       "second 联."))
    else:
        lines.append(_("second 下句 that rhyme with the first (十三辙), after the first 联 of "
                       "{n} held-out 律诗 ({judged} of the continuations wrote a whole second 联): "
                       "{share:.0%}{goal}; the held-out poems {real:.0%}, another poem's "
                       "{chance:.0%}.").format(
            n=form["poems"], judged=form["model"]["judged"], share=form["model"]["rhyme"],
            goal=goal_text(form["model"]["rhyme"], goals, "rhyme"),
            real=form["held_out"]["rhyme"], chance=form["shuffled"]["rhyme"]))
        lines.append(_("even places whose 平仄 oppose in the second 联: {share:.0%}; the held-out "
                       "poems {real:.0%}, another poem's 下句 {chance:.0%}.").format(
            share=form["model"]["opposition"], real=form["held_out"]["opposition"],
            chance=form["shuffled"]["opposition"]))
    return lines + [normal(curve, finish)]


def mark(value: float, goals: dict, key: str) -> str:
    """✓ when value meets the goal of key, ✗ when not."""
    return "✓" if value >= goals[key] else "✗"


def goal_text(share: float, goals: dict, key: str) -> str:
    """" (goal ≥ 50%) ✓; the reference runs: 88% to 92%" (or the one reference run's figure),
    or "" when the corpus has no such goal."""
    if key not in goals:
        return ""
    low, high = goals["reference"][key]
    # the space before the parenthesis is the message's own: Chinese puts none before （
    said = _(" (goal {goal}) {mark}; the reference runs: {low:.0%} to {high:.0%}") \
        if low != high else _(" (goal {goal}) {mark}; the reference run: {low:.0%}")
    return said.format(goal=f"≥ {goals[key]:.0%}", mark=mark(share, goals, key), low=low,
                             high=high)


def normal(curve: dict, finish: dict) -> str:
    """Is my loss normal? The line that names the row of docs/poems.md's table nearest the
    run's corpus in size, and sets the run's figures beside that row's."""
    name = min(ROWS, key=lambda row: abs(np.log(curve["characters"] / ROWS[row]["characters"])))
    row, base = ROWS[name], curve["baselines"]
    held = curve["best"]["held_out"]
    rhyme = (finish["form"].get("model") or {}).get("rhyme")
    return _("Is this loss normal? The nearest row of docs/poems.md is {name} ({chars:,} "
             "characters, {minutes} min): held-out {row_held:.3f}, {row_under:.3f} under its "
             "bigram, rhyme {row_rhyme:.0%}. This run ({n:,} characters): {held:.3f}, {under:.3f} "
             "under its bigram, rhyme {rhyme}.").format(
        name=name, chars=row["characters"], minutes=row["minutes"], row_held=row["held_out"],
        row_under=row["bigram"] - row["held_out"], row_rhyme=row["rhyme"],
        n=curve["characters"], held=held, under=base["bigram"] - held,
        rhyme="-" if rhyme is None else f"{rhyme:.0%}")


def defaults(source: str | None) -> dict:
    """The shared settings' defaults: the recipes docs/poems.md measured, on chinese-poetry's
    Tang shi for a chinese-poetry folder, on fortunes-zh otherwise."""
    if source == "chinese-poetry":  # n_ctx 72: a 七律 with its start token and line breaks
        # ten minutes of steps: 5,352 at GPT-2's 0.112 s on two idle cores; GPT-2's block, whose
        # rhyme head forms by 7,500 steps where the LLaMA block's had not by 16,000
        # (docs/why-llama.md); 400 held-out poems hold ~220 律诗: 100 and more judged
        return {"n_layer": 4, "n_head": 4, "n_embd": 128, "n_ctx": 72, "n_batch": 16,
                "steps": 5352, "lr": 3e-3, "warmup": None, "seed": 0, "curve_every": 500,
                "n_held_out": 400}
    return {"n_layer": 4, "n_head": 4, "n_embd": 128, "n_ctx": 64, "n_batch": 16,
            "steps": 1200, "lr": 3e-3, "warmup": None, "seed": 0, "curve_every": 300}


TASK = Task(name="poems", about="a character-level model of classical Chinese verse",
            reads="poems", options=Options, defaults=defaults, plan=plan, check=check,
            vocab_size=lambda run: 0, summary=summary, model_name="shi")
