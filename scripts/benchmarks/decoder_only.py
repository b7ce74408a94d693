"""Why did GPT drop the encoder? The couplet task's encoder-decoder against a decoder-only GPT of
the same parameter count, trained for the same CPU time on the same pairs (issue 51, item 5).

- encoder-decoder: the couplet recipe (tasks/couplet.py's defaults for chinese-poetry), trained
  as `python -m picogpt.train --task couplet` trains it: transformer/backward.py's step, AdamW, the
  schedule, batches of pairs of one length;
- decoder-only: picogpt's GPT-2 (train.py, fasttrain's step) on the same pairs written as lines,
  「<start>上句，下句。」, a character vocabulary shared with the encoder-decoder (it holds ， and
  。 too), n_embd as the recipe's, as many blocks as bring its parameters nearest; it learns every
  token of the line, as a GPT does.

Both are scored on the same held-out 下句 (the couplet task's split): the 下句's characters and
what ends it (the end token for the encoder-decoder, 。 for the GPT: each model's own way to say
the 下句 is over), given the 上句, nats per token; and both answer the same held-out 上句 with a
下句 of its length (top-k 8, the same mask). Each trains for --seconds of this process's CPU time
(the learning rate's schedule follows the time spent), so a busy machine favours neither, and
run it with OPENBLAS_NUM_THREADS=1 on a shared one (threads that wait for a core burn CPU time).

    python -m scripts.benchmarks.decoder_only --text chinese-poetry/ --seconds 420
"""

import argparse
import json
import os
import time

import numpy as np

from picogpt import fasttrain, transformer
from picogpt import train as gpt_train
from picogpt.chars import Chars, count_chars
from picogpt.files.poems import read_poems
from picogpt.model import gpt2
from picogpt.sampling import Sampling, sample_rngs
from picogpt.tasks import couplet
from picogpt.transformer import backward as transformer_backward
from picogpt.transformer import decoding


def n_params(params) -> int:
    """How many numbers params hold."""
    total = []
    gpt_train.tree_map(lambda a: total.append(a.size), params)
    return sum(total)


def lines_of(rows, encoder) -> dict:
    """The pairs as GPT lines by length: {length: [n, 2 * length + 3] ids} (start, 上句, ，,
    下句, 。) and which rows are 颔联/颈联."""
    by_length = {}
    for length in sorted({len(first) for first, _second, _middle in rows}):
        chosen = [row for row in rows if len(row[0]) == length]
        ids = np.array([[encoder.start, *encoder.encode(f"{first}，{second}。")]
                        for first, second, _middle in chosen])
        by_length[length] = (ids, np.array([middle for _f, _s, middle in chosen]))
    return by_length


def gpt_batches(lines: dict, n_batch: int, rng):
    """Endless (inputs, targets) of n_batch lines of one length, drawn as couplet.batches draws
    pairs."""
    lengths = list(lines)
    weights = np.array([len(lines[n][0]) for n in lengths], float)
    while True:
        ids = lines[lengths[rng.choice(len(lengths), p=weights / weights.sum())]][0]
        rows = ids[rng.integers(0, len(ids), n_batch)]
        yield rows[:, :-1], rows[:, 1:]


def gpt_held_out(params: dict, lines: dict, n_head: int, n_rows: int = 512) -> dict:
    """Mean -log p of each held-out 下句's characters and its 。, given <start>上句，: nats per
    token, every pair and the 颔联/颈联."""
    total, middle, n_total, n_middle = 0.0, 0.0, 0, 0
    for length, (ids, is_mid) in lines.items():
        scored = slice(length + 1, 2 * length + 2)  # the logits that predict 下句 and 。
        for start in range(0, len(ids), n_rows):
            rows = ids[start:start + n_rows]
            scores = gpt2(rows[:, :-1], **params, n_head=n_head)[:, scored].astype(np.float64)
            scores -= scores.max(-1, keepdims=True)
            log_p = scores - np.log(np.exp(scores).sum(-1, keepdims=True))
            nll = -np.take_along_axis(log_p, rows[:, scored.start + 1:scored.stop + 1, None],
                                      -1)[..., 0]  # [n, length + 1]
            mid = is_mid[start:start + n_rows]
            total, n_total = total + nll.sum(), n_total + nll.size
            middle, n_middle = middle + nll[mid].sum(), n_middle + nll[mid].size
    return {"held_out": round(total / n_total, 4),
            "held_out_middle": round(middle / max(1, n_middle), 4)}


def gpt_answer(first: str, params: dict, n_head: int, encoder, seed: int) -> str:
    """A 下句 for first from the GPT after <start>上句，: as many characters as the 上句 (no
    punctuation, start or unknown), top-k 8, the same mask as transformer/decoding.py's answer."""
    ids = [encoder.start, *encoder.encode(first + "，")]
    allowed = np.ones(encoder.n_vocab, bool)
    allowed[[encoder.start, encoder.unknown, *encoder.encode("，。")]] = False
    sampling, rng = Sampling(8, None, 1.0, 1.0), sample_rngs(seed, 1)[0]
    for _ in first:
        scores = np.where(allowed, gpt2(np.array(ids), **params, n_head=n_head)[-1], -np.inf)
        ids = [*ids, sampling.pick(sampling.filter(scores.astype(np.float32), None), rng)]
    return encoder.decode(ids[-len(first):])


