"""The couplet task, 对对子: the 2017 encoder-decoder (transformer/) answers a 上句 with a 下句.

    python -m picogpt.train --task couplet --name dui --text chinese-poetry/
    picogpt "海阔凭鱼跃" --model_size dui --top_k 8

Every 联 of a poem whose two 句 have five or seven characters each is a pair: the encoder reads
the 上句, and the decoder writes the 下句 a character at a time after the start token, then the
end (the same token: a character vocabulary's <|start|> also ends). The held-out pairs come from
whole poems never trained on; the 颔联 and 颈联 of regulated verse (律诗), where character i of the
下句 answers character i of the 上句 (对仗), are also measured apart. The loss is read beside two
baselines on the same tokens: a unigram model of the 下句's characters, and a table of which
character stands in the 下句 at the place of the 上句's (P(下句 char i | 上句 char i)); both give
the end the unigram model's probability of an end.

A 下句 is written with the 上句's length: a mask on the logits (no end before it, only the end
after it), as constraints.py masks a poem's form. Writing one is the model's inference, not the
task's: transformer/decoding.py's `answer` is the one function a learner calls.
"""

import re
from dataclasses import dataclass, field

import numpy as np

from .. import verse
from ..chars import Chars, count_chars
from ..errors import PicoGPTError, _, whole_number
from ..sampling import Sampling
from ..transformer.backward import loss_and_grads
from ..transformer.decoding import NO_PAD, answer, answer_each
from ..transformer.model import decode, encode, init_params, logits
from . import Plan, Run, Task
from .ngram import aligned_loss, unigram_probs
from .poems import PUNCTUATION, Corpus

# held-out 联 answered at the end, whose tones are judged, and as many 颔联/颈联 (~6 s of pypinyin)
N_JUDGED = 1000
# The tone goals for the model's top-k 8 下句: as often as the Tang poets by this measure
TONE_GOALS = {"opposition": 0.75, "level_end": 0.85}
COUPLET = re.compile(f"([^{PUNCTUATION}\n]+)，([^{PUNCTUATION}\n]+)[。？！；]")


@dataclass(frozen=True)
class Options(Corpus):
    """The couplet task's own settings, after the corpus's."""

    n_held_out: int = field(default=1000, metadata={"help": (
        "poems set aside whole, never trained on; their pairs measure the loss.")})
    n_dec_layer: int | None = field(default=None, metadata={"help": (
        "decoder blocks (by default as many as --n_layer, the encoder's).")})


def pairs(poem: str) -> list[tuple[str, str, int]]:
    """The poem's 联 whose two 句 are both five or both seven characters: (上句, 下句, which 联
    of the poem it is, counting from 0)."""
    found = [(first, second) for first, second in COUPLET.findall(poem)]
    return [(first, second, i) for i, (first, second) in enumerate(found)
            if len(first) == len(second) and len(first) in (5, 7)]


def is_regulated(poem: str) -> bool:
    """Whether a poem is a 律诗: four 联, and no other, each of two 句 of one length, five or
    seven characters."""
    found = pairs(poem)
    return (len(found) == 4 == len(COUPLET.findall(poem))
            and len({len(first) for first, _second, _i in found}) == 1)


@dataclass(frozen=True)
class Pairs:
    """Held-out or training pairs as ids, by length: {length: (sources, targets_in, targets_out,
    middle)} with sources [n, length], targets [n, length + 1], middle [n] bool."""

    by_length: dict

    @property
    def n_tokens(self) -> int:
        return sum(out.size for _s, _i, out, _m in self.by_length.values())


def as_ids(found: list[tuple[str, str, bool]], encoder) -> Pairs:
    """Pairs (上句, 下句, is it a 颔联 or 颈联) as ids, grouped by length."""
    by_length = {}
    for length in sorted({len(first) for first, _second, _middle in found}):
        rows = [(first, second, middle) for first, second, middle in found
                if len(first) == length]
        src = np.array([encoder.encode(first) for first, _second, _middle in rows])  # [n, length]
        tgt = np.array([encoder.encode(second) for _first, second, _middle in rows])  # [n, length]
        start = np.full((len(rows), 1), encoder.start)
        by_length[length] = (src, np.concatenate([start, tgt], 1),
                             np.concatenate([tgt, start], 1),
                             np.array([middle for _first, _second, middle in rows]))
    return Pairs(by_length)


