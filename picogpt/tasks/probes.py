"""The copy probes: held-out texts that tell whether a model has learned to copy, and its heads.

A probe is the start token, a few random tokens or none (the lead-in), a run of distinct random
tokens, and the same run again. Only the context says what comes in the second copy, so a model
that has learned to copy finds it easy, and one that has not finds it as hard as the first.
`measure_copies` gives the loss on each copy and every head's scores (previous-token,
induction, first-token: inside.py's definitions), averaged over the probes, which the training
curve records every few steps for the induction task and for a text run with --repeats.
"""

import numpy as np

from .. import inside
from ..backward import cross_entropy
from ..inside import first_token_score, induction_score, previous_token_score

COPY_LENGTHS = (5, 8, 13, 21, 29)  # the probes' runs: every length a different distance
LEAD_IN = 20  # random tokens before a probe's run "with lead-in", fewer if the context is short


def copy_probes(n_ctx: int, n_vocab: int, seed: int = 2026, per_length: int = 4) -> list[dict]:
    """Held-out texts: the start token (the vocabulary's last id), LEAD_IN random tokens or
    none, a run of n distinct random tokens and the same run again, for each n of COPY_LENGTHS
    whose two copies fit n_ctx. Each group is {"n", "lead_in", "texts"}, a text {"ids", "first",
    "second"}: the positions whose next token is in the first copy (after its first token) and
    in the second. No group when no run fits (a context under 11, a vocabulary under 7)."""
    rng, groups = np.random.default_rng(seed), []
    for n in (n for n in COPY_LENGTHS if 1 + 2 * n <= n_ctx and n < n_vocab - 1):
        for lead in sorted({0, min(LEAD_IN, n_ctx - 1 - 2 * n)}):
            texts = []
            for _ in range(per_length):
                run = rng.choice(n_vocab - 1, n, replace=False)
                ids = np.array([n_vocab - 1, *rng.integers(0, n_vocab - 1, lead), *run, *run])
                begin = 1 + lead  # where the first copy starts
                texts.append({"ids": ids, "first": np.arange(begin, begin + n - 1),
                              "second": np.arange(begin + n, begin + 2 * n - 1)})
            groups.append({"n": int(n), "lead_in": int(lead), "texts": texts})
    return groups


def measure_copies(params: dict, n_head: int, groups: list[dict], trace=None) -> dict:
    """On the probes: each group's mean first- and second-copy loss (nats), their means over
    every group, and each head's previous-token, induction and first-token score,
    [n_layer][n_head], averaged over every probe. trace(ids, params) is the model's forward
    with its attention patterns (a tasks.Block's); by default a GPT-2's, inside.trace."""
    trace = trace or (lambda ids, params: inside.trace(ids, params, n_head))
    copies, scores = [], {"previous": [], "induction": [], "first_token": []}
    for group in groups:
        first, second = [], []
        for text in group["texts"]:
            ids = text["ids"]
            logits, values = trace(ids, params)  # [n_seq, n_vocab]
            first.append(cross_entropy(logits[text["first"]], ids[text["first"] + 1])[0])
            second.append(cross_entropy(logits[text["second"]], ids[text["second"] + 1])[0])
            scores["previous"].append(previous_token_score(values))
            scores["induction"].append(induction_score(values, ids))
            scores["first_token"].append(first_token_score(values))
        copies.append({"n": group["n"], "lead_in": group["lead_in"],
                       "first": round(float(np.mean(first)), 4),
                       "second": round(float(np.mean(second)), 4)})
    return {"first": round(float(np.mean([c["first"] for c in copies])), 4),
            "second": round(float(np.mean([c["second"] for c in copies])), 4),
            **{kind: np.mean(s, axis=0).round(4).tolist() for kind, s in scores.items()},
            "copies": copies}


def best_heads(measured: dict) -> dict[str, tuple[float, int, int]]:
    """The best-scoring head of each kind in a measurement: kind -> (score, layer, head)."""
    best = {}
    for kind in ("previous", "induction"):
        scores = np.asarray(measured[kind])
        layer, head = np.unravel_index(np.argmax(scores), scores.shape)
        best[kind] = (float(scores[layer, head]), int(layer), int(head))
    return best
