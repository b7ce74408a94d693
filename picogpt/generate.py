"""The decode loop: feed the prompt once, then one token per step, and pick each next token.

Owns `generate`, the sampling filters (repetition penalty, temperature, top-k, top-p) and the
samplers. It must not print, read files or touch global random state: randomness comes only
from `np.random.Generator`s made from the `seed` argument, one per sample.
"""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from .encoder import END_OF_TEXT, Encoder
from .errors import PicoGPTError
from .model import gpt2, softmax, with_room

# Prompt positions per forward pass. A pass holds [n_head, rows, n_past + rows] attention scores
# and [rows, 4 * n_embd] activations at once (a 512-token prompt in one pass peaked at 1.45x the
# 124M weights), but runs the matrix products faster the more rows it has. A prompt's first pass
# has no past, so 256 rows hold fewer scores than a 128-row pass late in a long prompt: a
# 512-token prompt fed ~7% faster than with 128 throughout, at the same peak. Two 256-row passes
# were ~2% faster still but lifted an 880-token prompt's peak from 1.295x to 1.316x the weights.
FIRST_CHUNK, CHUNK = 256, 128


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
    kth = np.partition(logits, -k, axis=-1)[..., -k, None]  # [..., 1] the k-th largest
    return np.where(logits < kth, -np.inf, logits).astype(logits.dtype)


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


def generate(input_ids: Sequence[int], params: dict, n_head: int, n_tokens: int, *,
             top_k: int | None = None, top_p: float | None = None, temperature: float = 1.0,
             seed: int | None = None, repetition_penalty: float = 1.0, stop_at_end: bool = True,
             stop: str | None = None, encoder: Encoder | None = None, n_samples: int = 1,
             candidates: int = 0) -> Iterator:
    """Yield up to n_tokens new token ids after input_ids, one at a time.

    Greedy unless top_k or top_p is set. A sample ends early at <|endoftext|> (not yielded)
    unless stop_at_end is False, and once its text contains `stop` (which needs `encoder` to
    read the text; the token that completes it is yielded). With n_samples > 1 the samples
    decode together and the generator yields (sample, token id) pairs, step by step. With
    candidates=N each token id comes as a Step that also holds the N most likely candidates
    (plain generation does none of that work).
    """
    sampling = Sampling(top_k, top_p, temperature, repetition_penalty)
    check_settings(n_tokens, sampling, seed, n_samples, stop, candidates,
                   len(params["wte"]))  # at the call, not at the first token
    check_context(len(input_ids), n_tokens, len(params["wpe"]))
    if stop is not None and encoder is None:
        raise PicoGPTError("stop needs encoder= to read the generated text; pass the Encoder "
                           "from load_encoder_hparams_and_params.")
    stop_bytes = stop.encode("utf-8") if stop else None
    steps = decode_samples([*input_ids], params, n_head, n_tokens, sampling,
                           sample_rngs(seed, n_samples), stop_at_end, stop_bytes, encoder,
                           candidates)
    return steps if n_samples > 1 else (token for _, token in steps)


def decode_samples(input_ids: list[int], params: dict, n_head: int, n_tokens: int,
                   sampling: Sampling, rngs: list[np.random.Generator], stop_at_end: bool = True,
                   stop: bytes | None = None, encoder: Encoder | None = None,
                   candidates: int = 0) -> Iterator[tuple[int, int | Step]]:
    """The loop behind generate: one sample per rng; yields (sample, token id) step by step
    (a Step in place of the id when candidates > 0).

    The prompt is fed once. Then each step runs all running samples as one batch of
    [n_alive, 1] ids, so the weights are read once per step. The samples share the prompt's
    keys and values (gpt2's prompt_cache); each caches only its own new positions. One sample
    just extends the prompt's cache. A finished sample leaves the batch.
    """
    if n_tokens == 0:
        return
    prompt = input_ids or [END_OF_TEXT]  # no prompt: start as GPT-2 starts a document
    if len(rngs) == 1:  # one batch row, its cache sized for the prompt and every new token
        room = empty_cache(params, len(prompt) + n_tokens, (1,))
        (logits,), cache = feed([prompt], params, n_head, room)  # [n_vocab]
        prompt_cache = None
    else:  # the samples share the prompt's cache; each caches only its own new positions
        logits, prompt_cache = feed(prompt, params, n_head, empty_cache(params, len(prompt)))
        cache = empty_cache(params, n_tokens, (len(rngs),))
    logits = np.broadcast_to(logits, (len(rngs), len(logits)))  # [n_alive, n_vocab]
    alive = list(range(len(rngs)))  # which sample each batch row holds
    seen = None  # [n_alive, n_vocab] which tokens each sample has had, for the penalty
    if sampling.repetition_penalty != 1.0:
        seen = np.zeros(logits.shape, bool)
        seen[:, prompt] = True
    text = [b""] * len(rngs)  # each sample's output so far, when there is a stop text to find
    for step in range(n_tokens):
        filtered = sampling.filter(logits, seen)  # [n_alive, n_vocab]
        next_ids = [sampling.pick(row, rngs[i]) for row, i in zip(filtered, alive)]
        keep = []
        for row, (i, token) in enumerate(zip(alive, next_ids)):
            if stop_at_end and token == END_OF_TEXT:
                continue
            yield i, (describe(token, logits[row], filtered[row], candidates) if candidates
                      else token)
            if stop is not None:
                piece = encoder.decode_bytes([token])
                text[i] += piece
                if stop in text[i][-len(stop) - len(piece) :]:  # only where it could be new
                    continue
            keep.append(row)
        if not keep or step == n_tokens - 1:
            return
        if len(keep) < len(alive):  # finished samples stop costing work
            alive = [alive[row] for row in keep]
            room = n_tokens - step - 1  # positions still to come
            cache = [(with_room(k[keep], room), with_room(v[keep], room)) for k, v in cache]
            seen = None if seen is None else seen[keep]
        ids = np.array([[next_ids[row]] for row in keep])  # [n_alive, 1]
        if seen is not None:
            seen[np.arange(len(keep)), ids[:, 0]] = True
        logits, cache = gpt2(ids, **params, n_head=n_head, cache=cache,
                             prompt_cache=prompt_cache)  # [n_alive, n_vocab]


