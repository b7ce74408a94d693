"""The induction task: the windows, the vocabulary and the probes that grow an induction head.

    python -m picogpt.train --task induction --name ind
    picogpt "t5 t17 t3 t5" --model_size ind --explain page.html

The task's windows (`periodic_windows`), its vocabulary (`vocab_files`: t0 .. t62 and [CLS], a
WordPiece vocab.txt), its held-out probes and what the curve measures on them (`copy_probes`,
`measure_copies`), and `ablate`, which zeroes a head to see what it did. The learning is
train.py's; the command that runs the task is picogpt/cli/tasks.py. docs/induction.md explains
each setting.

A window is the start token, then a block of p random tokens (p uniform in block_min ..
block_max), tiled to fill it: from the second copy on, each next token is the one that followed
the same token a period earlier, and the period changes from window to window, so no fixed
distance finds it. From step lead_in_from on, half the windows also get 0 .. lead_in_max random
tokens between the start token and the block, so that the copy no longer starts at a fixed place
either.
"""

import numpy as np

from .backward import cross_entropy
from .inside import first_token_score, induction_score, previous_token_score, trace

COPY_LENGTHS = (5, 8, 13, 21, 29)  # the probes' runs: every length a different distance
LEAD_IN = 20  # random tokens before a probe's run "with lead-in", fewer if the context is short


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


def copy_probes(n_ctx: int, n_vocab: int, seed: int = 2026, per_length: int = 4) -> list[dict]:
    """Held-out texts: the start token, LEAD_IN random tokens or none, a run of n distinct
    random tokens and the same run again, for each n of COPY_LENGTHS whose two copies fit
    n_ctx. Each group is {"n", "lead_in", "texts"}, a text {"ids", "first", "second"}: the
    positions whose next token is in the first copy (after its first token) and in the
    second."""
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


def measure_copies(params: dict, n_head: int, groups: list[dict]) -> dict:
    """On the probes: each group's mean first- and second-copy loss (nats), their means over
    every group, and each head's previous-token, induction and first-token score,
    [n_layer][n_head], averaged over every probe."""
    copies, scores = [], {"previous": [], "induction": [], "first_token": []}
    for group in groups:
        first, second = [], []
        for text in group["texts"]:
            ids = text["ids"]
            logits, values = trace(ids, params, n_head)  # [n_seq, n_vocab]
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
