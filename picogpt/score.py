"""Scoring text: how likely GPT-2 finds each token of it, and the text's perplexity.

It holds `score` and the windows behind it.

Every token is scored once, the first one too: the text is preceded by the vocabulary's start
token (GPT-2's <|endoftext|>, a BERT vocabulary's [CLS]), as the model saw the start of a
document. With `inputs = [start_id] + ids[:-1]`, input j predicts
`ids[j]`. A text longer than the context goes in windows: window w feeds
`inputs[w * stride : w * stride + n_ctx]` and scores only the ids no earlier window scored, with
the window's earlier inputs as their context (at least n_ctx - stride of them once the text is
long enough). stride = n_ctx gives disjoint chunks.
"""

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from .encoder import model_tokens
from .errors import PicoGPTError, _, whole_number
from .generate import check_ids, engine_of, sizes
from .kvcache import SCORE_CHUNK, window_stream  # noqa: F401 (GPT-2's, where they were)
from .sampling import most_likely

# Positions whose [n, n_vocab] logits are made at once, and (kvcache.py's SCORE_CHUNK) positions
# per pass through a block: bigger passes score faster but hold more at once (the trade
# measured: docs/performance.md, "Scoring").
LOGITS_CHUNK = 64


@dataclass
class Scores:
    """What one window scored, for ids[start : start + len(logprobs)]."""

    start: int
    logprobs: np.ndarray  # [n] natural-log probability of each id
    ranks: np.ndarray  # [n] 1 + how many tokens the model found more likely
    top_ids: np.ndarray  # [n, top] the most likely next tokens, best first
    top_probs: np.ndarray  # [n, top] their probabilities


def score(ids: Sequence[int], params: dict, n_head: int, *, stride: int | None = None,
          start_id: int | None = None) -> np.ndarray:  # [n] ids -> [n] log-probabilities
    """Natural-log probability of each token given the ones before it, the first after the
    vocabulary's start token (`encoder.start`; by default GPT-2's <|endoftext|>, for a model
    with GPT-2's 50,257 tokens)."""
    windows = score_windows(ids, params, n_head, stride, start_id=start_id)
    return np.concatenate([window.logprobs for window in windows])


def score_windows(ids: Sequence[int], params: dict, n_head: int, stride: int | None = None,
                  top: int = 0, start_id: int | None = None) -> Iterator[Scores]:
    """Score ids window by window (see the module's docstring), yielding each window's Scores."""
    n_vocab, n_ctx = sizes(params, n_head)
    engine = engine_of(n_head)  # the model's kind runs its windows
    stride = n_ctx // 2 if stride is None else stride
    check_score_settings(len(ids), stride, n_ctx)
    check_ids(ids, n_vocab)
    if start_id is None:
        start_id = model_tokens(n_vocab, None, needed=True)[0]
    check_ids([start_id], n_vocab)
    inputs = [start_id, *ids[:-1]]  # inputs[j] predicts ids[j]
    scored = 0  # ids[:scored] have their scores
    for start in range(0, len(ids), stride):
        end = min(start + n_ctx, len(ids))  # this window feeds inputs[start:end]
        x = engine.window_stream(inputs[start:end], params, n_head)  # [end - start, n_embd]
        for chunk in range(scored, end, LOGITS_CHUNK):
            stop = min(chunk + LOGITS_CHUNK, end)
            rows = x[chunk - start : stop - start]
            logits = engine.final_logits(rows, params, n_head)  # [n, n_vocab]
            yield chunk_scores(chunk, logits, np.asarray(ids[chunk:stop]), top)
        scored = end
        if scored == len(ids):
            return


def chunk_scores(start: int, logprobs: np.ndarray, targets: np.ndarray, top: int) -> Scores:
    """Log-probabilities, ranks and the top candidates of targets, from the logits before them
    (logprobs is overwritten)."""
    # [n, n_vocab], [n] -> Scores. The logits' log-softmax, in place (fewer [n, n_vocab]
    # copies lowered scoring's peak memory), shifted by the maximum so no probability is
    # exponentiated into 0 before its log
    logprobs -= np.max(logprobs, axis=-1, keepdims=True)
    logprobs -= np.log(np.sum(np.exp(logprobs), axis=-1, keepdims=True))
    picked = np.take_along_axis(logprobs, targets[:, None], axis=-1)  # [n, 1]
    ranks = 1 + np.sum(logprobs > picked, axis=-1)  # [n]
    top_ids = most_likely(logprobs, top) if top else np.zeros((len(targets), 0), int)
    top_probs = np.exp(np.take_along_axis(logprobs, top_ids, axis=-1))  # [n, top]
    return Scores(start, picked[:, 0], ranks, top_ids, top_probs)


def join_scores(windows: list[Scores]) -> Scores:
    """The windows' Scores as one, for the whole text."""
    return Scores(0, *(np.concatenate([getattr(w, name) for w in windows])
                       for name in ("logprobs", "ranks", "top_ids", "top_probs")))


def summary(text: str, scores: Scores) -> dict:
    """The text's totals: tokens, characters, bytes, negative log-likelihood (nats), and the
    loss as training reports it, nats per token (and its perplexity) and per character (which
    compares across vocabularies), with bits per byte, the unit of published benchmarks."""
    nll = -math.fsum(scores.logprobs.tolist())
    n_tokens, n_chars, n_bytes = len(scores.logprobs), len(text), len(text.encode("utf-8"))
    return {"n_tokens": n_tokens, "nll_nats": nll, "nats_per_token": nll / n_tokens,
            "perplexity": math.exp(nll / n_tokens), "nats_per_char": nll / n_chars,
            "bits_per_byte": nll / math.log(2) / n_bytes, "n_chars": n_chars,
            "n_bytes": n_bytes}


def check_score_settings(n_ids: int, stride, n_ctx: int) -> None:
    """Raise PicoGPTError for an empty text or a stride that cannot tile the text."""
    if n_ids == 0:
        raise PicoGPTError(_("the text to score is empty; give some text (or --prompt_file)."))
    whole_number("stride", stride, 1, n_ctx, _(
        "{n_ctx} is the context, and {half}, the default, gives each token at least {rest} "
        "tokens of context").format(n_ctx=n_ctx, half=n_ctx // 2, rest=n_ctx - n_ctx // 2))

