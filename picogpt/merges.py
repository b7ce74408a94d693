"""Learning byte-level BPE merges from a text, as GPT-2's were learned.

It holds `learn_merges`, which turns a text into a merge list, and `bpe_files`, which writes that
list as the two files `Encoder` reads. The text is cut into GPT-2's pieces and each piece spelled
in GPT-2's byte alphabet, so a piece starts as its bytes. Then one rule repeats: count every pair
of neighbouring tokens inside the pieces, each piece weighted by how often it occurs, and merge the
most frequent pair everywhere. Of pairs that occur equally often, the one whose two tokens come
first in Python's string order is merged, so the result depends on the counts alone.

The small steps (`spelled_pieces`, `count_pairs`, `best_pair`, `merge_pair`) are what
docs/bpe.md shows on a tiny text; `learn_merges` does the same, but counts the pieces once and,
after each merge, recounts only the pieces that held the merged pair, so a text of a few MB
takes seconds. No I/O: train.py writes the files.
"""

import heapq
from collections import Counter, defaultdict

from .encoder import PIECES, SPECIAL, bytes_to_unicode, merge_pair
from .errors import PicoGPTError, _

N_BYTES = 256  # byte tokens every byte-level vocabulary starts from: any text encodes


def spelled_pieces(text: str) -> Counter:
    """Each distinct piece of text as a tuple of its bytes in GPT-2's alphabet, with how often
    the piece occurs."""
    spell = bytes_to_unicode()
    return Counter(tuple(spell[b] for b in piece.encode("utf-8"))
                   for piece in PIECES.findall(text))


def count_pairs(pieces: Counter) -> Counter:
    """How often each pair of neighbouring tokens occurs, over pieces weighted by their count."""
    counts = Counter()
    for tokens, n in pieces.items():
        for pair in zip(tokens, tokens[1:]):
            counts[pair] += n
    return counts


def best_pair(counts: Counter) -> tuple[str, str]:
    """The most frequent pair; of pairs equally frequent, the first in string order."""
    return min(counts, key=lambda pair: (-counts[pair], pair))


def learn_merges(text: str, n_vocab: int) -> tuple[list[tuple[str, str]], dict[str, tuple]]:
    """The merges that give a vocabulary of n_vocab tokens (256 bytes, one token per distinct
    merged string, <|endoftext|>), learned from text; and each piece of text as the tokens those
    merges make of it, the ids Encoder will give."""
    spell = bytes_to_unicode()
    counted = Counter(PIECES.findall(text))  # the text is cut once; pieces repeat a lot
    names = list(counted)
    words = [tuple(spell[b] for b in name.encode("utf-8")) for name in names]
    weight = [counted[name] for name in names]
    counts, where = Counter(), defaultdict(set)  # pair -> count; pair -> pieces holding it
    for i, word in enumerate(words):
        for pair in zip(word, word[1:]):
            counts[pair] += weight[i]
            where[pair].add(i)
    heap = [(-n, pair) for pair, n in counts.items()]  # smallest first: best_pair's order
    heapq.heapify(heap)
    merges, tokens = [], set(spell.values())
    while len(tokens) < n_vocab - 1:
        while heap and counts.get(heap[0][1]) != -heap[0][0]:  # a count that has changed
            heapq.heappop(heap)
        if not heap:
            raise PicoGPTError(_("n_vocab={n_vocab} is more than this text can make: merging "
                                 "every pair in it gives {most} tokens. Give --n_vocab {most} or "
                                 "less, or a longer text.").format(n_vocab=n_vocab,
                                                                   most=len(tokens) + 1))

        pair = heapq.heappop(heap)[1]
        merges.append(pair)
        tokens.add(pair[0] + pair[1])  # two merges may spell one token: it is counted once
        changed = set()
        for i in where.pop(pair):
            old = words[i]
            new = merge_pair(old, pair)
            if new == old:  # where keeps pieces that held the pair once and no longer do
                continue
            for p in zip(old, old[1:]):
                counts[p] -= weight[i]
                changed.add(p)
            for p in zip(new, new[1:]):
                counts[p] += weight[i]
                where[p].add(i)
                changed.add(p)
            words[i] = new
        for p in changed:
            if counts[p] > 0:
                heapq.heappush(heap, (-counts[p], p))
            else:
                del counts[p]
    return merges, dict(zip(names, words))


def bpe_files(merges: list[tuple[str, str]]) -> dict:
    """encoder.json (the 256 byte tokens in byte order, then each merge's token in merge order,
    then <|endoftext|> last) and vocab.bpe (a "#version" line, then a merge a line), as the
    values a model folder's files hold."""
    spell = bytes_to_unicode()
    table = {spell[b]: b for b in range(N_BYTES)}
    for a, b in merges:
        table.setdefault(a + b, len(table))
    table[SPECIAL] = len(table)
    lines = "".join(f"{a} {b}\n" for a, b in merges)
    return {"encoder.json": table, "vocab.bpe": f"#version: 0.2 (picogpt.merges)\n{lines}"}