def feed(ids, params: dict, n_head: int, cache: list,
         chunk: int | None = None) -> tuple[np.ndarray, list]:  # [..., n_new] -> [..., n_vocab]
    """Run ids through the model after the cache, a chunk at a time; the last logits and cache.

    chunk=None feeds FIRST_CHUNK positions in a pass into an empty cache, CHUNK after that.
    """
    ids = np.asarray(ids)
    assert ids.shape[-1] > 0, "feed needs at least one id"
    start = 0
    while start < ids.shape[-1]:
        empty = not cache or cache[0][0].shape[-2] == 0
        stop = start + (chunk or (FIRST_CHUNK if empty else CHUNK))
        logits, cache = gpt2(ids[..., start:stop], **params, n_head=n_head, cache=cache)
        start = stop
    return logits, cache


def empty_cache(params: dict, n_rows: int, batch: tuple = ()) -> list:
    """A cache of no positions yet, with room for n_rows: gpt2 fills it without ever copying."""
    # one (k, v) per block, each [*batch, 0, n_embd]
    empty = np.empty((*batch, 0, params["wte"].shape[-1]), params["wte"].dtype)
    return [(with_room(empty, n_rows), with_room(empty, n_rows)) for _ in params["blocks"]]


def is_count(value, low: int = 0) -> bool:
    """A whole number (not a bool) of at least low."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def is_number(value, low: float, high: float = float("inf"), high_ok: bool = False) -> bool:
    """A real number in (low, high), or (low, high] with high_ok."""
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and low < value and (value <= high if high_ok else value < high))


def check_settings(n_tokens: int, sampling: Sampling, seed: int | None, n_samples: int,
                   stop: str | None, candidates: int = 0, n_vocab: int = 50257) -> None:
    """Raise PicoGPTError for a setting that makes no sense, before any work is done."""
    problems = [
        (is_count(n_tokens), f"n_tokens={n_tokens!r} is not a count of tokens; give a whole "
                             f"number from 0 up."),
        (sampling.top_k is None or is_count(sampling.top_k, 1) and sampling.top_k <= n_vocab,
         f"top_k={sampling.top_k!r} is not a whole number from 1 to {n_vocab} (1 is greedy); "
         f"leave it unset for greedy decoding."),
        (sampling.top_p is None or is_number(sampling.top_p, 0, 1, high_ok=True),
         f"top_p={sampling.top_p!r} must be a number above 0 and at most 1 (1 keeps every "
         f"token); leave it unset for greedy decoding."),
        (is_number(sampling.temperature, 0), f"temperature={sampling.temperature!r} must be a "
         f"number above 0 (1 keeps GPT-2's probabilities; lower is more conservative)."),
        (is_number(sampling.repetition_penalty, 0), f"repetition_penalty="
         f"{sampling.repetition_penalty!r} must be a number above 0 (1 is off; 1.2 is a "
         f"common choice against loops)."),
        (seed is None or is_count(seed), f"seed={seed!r} is not a whole number from 0 up; "
                                         f"give one, or leave it unset for a different sample "
                                         f"each run."),
        (is_count(n_samples, 1), f"n_samples={n_samples!r} is not a whole number from 1 up."),
        (stop is None or isinstance(stop, str) and stop != "",
         f"stop={stop!r} is not a text to stop at; give a non-empty text, or leave it unset."),
        (is_count(candidates), f"candidates={candidates!r} is not a whole number from 0 up."),
    ]
    for ok, message in problems:
        if not ok:
            raise PicoGPTError(message)


def check_context(n_prompt: int, n_tokens: int, n_ctx: int) -> None:
    """Raise PicoGPTError if the prompt and the new tokens do not fit in the context."""
    if max(n_prompt, 1) + n_tokens > n_ctx:
        raise PicoGPTError(f"prompt is {n_prompt} tokens; with n_tokens={n_tokens} that passes "
                           f"GPT-2's limit of {n_ctx}. Shorten the prompt or lower n_tokens.")
