"""Sampling: how the next token is picked from the model's logits, and what the pick weighed.

It holds the filters (repetition penalty, temperature, top-k, top-p), the pickers `greedy` and
`sample`, and `Step`, a token with the candidates it was picked from. Randomness comes only from
`np.random.Generator`s, one per sample, made from the seed by `sample_rngs`.
"""

from dataclasses import dataclass

import numpy as np

from .model import softmax


@dataclass(frozen=True)
class Sampling:
    """How each next token is picked. None means "not set"; 1.0 leaves the logits as they are.

    The filters run in the order of Hugging Face's and openai/gpt-2's samplers: repetition
    penalty, then temperature, then top-k, then top-p. Setting top_k or top_p turns sampling on;
    with neither set the pick is greedy (temperature then changes nothing).
    """

    top_k: int | None = None
    top_p: float | None = None
    temperature: float = 1.0
    repetition_penalty: float = 1.0

    @property
    def sampling(self) -> bool:
        return self.top_k is not None or self.top_p is not None

    def filter(self, logits: np.ndarray, seen: np.ndarray | None) -> np.ndarray:
        """The logits the next token is drawn from; removed tokens get -inf."""
        # [..., n_vocab], [..., n_vocab] bool -> [..., n_vocab]
        if self.repetition_penalty != 1.0:
            logits = penalize_repeats(logits, seen, self.repetition_penalty)
        if not self.sampling:
            return logits
        if self.temperature != 1.0:
            logits = logits / np.float32(self.temperature)
        if self.top_k is not None:
            logits = keep_top_k(logits, self.top_k)
        if self.top_p is not None and self.top_p < 1.0:
            logits = keep_top_p(logits, self.top_p)
        return logits

    def pick(self, logits: np.ndarray, rng: np.random.Generator) -> int:  # [n_vocab] -> id
        """The next token from filtered logits: drawn at random, or the most likely one."""
        return sample(logits, rng) if self.sampling else greedy(logits)


def penalize_repeats(logits: np.ndarray, seen: np.ndarray, penalty: float) -> np.ndarray:
    """Make tokens already seen less likely: divide a positive logit by penalty, multiply a
    negative one (Hugging Face's RepetitionPenaltyLogitsProcessor)."""
    # [..., n_vocab], [..., n_vocab] bool -> [..., n_vocab]
    penalized = np.where(logits < 0, logits * np.float32(penalty), logits / np.float32(penalty))
    return np.where(seen, penalized, logits)


def keep_top_k(logits: np.ndarray, k: int) -> np.ndarray:  # [..., n_vocab] -> [..., n_vocab]
    """Keep the k largest logits (and any tied with the k-th), set the others to -inf."""
    kth = kth_largest(logits, k)  # [..., 1]
    return np.where(logits < kth, -np.inf, logits).astype(logits.dtype)


# Every STRIDE-th logit is a sample of the row in which the k-th largest is looked for first
STRIDE = 16


def kth_largest(values: np.ndarray, k: int) -> np.ndarray:  # [..., n] -> [..., 1]
    """The k-th largest of each row: np.partition(values, -k)[..., -k], found among fewer.

    Partitioning a row of 50,257 logits costs ~0.3 ms, as much as a tenth of an eight-sample
    step's own work besides the products. Any k values of the row bound the k-th largest from
    below, so the k-th largest of every STRIDE-th value is a floor: every value at or above the
    k-th largest is also at or above it, and only those few hundred need partitioning. Same
    value, ties included; an unlucky row only keeps more of its values.
    """
    if values.shape[-1] < 4 * STRIDE * k:  # too short a row for a sample of k values to pay
        return np.partition(values, -k, axis=-1)[..., -k, None]
    rows = values.reshape(-1, values.shape[-1])  # [n_rows, n]
    floors = np.partition(rows[:, ::STRIDE], -k, axis=-1)[:, -k]  # [n_rows]
    kth = [np.partition(row[row >= floor], -k)[-k] for row, floor in zip(rows, floors)]
    return np.array(kth, values.dtype).reshape(*values.shape[:-1], 1)


def keep_top_p(logits: np.ndarray, p: float) -> np.ndarray:  # [..., n_vocab] -> [..., n_vocab]
    """Keep the fewest most likely tokens whose probabilities add up to at least p.

    The token that crosses p stays in, as in Hugging Face's TopPLogitsWarper (openai/gpt-2
    drops it), and the cut is computed as they compute it: a token goes if it and every less
    likely token together hold at most 1 - p of the probability. Tokens tied with the least
    likely kept one all stay, as in top-k (Hugging Face keeps whichever of them its sort
    happened to put last).
    """
    ascending = np.sort(logits, axis=-1)  # [..., n_vocab]
    tail = np.cumsum(softmax(ascending), axis=-1)  # [..., n_vocab] mass of it and all below it
    n_drop = np.sum(tail <= 1 - p, axis=-1, keepdims=True)  # float32 compare: p is a Python float
    n_drop = np.minimum(n_drop, logits.shape[-1] - 1)  # the most likely token always stays
    least = np.take_along_axis(ascending, n_drop, axis=-1)  # [..., 1] least likely kept logit
    return np.where(logits < least, -np.inf, logits).astype(logits.dtype)


@dataclass(frozen=True)
class Step:
    """One generated token and the distribution it came from (generate's `candidates=N`)."""

    token: int
    ids: np.ndarray  # [n] the n most likely candidates before the filters, and the token
    before: np.ndarray  # [n] their probabilities as the model gave them
    after: np.ndarray  # [n] their probabilities after the filters: what the pick used
    entropy: float  # of the distribution after the filters, in nats


def most_likely(values: np.ndarray, n: int) -> np.ndarray:  # [..., m] -> [..., n] indices
    """Indices of the n largest values, largest first, without sorting all of them."""
    n = min(n, values.shape[-1])
    some = np.argpartition(-values, n - 1, axis=-1)[..., :n]  # the n largest, in no order
    order = np.argsort(-np.take_along_axis(values, some, axis=-1), axis=-1, kind="stable")
    return np.take_along_axis(some, order, axis=-1)


def describe(token: int, logits: np.ndarray, filtered: np.ndarray, n: int) -> Step:
    """The Step for a token picked from filtered, which the filters made from logits."""
    before, after = softmax(logits.astype(np.float64)), softmax(filtered.astype(np.float64))
    ids = most_likely(before, n)  # [n] most likely first
    if token not in ids:  # the pick is always shown, even when the penalty promoted it
        ids = np.append(ids, token)
    kept = after[after > 0]
    return Step(token, ids, before[ids], after[ids], float(-np.sum(kept * np.log(kept))))


def greedy(logits: np.ndarray) -> int:  # [n_vocab] -> token id
    """The most likely token."""
    return int(np.argmax(logits))


def sample(logits: np.ndarray, rng: np.random.Generator) -> int:  # [n_vocab] -> token id
    """Draw a token in proportion to softmax(logits); tokens at -inf are never drawn."""
    kept = np.flatnonzero(logits > -np.inf)  # [n_kept] ids the filters left
    # float64 for the draw: choice checks that p sums to 1 more tightly than float32 rounds
    return int(kept[rng.choice(len(kept), p=softmax(logits[kept].astype(np.float64)))])


def sample_rngs(seed: int | None, n_samples: int) -> list[np.random.Generator]:
    """One generator per sample, made from (seed, sample): sample i is the same in any batch."""
    entropy = np.random.SeedSequence().entropy if seed is None else seed
    return [np.random.default_rng([entropy, i]) for i in range(n_samples)]