def trained(params: dict, step, batches, seconds: float, lr: float) -> tuple[dict, dict]:
    """params after AdamW steps for seconds of this process's CPU time, the schedule train.py's
    (a tenth warm-up, cosine to lr / 10) run by the share of the time spent, not by steps: both
    models get the same time, whatever their step costs."""
    state, steps, cpu, wall = {"step": 0}, 0, time.process_time(), time.perf_counter()
    while (spent := time.process_time() - cpu) < seconds:
        loss, grads = step(next(batches), params)
        rate = gpt_train.learning_rate(int(1000 * spent / seconds), 1000, lr, 100)
        params, state = gpt_train.adamw(params, grads, state, rate)
        steps += 1
    return params, {"steps": steps, "cpu_s": round(time.process_time() - cpu, 1),
                    "wall_s": round(time.perf_counter() - wall, 1), "last_loss": round(loss, 4)}


def compare(text: str, seconds: float, n_held_out: int, gpt_lr: float | None = None,
            n_samples: int = 8) -> dict:
    """Train both models on text's pairs for seconds of CPU time each; every figure, as a dict."""
    recipe = couplet.defaults("chinese-poetry")
    load = os.getloadavg()
    poems, _source, _note = read_poems(text)
    train_rows, held_rows = couplet.split(poems, n_held_out)
    encoder = Chars(count_chars("".join(f"{a}，{b}。" for a, b, _m in train_rows)))
    rng = np.random.default_rng(recipe["seed"])
    n_embd, n_head = recipe["n_embd"], recipe["n_head"]
    seq_hparams = {"n_vocab": encoder.n_vocab, "n_ctx": recipe["n_ctx"], "n_embd": n_embd,
                   "n_head": n_head, "n_layer": recipe["n_layer"],
                   "n_dec_layer": couplet.Options().n_dec_layer or recipe["n_layer"]}
    seq_params = transformer.init_params(seq_hparams, rng)
    gpt_shape = {"n_vocab": encoder.n_vocab, "n_ctx": 2 * 7 + 2, "n_embd": n_embd,
                 "n_head": n_head}
    gpt_layers = min(range(1, 13), key=lambda n: abs(n_params(gpt_train.init_params(
        gpt_shape | {"n_layer": n}, rng)) - n_params(seq_params)))
    gpt_hparams = gpt_shape | {"n_layer": gpt_layers}
    gpt_params = gpt_train.init_params(gpt_hparams, rng)

    train_pairs, held_pairs = (couplet.as_ids(rows, encoder) for rows in (train_rows, held_rows))
    seq_params, seq_run = trained(
        seq_params, lambda batch, p: transformer_backward.loss_and_grads(
            *batch, p, n_head, decoding.NO_PAD, norm_first=True),
        couplet.batches(train_pairs, recipe["n_batch"], rng), seconds, recipe["lr"])
    gpt_params, gpt_run = trained(
        gpt_params, lambda batch, p: fasttrain.loss_and_grads(*batch, p, n_head),
        gpt_batches(lines_of(train_rows, encoder), recipe["n_batch"], rng), seconds,
        gpt_lr or recipe["lr"])
    seq_loss = couplet.held_out_losses(seq_params, held_pairs, n_head, True)
    gpt_loss = gpt_held_out(gpt_params, lines_of(held_rows, encoder), n_head)
    base = couplet.baselines(train_pairs, held_pairs, encoder.n_vocab, encoder.end)
    firsts = [first for first, _s, _m in couplet.spread(held_rows, n_samples)]
    reals = {first: second for first, second, _m in held_rows}
    seq_lines = decoding.answer_each(firsts, seq_params, seq_hparams, encoder, Sampling(8),
                                      seed=0)
    samples = [{"上句": first, "encoder-decoder": seq, "decoder-only": gpt_answer(
        first, gpt_params, n_head, encoder, seed=i), "poet": reals[first]}
        for i, (first, seq) in enumerate(zip(firsts, seq_lines))]
    return {"load_before": load, "load_after": os.getloadavg(), "seconds": seconds,
            "pairs": {"training": len(train_rows), "held_out": len(held_rows)},
            "encoder-decoder": {"params": n_params(seq_params), **seq_hparams, **seq_run,
                                "lr": recipe["lr"], **seq_loss},
            "decoder-only": {"params": n_params(gpt_params), **gpt_hparams, **gpt_run,
                             "lr": gpt_lr or recipe["lr"], **gpt_loss},
            "baselines": base, "samples": samples}


def table(result: dict) -> list[str]:
    """The comparison as a Markdown table."""
    base = result["baselines"]
    lines = ["| model | parameters | steps | CPU s | held-out, every 联 | 颔联/颈联 |",
             "|---|---|---|---|---|---|"]
    for name in ("encoder-decoder", "decoder-only"):
        row = result[name]
        lines.append(f"| {name} | {row['params']:,} | {row['steps']:,} | {row['cpu_s']} | "
                     f"{row['held_out']:.3f} | {row['held_out_middle']:.3f} |")
    lines.append(f"| aligned table | | | | {base['aligned']:.3f} | {base['aligned_middle']:.3f} |")
    lines.append(f"| unigram | | | | {base['unigram']:.3f} | {base['unigram_middle']:.3f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--text", required=True, help="chinese-poetry's folder")
    parser.add_argument("--seconds", type=float, default=420.0,
                        help="CPU seconds of training for each model")
    parser.add_argument("--n_held_out", type=int, default=couplet.Options().n_held_out)
    parser.add_argument("--gpt_lr", type=float, help="the GPT's peak lr (the recipe's if not)")
    parser.add_argument("--n_samples", type=int, default=8)
    args = parser.parse_args()
    result = compare(args.text, args.seconds, args.n_held_out, args.gpt_lr, args.n_samples)
    print(json.dumps(result, ensure_ascii=False, indent=1))
    print("\n" + "\n".join(table(result)))


if __name__ == "__main__":
    main()