def split(poems: list[str], n_held_out: int, seed: int = 43) -> tuple[list, list]:
    """(training, held-out) pairs (上句, 下句, middle): the held-out ones from n_held_out whole
    poems drawn at random (the same draw whatever --seed), less any pair a training poem also
    holds, so that no held-out pair is trained on."""
    with_pairs = [(poem, pairs(poem)) for poem in poems]
    with_pairs = [(poem, found) for poem, found in with_pairs if found]
    held = set(np.random.default_rng(seed).choice(
        len(with_pairs), min(n_held_out, len(with_pairs) // 2), replace=False).tolist())
    train, test = [], []
    for i, (poem, found) in enumerate(with_pairs):
        regulated = is_regulated(poem)  # its 颔联 and 颈联 (联 1 and 2) are measured apart
        rows = [(first, second, regulated and j in (1, 2)) for first, second, j in found]
        (test if i in held else train).extend(rows)
    seen = {(first, second) for first, second, _middle in train}
    return train, [row for row in test if (row[0], row[1]) not in seen]


def batches(train: Pairs, n_batch: int, rng: np.random.Generator):
    """Endless batches of n_batch pairs of one length, the length drawn as often as it has
    pairs: (sources, targets_in, targets_out)."""
    lengths = list(train.by_length)
    weights = np.array([len(train.by_length[n][0]) for n in lengths], float)
    while True:
        src, tgt_in, tgt_out, _middle = train.by_length[lengths[rng.choice(len(lengths),
                                                                    p=weights / weights.sum())]]
        rows = rng.integers(0, len(src), n_batch)
        yield src[rows], tgt_in[rows], tgt_out[rows]


def held_out_losses(params: dict, held: Pairs, n_head: int, norm_first: bool,
                    n_rows: int = 512) -> dict:
    """The mean loss (nats per token: the 下句's characters and its end) on every held-out pair,
    and on the 颔联 and 颈联 alone."""
    total, middle, n_total, n_middle = 0.0, 0.0, 0, 0
    for src, tgt_in, tgt_out, is_mid in held.by_length.values():
        for start in range(0, len(src), n_rows):
            rows = slice(start, start + n_rows)
            nll = token_losses(params, src[rows], tgt_in[rows], tgt_out[rows], n_head,
                               norm_first)  # [n, length + 1]
            total, n_total = total + nll.sum(), n_total + nll.size
            middle, n_middle = middle + nll[is_mid[rows]].sum(), n_middle + nll[is_mid[rows]].size
    return {"held_out": round(total / n_total, 4),
            "held_out_middle": round(middle / max(1, n_middle), 4)}


def token_losses(params: dict, src: np.ndarray, tgt_in: np.ndarray, tgt_out: np.ndarray,
                 n_head: int, norm_first: bool) -> np.ndarray:  # -> [n, n_tgt]
    """-log p of each target id, the decoder run once over the whole target (teacher forcing)."""
    memory = encode(src, params, n_head, NO_PAD, norm_first)
    out = decode(tgt_in, memory, params, n_head, NO_PAD, np.zeros((1, src.shape[-1]), np.float32),
                 norm_first)
    scores = logits(out, params).astype(np.float64)  # [n, n_tgt, n_vocab]
    scores -= scores.max(-1, keepdims=True)
    log_p = scores - np.log(np.exp(scores).sum(-1, keepdims=True))
    return -np.take_along_axis(log_p, tgt_out[..., None], -1)[..., 0]


def baselines(train: Pairs, held: Pairs, n_vocab: int, end: int) -> dict:
    """The unigram model of the 下句's characters and the position-aligned table, on the
    held-out tokens (both give the end the unigram's probability of an end); all pairs and the
    颔联 and 颈联 alone."""
    train_src = np.concatenate([s.ravel() for s, _i, _o, _m in train.by_length.values()])
    train_tgt = np.concatenate([o[:, :-1].ravel() for _s, _i, o, _m in train.by_length.values()])
    train_out = np.concatenate([o.ravel() for _s, _i, o, _m in train.by_length.values()])
    unigram = unigram_probs(train_out, n_vocab)  # [n_vocab] the 下句's characters and ends
    result = {}
    for name, keep in (("", lambda mid: np.ones_like(mid)), ("_middle", lambda mid: mid)):
        src, tgt, ends = [], [], 0
        for s, _tgt_in, o, mid in held.by_length.values():
            src.append(s[keep(mid)].ravel())
            tgt.append(o[keep(mid)][:, :-1].ravel())
            ends += int(keep(mid).sum())
        src, tgt = np.concatenate(src), np.concatenate(tgt)
        n = len(tgt) + ends
        end_nll = -np.log(unigram[end]) * ends
        uni = (-np.log(unigram[tgt]).sum() + end_nll) / max(1, n)
        aligned = (aligned_loss(train_src, train_tgt, src, tgt, unigram) * len(tgt)
                   + end_nll) / max(1, n)
        result |= {f"unigram{name}": round(float(uni), 4),
                   f"aligned{name}": round(float(aligned), 4)}
    return result


def unigram_lines(firsts: list[str], probs: np.ndarray, encoder,
                  rng: np.random.Generator) -> list[str]:
    """A 下句 for each 上句 that reads nothing of it: characters drawn one by one from probs
    [n_vocab] (the unigram model of the 下句's characters), as many as the 上句 has."""
    chars = probs.copy()
    chars[[encoder.start, encoder.unknown]] = 0  # characters only
    chars /= chars.sum()
    return [encoder.decode(rng.choice(len(chars), len(first), p=chars).tolist())
            for first in firsts]


def tone_shares(rows: list) -> dict:
    """verse.tone_shares of 联 for the model's 下句, the poets' own and a unigram sampler's, on
    the same 上句: rows ((上句, 下句, middle), the model's 下句, the unigram sampler's)."""
    firsts = [first for (first, _second, _middle), _made, _unigram in rows]
    return {"pairs": len(rows),
            "model": verse.tone_shares([(f, made) for f, (_r, made, _u) in zip(firsts, rows)]),
            "real": verse.tone_shares([(f, row[0][1]) for f, row in zip(firsts, rows)]),
            "unigram": verse.tone_shares([(f, u) for f, (_r, _m, u) in zip(firsts, rows)])}


def plan(run: Run, data) -> Plan:
    """The couplet run of run's settings on data's poems (tasks.poems.Poems)."""
    o, n_head = run.options, run.n_head
    train_rows, held_rows = split(data.poems, o.n_held_out)
    if not train_rows or not held_rows:
        raise PicoGPTError(_("the poems hold {n} 联 of five or seven characters a 句; the couplet "
                             "task needs some to train on and some to hold out. Give more "
                             "poems.").format(n=len(train_rows) + len(held_rows)))
    encoder = Chars(count_chars("".join(first + second for first, second, _middle in train_rows)))
    train, held = as_ids(train_rows, encoder), as_ids(held_rows, encoder)
    top_k = min(8, encoder.n_vocab)  # the samples' k, within a small corpus's vocabulary
    hparams = {"model": "transformer", "n_vocab": encoder.n_vocab, "n_ctx": run.n_ctx,
               "n_embd": run.n_embd, "n_head": n_head, "n_layer": run.n_layer,
               "n_dec_layer": o.n_dec_layer or run.n_layer, "norm_first": True}
    rng = np.random.default_rng(run.seed)
    params = init_params(hparams, rng)
    prompts = [first for first, _second, _middle in held_rows[:200]]
    every = spread(held_rows, N_JUDGED)  # and every 颔联 and 颈联, up to as many
    chosen = set(every)
    judged = every + [row for row in spread([row for row in held_rows if row[2]], N_JUDGED)
                      if row not in chosen]

    def sample(params: dict, step: int) -> str:
        first = prompts[(step // run.curve_every) % len(prompts)]
        second = answer(first, params, hparams, encoder, Sampling(top_k=top_k), seed=step)[0]
        return f"{first}，{second}。"

    def finish(params: dict) -> dict:
        firsts = [first for first, _second, _middle in judged]
        made = answer_each(firsts, params, hparams, encoder, Sampling(top_k=top_k),
                           seed=run.seed)
        result = {"samples": [f"{first}，{second}。" for first, second in zip(firsts[:8], made)],
                  "pairs": [[first, second, real, middle] for (first, real, middle), second in
                            zip(judged[:200], made)]}
        if not verse.available():  # the closing lines say what was left out
            return result | {"tones": None}
        unigram = unigram_lines(firsts, unigram_probs(
            np.concatenate([o.ravel() for _s, _i, o, _m in train.by_length.values()]),
            encoder.n_vocab), encoder, np.random.default_rng(run.seed))
        rows = list(zip(judged, made, unigram))
        return result | {"tones": {
            "every": tone_shares(rows[:len(every)]),
            "middle": tone_shares([row for row in rows if row[0][2]])}}

    base = baselines(train, held, encoder.n_vocab, encoder.end)

    def figures(measured: dict) -> str:
        return _("aligned table {aligned:.3f}, unigram {unigram:.3f}; the 颔联 and 颈联 "
                 "{middle:.3f} (aligned table {aligned_middle:.3f}, unigram "
                 "{unigram_middle:.3f})").format(
            middle=measured["held_out_middle"], **base)

    return Plan(
        hparams=hparams, params=params, batches=batches(train, run.n_batch, rng),
        loss_and_grads=lambda batch, params: loss_and_grads(*batch, params, n_head, NO_PAD,
                                                            norm_first=True),
        held_out=lambda params: held_out_losses(params, held, n_head, True),
        files={"chars.json": encoder.tokens},
        baselines=base, figures=figures, sample=sample,
        curve={"held_out_tokens": held.n_tokens, "held_out_pairs": len(held_rows),
               "training_pairs": len(train_rows)},
        finish=finish, prompt=prompts[0], sampler={"top_k": top_k})


def spread(rows: list, n: int, seed: int = 47) -> list:
    """n of rows drawn at random (the same draw whatever --seed), kept in their order: the
    held-out 联 whose tones are judged at the end."""
    if len(rows) <= n:
        return list(rows)
    return [rows[i] for i in sorted(np.random.default_rng(seed).choice(len(rows), n,
                                                                       replace=False))]


def check(run: Run) -> None:
    """Raise PicoGPTError for the first of the task's settings that cannot train."""
    whole_number("n_ctx", run.n_ctx, 8, hint=_("a 句 of seven characters and the start token"))
    whole_number("n_held_out", run.options.n_held_out, 1)
    if run.options.n_dec_layer is not None:
        whole_number("n_dec_layer", run.options.n_dec_layer, 1)


def summary(curve: dict, finish: dict) -> list[str]:
    """The end of a couplet run: the held-out loss beside both baselines, for every pair and
    for the 颔联 and 颈联, against the task's goals; a sample pair."""
    best, base = curve["best"], curve["baselines"]
    measured = next(m for m in curve["measured"] if m["step"] == best["step"])
    lines = []
    for which, key in ((_("every held-out 联"), ""), (_("the 颔联 and 颈联"), "_middle")):
        held = measured[f"held_out{key}"]
        under_aligned, under_unigram = base[f"aligned{key}"] - held, base[f"unigram{key}"] - held
        lines.append(_("{which}: {held:.3f} nats per token (the 下句's characters and its end); "
                       "aligned table {aligned:.3f}, unigram {unigram:.3f}: {a:.3f} under the "
                       "table (goal ≥ 0.3) {mark_a}, {u:.3f} under the unigram (goal ≥ 1.0) "
                       "{mark_u}.").format(
            which=which, held=held, aligned=base[f"aligned{key}"], unigram=base[f"unigram{key}"],
            a=under_aligned, u=under_unigram, mark_a="✓" if under_aligned >= 0.3 else "✗",
            mark_u="✓" if under_unigram >= 1.0 else "✗"))
    lines += tone_lines(finish.get("tones"))
    lines.append(_("sample: {sample}").format(sample=" / ".join(finish["samples"][:3])))
    return lines


def tone_lines(tones: dict | None) -> list[str]:
    """The closing lines of the tones: the model's shares beside the poets' and a unigram
    sampler's, on every judged 联 and on the 颔联 and 颈联, whose shares meet the goals (regulated
    verse's rule: by Mandarin tones the poets themselves fall short of them on every 联); one
    line when pypinyin was not there to judge them."""
    if tones is None:
        return [_("pypinyin cannot be imported, so the tones (平仄) of the 下句 were not "
                  "judged; pip install pypinyin, then train again to see them.")]
    every, middle = tones["every"], tones["middle"]
    names = {"opposition": _("tones opposed at the even places (平仄相对)"),
             "level_end": _("下句 that end on a level tone (平)")}
    return [_("{what}, by Mandarin tones: the model's top-k 8 下句 {model:.2f} on the 颔联 and "
              "颈联 (goal ≥ {goal:.2f}) {mark}, {model_all:.2f} on every 联; the poets' own "
              "{real:.2f}, {real_all:.2f}; a unigram sampler's {unigram:.2f}, {unigram_all:.2f} "
              "({n} and {n_all} held-out 联).").format(
        what=names[key], model=middle["model"][key], goal=goal,
        mark="✓" if middle["model"][key] >= goal else "✗", model_all=every["model"][key],
        real=middle["real"][key], real_all=every["real"][key],
        unigram=middle["unigram"][key], unigram_all=every["unigram"][key], n=middle["pairs"],
        n_all=every["pairs"])
        for key, goal in TONE_GOALS.items()]


def defaults(source: str | None) -> dict:
    """The shared settings' defaults: the recipe docs/couplet.md measured on chinese-poetry's
    Tang poems (a 2 + 2-layer model, d_model 128, 5,000 steps of 64 pairs: under 10 minutes on
    two cores); on fortunes-zh (no --text) a run of the same shape, shorter, whose few pairs
    make it a small demonstration."""
    recipe = {"n_layer": 2, "n_head": 4, "n_embd": 128, "n_ctx": 16, "n_batch": 64,
              "steps": 5000, "lr": 2e-3, "warmup": None, "seed": 0, "curve_every": 500}
    if source == "chinese-poetry":
        return recipe
    return recipe | {"steps": 1500, "lr": 1e-3, "curve_every": 300}


TASK = Task(name="couplet", about="对对子: the 2017 encoder-decoder answers a 上句 with a 下句",
            reads="poems", options=Options, defaults=defaults, plan=plan, check=check,
            vocab_size=lambda run: 0, summary=summary, model_name="dui")
