"""The unigram and bigram baselines (picogpt/tasks/ngram.py) against counts and formulas written out
here, one held-out token at a time."""

import math
from collections import Counter

import numpy as np
import pytest

from picogpt.tasks.ngram import bigram_loss, unigram_loss


def test_the_baselines_equal_add_one_and_witten_bell_counted_by_hand():
    """Training tokens 1 2 3 1 2 4 1 2 3 0 over a vocabulary of 7; held-out 1 2 3 5 6 1 2: a
    pair seen twice, a pair seen once, a token never seen (5), a token never seen before it (6
    after 5), and a first token (u = 0) seen only at the end of training."""
    train = [1, 2, 3, 1, 2, 4, 1, 2, 3, 0]
    held = [1, 2, 3, 5, 6, 1, 0, 2]
    n_vocab = 7
    counts = Counter(train)

    def p1(w):
        return (counts[w] + 1) / (len(train) + n_vocab)

    pairs = Counter(zip(train, train[1:]))
    firsts = Counter(train[:-1])

    def p2(u, w):
        kinds = len({b for a, b in pairs if a == u})
        if firsts[u] == 0:
            return p1(w)
        return (pairs[u, w] + kinds * p1(w)) / (firsts[u] + kinds)

    unigram = -sum(math.log(p1(w)) for w in held[1:]) / (len(held) - 1)
    bigram = -sum(math.log(p2(u, w)) for u, w in zip(held, held[1:])) / (len(held) - 1)
    train, held = np.array(train), np.array(held)
    assert unigram_loss(train, held, n_vocab) == pytest.approx(unigram, rel=1e-12)
    assert bigram_loss(train, held, n_vocab) == pytest.approx(bigram, rel=1e-12)
    assert bigram < unigram  # 1 -> 2 -> 3 is what the pairs know


def test_the_bigram_model_on_gpt2s_vocabulary_scores_a_pair_it_saw_and_one_it_did_not():
    """Ids as large as GPT-2's last (50256): the pair codes u * n_vocab + w must not overflow,
    and a pair never seen falls back on the unigram guess, scaled by T(u) / (count(u) + T(u))."""
    train = np.array([50256, 464, 3797, 50256, 464, 3290])
    held = np.array([50256, 464, 3797, 50256, 11])
    n_vocab = 50257
    p1 = {w: (c + 1) / (len(train) + n_vocab) for w, c in Counter(train.tolist()).items()}
    p1_unseen = 1 / (len(train) + n_vocab)
    # u = 50256: followed by 464 twice (one kind); u = 464: by 3797 and 3290 (two kinds);
    # u = 3797: by 50256 once (one kind)
    expected = [(2 + 1 * p1[464]) / (2 + 1), (1 + 2 * p1[3797]) / (2 + 2),
                (1 + 1 * p1[50256]) / (1 + 1), (0 + 1 * p1_unseen) / (2 + 1)]
    assert bigram_loss(train, held, n_vocab) == pytest.approx(-np.mean(np.log(expected)), rel=1e-12)
