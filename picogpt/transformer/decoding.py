"""The encoder-decoder's inference, beside its forward pass: the one decode loop, and what a
couplet model does with it (answer a 上句, score a 联, read a 联 with the poet's own 下句 fed in).

`write` is the loop. The encoder reads the source once; the decoder then runs over the start
token and what was written so far, and the last row's logits pick the next id, a step at a time,
until every row has written its end or n_tokens ids. Three things can shape a step, each the way
generate.py shapes a GPT-2's:
- `allowed` masks the logits before the sampler's filters, as constraints.py masks a poem's form
  (a couplet's length: no end before the 上句's length, only the end at it; and, with `distinct`,
  no character the 下句 already used, unless the 上句 repeats one at that place: 叠字);
- `sampling` (sampling.py's `Sampling`) filters them and picks: greedy, or drawn with rngs[i]
  for row i;
- `forced` feeds given ids instead of picking (teacher forcing): the model's distribution at each
  step is still computed and masked, so a page can show it on the poet's own 下句.

Every step's probability of the id it wrote, in the distribution it was drawn from (masked,
filtered), comes back with the ids: what the --explain page shows. The decoder is run on the
whole target at each step (no cache): a 下句 is seven characters at most.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..model import softmax
from ..sampling import Sampling, most_likely, sample_rngs
from ..score import Scores
from .model import decode, encode, logits, padding_mask

NO_PAD = -1  # no id is -1: a padding mask of zeros (a couplet's 上句 are never padded)
GREEDY = Sampling()  # no filter: the most likely id each step


@dataclass(frozen=True)
class Written:
    """What `write` wrote: ids [n, n_new] (pad_id after a row's end) and probs [n, n_new], each
    id's probability in the distribution it was drawn from (0 after a row's end)."""

    ids: np.ndarray
    probs: np.ndarray


def write(src_ids: np.ndarray, params: dict, n_head: int, n_tokens: int, start: int, end: int,
          sampling: Sampling = GREEDY, rngs: list | None = None,
          allowed: Callable[[np.ndarray], np.ndarray] | None = None,
          forced: np.ndarray | None = None, pad_id: int = NO_PAD, src_pad_id: int | None = None,
          norm_first: bool = True) -> Written:
    """The decode loop: [n, n_src] sources -> up to n_tokens ids a row, greedy unless sampling
    samples (row i with rngs[i]). allowed(tgt) gives the ids each row may write next,
    [n, n_vocab] bool, from tgt [n, 1 + written] (the start token first); forced [n, n_tokens]
    writes those ids instead of picking. The sources are padded with src_pad_id (pad_id if not
    given); a row that wrote its end is padded with pad_id after it."""
    src_pad_id = pad_id if src_pad_id is None else src_pad_id
    memory = encode(src_ids, params, n_head, src_pad_id, norm_first)  # read once
    memory_mask = padding_mask(src_ids, src_pad_id)  # [n, 1, n_src]
    tgt = np.full((len(src_ids), 1), start)  # [n, 1]
    probs = np.zeros((len(src_ids), 0), np.float32)
    rngs = rngs if rngs is not None else sample_rngs(0, len(src_ids))
    for step in range(n_tokens):
        out = decode(tgt, memory, params, n_head, pad_id, memory_mask, norm_first)
        scores = logits(out[:, -1], params)  # [n, n_vocab]
        if allowed is not None:
            scores = np.where(allowed(tgt), scores, np.float32(-np.inf))
        filtered = sampling.filter(scores, None)
        picked = (forced[:, step] if forced is not None else
                  np.array([sampling.pick(row, rng) for row, rng in zip(filtered, rngs)]))
        p = softmax(filtered.astype(np.float64))[np.arange(len(tgt)), picked]  # [n]
        finished = np.any(tgt[:, 1:] == end, axis=-1)  # [n] rows that wrote their end before
        tgt = np.concatenate([tgt, np.where(finished, pad_id, picked)[:, None]], axis=-1)
        probs = np.concatenate([probs, np.where(finished, 0, p)[:, None]], axis=-1)
        if np.all(finished | (picked == end)):
            break
    return Written(tgt[:, 1:], probs.astype(np.float32))


def couplet_allowed(src: np.ndarray, n_vocab: int, end: int, unknown: int,
                    distinct: bool = False) -> Callable[[np.ndarray], np.ndarray]:
    """allowed for a couplet: the 下句 as long as its 上句 (characters before that length, no
    unknown; then only the end) and, with distinct, no character the 下句 already wrote unless
    the 上句 repeats its character at this place (年年岁岁 -> 岁岁年年). src [n, length]."""
    n, length = src.shape

    def allowed(tgt: np.ndarray) -> np.ndarray:  # [n, 1 + i] -> [n, n_vocab] bool
        i = tgt.shape[-1] - 1  # characters written so far
        ok = np.zeros((n, n_vocab), bool)
        if i >= length:
            ok[:, end] = True
            return ok
        ok[:, :] = True
        ok[:, [end, unknown]] = False
        if distinct and i:
            wrote = tgt[:, 1:]  # [n, i]
            again = src[:, :i] == src[:, i:i + 1]  # [n, i]: the 上句 repeats character j here
            rows = np.repeat(np.arange(n)[:, None], i, axis=1)  # [n, i]
            ok[rows[~again], wrote[~again]] = False
            ok[rows[again], wrote[again]] = True  # the repeat the 上句 asks for
        return ok
    return allowed


def answer(first: str, params: dict, hparams: dict, encoder, sampling: Sampling = GREEDY,
           seed: int | None = None, n_samples: int = 1, distinct: bool = False) -> list[str]:
    """下句 for a 上句: each exactly as long as the 上句 (the length is a mask on the logits: no
    end before it, only the end after it), greedy unless sampling samples; sample i from its own
    generator, as generate's samples.

    >>> import numpy as np
    >>> from picogpt.chars import Chars
    >>> from picogpt.sampling import Sampling
    >>> from picogpt.transformer import init_params
    >>> encoder = Chars([*"春风秋月山水花鸟", "<|unknown|>", "<|start|>"])
    >>> hparams = {"n_vocab": 10, "n_ctx": 16, "n_embd": 16, "n_head": 2, "n_layer": 1}
    >>> params = init_params(hparams, np.random.default_rng(0))
    >>> [len(line) for line in answer("春风花鸟月", params, hparams, encoder, Sampling(top_k=3),
    ...                               seed=1, n_samples=2)]
    [5, 5]
    """
    src = np.array([encoder.encode(first)] * n_samples)  # [n_samples, length]
    return lines(written(src, params, hparams, encoder, sampling, sample_rngs(seed, n_samples),
                         distinct=distinct), encoder)


def answer_each(firsts: list[str], params: dict, hparams: dict, encoder,
                sampling: Sampling = GREEDY, seed: int = 0,
                distinct: bool = False) -> list[str]:
    """A 下句 for each 上句, as `answer` writes one; the 上句 of one length are answered
    together, the i-th with generator i of sample_rngs(seed, n)."""
    made, rngs = [""] * len(firsts), sample_rngs(seed, len(firsts))
    for length in sorted({len(first) for first in firsts}):
        rows = [i for i, first in enumerate(firsts) if len(first) == length]
        src = np.array([encoder.encode(firsts[i]) for i in rows])  # [n, length]
        done = lines(written(src, params, hparams, encoder, sampling, [rngs[i] for i in rows],
                             distinct=distinct), encoder)
        for i, line in zip(rows, done):
            made[i] = line
    return made


def written(src: np.ndarray, params: dict, hparams: dict, encoder, sampling: Sampling,
            rngs: list, forced: np.ndarray | None = None, distinct: bool = False) -> Written:
    """The 下句 of each row of src [n, length] and its end, under the couplet's masks: `write`
    with the model's hparams. forced [n, length + 1]: the 下句 and its end, fed in."""
    return write(src, params, hparams["n_head"], src.shape[-1] + 1, encoder.start, encoder.end,
                 sampling, rngs, couplet_allowed(src, encoder.n_vocab, encoder.end,
                                                 encoder.unknown, distinct),
                 forced=forced, norm_first=hparams.get("norm_first", True))


