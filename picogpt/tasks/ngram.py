"""The baselines a trained model's held-out loss is read against: unigram and bigram models.

A unigram model guesses each token by how often it came in the training tokens, whatever came
before it; a bigram model by how often it came after the token before it. Both are counted from
the training tokens and scored on the held-out tokens the model is scored on, so "held-out loss
3.9 nats per token" can be read as "better than counting pairs" or not. A model that does not
beat the bigram model has learned little more than which token follows which.

Smoothing gives a token never seen in a place a chance: the unigram model adds one to every
count (add-one, Laplace); the bigram model mixes in the unigram model's guess, the more the
more kinds of tokens followed the one before (Witten-Bell interpolation). No I/O.
"""

import numpy as np


def unigram_probs(train_ids: np.ndarray, n_vocab: int) -> np.ndarray:  # -> [n_vocab]
    """p(w) = (count(w) + 1) / (N + n_vocab): add-one smoothed token frequencies."""
    counts = np.bincount(train_ids, minlength=n_vocab)  # [n_vocab]
    return (counts + 1) / (len(train_ids) + n_vocab)


def unigram_loss(train_ids: np.ndarray, held_ids: np.ndarray, n_vocab: int) -> float:
    """Mean -ln p(w) (nats per token) over held_ids[1:], the tokens a model is scored on."""
    return float(-np.mean(np.log(unigram_probs(train_ids, n_vocab)[held_ids[1:]])))


def bigram_loss(train_ids: np.ndarray, held_ids: np.ndarray, n_vocab: int) -> float:
    """Mean -ln p(w | u) (nats per token) over the pairs (u, w) of held_ids, with
    p(w | u) = (count(u, w) + T(u) p(w)) / (count(u) + T(u)): T(u) is how many kinds of tokens
    followed u in training, p(w) the unigram model's. A u never seen in training gives p(w)."""
    return aligned_loss(train_ids[:-1], train_ids[1:], held_ids[:-1], held_ids[1:],
                        unigram_probs(train_ids, n_vocab))


def aligned_loss(given: np.ndarray, following: np.ndarray, held_given: np.ndarray,
                 held_following: np.ndarray, unigram: np.ndarray) -> float:
    """Mean -ln p(w | u) over the held-out pairs (u, w), counted from the training pairs
    (given[i], following[i]) and smoothed as bigram_loss is (Witten-Bell, towards unigram): the
    bigram model when u is the token before w; the couplet task's table when u is the 上句's
    character at the place of the 下句's w."""
    n_vocab = len(unigram)
    pairs, counts = np.unique(given * n_vocab + following, return_counts=True)
    before = np.bincount(given, minlength=n_vocab)  # [n_vocab] count(u), as a first
    kinds = np.bincount(pairs // n_vocab, minlength=n_vocab)  # [n_vocab] T(u)
    u, w = held_given, held_following
    place = np.searchsorted(pairs, u * n_vocab + w).clip(max=len(pairs) - 1)
    pair_count = np.where(pairs[place] == u * n_vocab + w, counts[place], 0)  # count(u, w)
    seen = before[u] > 0
    p = np.where(seen, (pair_count + kinds[u] * unigram[w]) / np.maximum(before[u] + kinds[u], 1),
                 unigram[w])
    return float(-np.mean(np.log(p)))
