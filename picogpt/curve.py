"""The training curve: how the loss falls and whether heads with a job appear while a model trains.

It holds the probes (texts training never sees: random tokens, then a run of them copied once) and
`measure`, the loss and every head's scores on them, which training records every few steps in
curve.json.
"""

import numpy as np

from .backward import cross_entropy
from .inside import induction_score, previous_token_score, trace


def probes(n_seq: int, n_vocab: int, seed: int = 2026, n_probes: int = 6) -> list[dict]:
    """n_probes texts of n_seq tokens: random tokens, then a random run of them copied right
    after it, its length between n_seq / 6 (at least 2) and n_seq / 2. Each is {"ids",
    "first", "second"}: the ids, and the positions whose next token is in the first copy and
    in the second. None if n_seq is under 6, too short for a run and its copy, or if a
    vocabulary of n_vocab - 1 tokens (not the last, <|endoftext|>) cannot fill n_seq distinct
    ones (a small vocabulary learned with --n_vocab and a long context)."""
    rng, texts = np.random.default_rng(seed), []
    if n_seq < 6 or n_seq > n_vocab - 1:
        return texts
    for length in np.linspace(max(2, n_seq // 6), n_seq // 2 - 1, n_probes).astype(int):
        ids = rng.choice(n_vocab - 1, n_seq, replace=False)  # distinct: no repeat by chance
        start = int(rng.integers(1, n_seq - 2 * length + 1))
        ids[start + length : start + 2 * length] = ids[start : start + length]
        texts.append({"ids": ids, "first": np.arange(start, start + length - 1),
                      "second": np.arange(start + length, start + 2 * length - 1)})
    return texts


def measure(params: dict, n_head: int, texts: list[dict]) -> dict:
    """The mean loss (nats) on the probes' first and second copies, and each head's previous-
    token and induction score, [n_layer][n_head], averaged over the probes."""
    first, second, previous, induction = [], [], [], []
    for text in texts:
        ids = text["ids"]
        logits, values = trace(ids, params, n_head)  # [n_seq, n_vocab]
        for positions, losses in ((text["first"], first), (text["second"], second)):
            losses.append(cross_entropy(logits[positions], ids[positions + 1])[0])
        previous.append(previous_token_score(values))
        induction.append(induction_score(values, ids))
    return {"first": float(np.mean(first)), "second": float(np.mean(second)),
            "previous": np.mean(previous, axis=0).round(4).tolist(),
            "induction": np.mean(induction, axis=0).round(4).tolist()}


def best_heads(measured: dict) -> dict[str, tuple[float, int, int]]:
    """The best-scoring head of each kind in a measurement: kind -> (score, layer, head)."""
    best = {}
    for kind in ("previous", "induction"):
        scores = np.asarray(measured[kind])
        layer, head = np.unravel_index(np.argmax(scores), scores.shape)
        best[kind] = (float(scores[layer, head]), int(layer), int(head))
    return best
