"""What a poem's constraint costs: reading the vocabulary once, and the mask at each step.

    python -m scripts.benchmarks.constraints [--rounds 5]

On scripts.fixtures.bert_vocab's 21,128-token vocabulary (laid out as uer's), times
constraints.alphabet (once per vocabulary), then greedy decoding of a 4-line 七言 acrostic
(32 tokens) on random weights (4 layers, n_embd 256) without and with the constraint, the two
taking turns, and the mask alone (Verse.allowed and masked) at each of those 32 positions.
Prints the best round of each.
"""

import argparse
import time

import numpy as np

from picogpt import generate
from picogpt.constraints import alphabet, masked, verse
from picogpt.train import init_params
from picogpt.wordpiece import WordPiece
from scripts.fixtures import bert_vocab


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    encoder = WordPiece(bert_vocab.chinese_vocab(), do_lower_case=False)
    start = time.perf_counter()
    alphabet(encoder, encoder.n_vocab)
    print(f"alphabet of {encoder.n_vocab} tokens: {time.perf_counter() - start:.2f} s")
    hparams = {"n_vocab": encoder.n_vocab, "n_ctx": 128, "n_embd": 256, "n_head": 4,
               "n_layer": 4}
    params = init_params(hparams, np.random.default_rng(0))
    poem = verse(encoder, "春夏秋冬", 7)
    ids = list(generate([encoder.start], params, 4, 32, constraint=poem))
    times = {"free": [], "constrained": [], "mask alone": []}
    for _ in range(rounds):
        for name, settings in (("free", {"stop_at_end": False}), ("constrained",
                                                                   {"constraint": poem})):
            start = time.perf_counter()
            list(generate([encoder.start], params, 4, len(ids), **settings))
            times[name].append((time.perf_counter() - start) / len(ids))
        logits = np.zeros((1, encoder.n_vocab), np.float32)
        start = time.perf_counter()
        for n in range(len(ids)):
            masked(logits, np.array([poem.allowed(ids[:n])]))
        times["mask alone"].append((time.perf_counter() - start) / len(ids))
    for name, seconds in times.items():
        print(f"{name}: {min(seconds) * 1000:.3f} ms/token (best of {rounds})")


if __name__ == "__main__":
    main()