def lines(made: Written, encoder) -> list[str]:
    """The 下句 of each row written, its end left off."""
    return [encoder.decode([i for i in row if i != encoder.end]) for row in made.ids.tolist()]


def read_pair(first: str, second: str, params: dict, hparams: dict, encoder,
              distinct: bool = False) -> Written:
    """The poet's own 下句 fed to the decoder (teacher forcing), under the couplet's masks: each
    character's probability in the model's own distribution, masked, at its forced step."""
    src = np.array([encoder.encode(first)])  # [1, length]
    forced = np.array([[*encoder.encode(second), encoder.end]])  # [1, length + 1]
    return written(src, params, hparams, encoder, GREEDY, sample_rngs(0, 1), forced,
                   distinct)


def score_pair(first: str, second: str, params: dict, hparams: dict, encoder, top: int = 0):
    """How likely the model finds each character of a 下句 and its end, given the 上句, by its
    own distribution (no length mask): the ids scored and a score.Scores of them."""
    n_head, norm_first = hparams["n_head"], hparams.get("norm_first", True)
    ids = [*encoder.encode(second), encoder.end]
    src, tgt_in = np.array([encoder.encode(first)]), np.array([[encoder.start, *ids[:-1]]])
    out = decode(tgt_in, encode(src, params, n_head, NO_PAD, norm_first), params, n_head, NO_PAD,
                 np.zeros((1, src.shape[-1]), np.float32), norm_first)
    log_p = logits(out[0], params)  # [n, n_vocab], then their log-softmax
    log_p = log_p - log_p.max(-1, keepdims=True)
    log_p -= np.log(np.exp(log_p).sum(-1, keepdims=True))
    picked = log_p[np.arange(len(ids)), ids]  # [n]
    top_ids = most_likely(log_p, top) if top else np.zeros((len(ids), 0), int)
    return ids, Scores(0, picked, 1 + np.sum(log_p > picked[:, None], -1), top_ids,
                       np.exp(np.take_along_axis(log_p, top_ids, -1)))
