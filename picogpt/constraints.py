"""Constrained sampling: a form the text must keep, enforced as a mask on the logits.

It holds `masked` (every token a constraint forbids gets a logit of -inf), `Alphabet` (which
tokens of a vocabulary are one Chinese character, and which are ，。 and a line break, read once
per vocabulary from its own decode) and `Verse`, the form of a poem: lines of a fixed length
(`--line 5` is 五言, `--line 7` is 七言), a number of lines (`--lines 4`, a 绝句; 8, a 律诗), an
acrostic (藏头诗, `--acrostic 春夏秋冬`) and a rhyme
(`--rhyme`: each 下句 ends on a character of the first 下句's rhyme group, with `rhymes`, the
table of each token's group, read once per vocabulary by verse.py's judge, 十三辙).

A constraint is any object with `allowed(ids)`, the [n_vocab] bool mask of the tokens that may
follow the ids generated so far, and `done(ids)`, whether the form is complete. generate.py
masks the logits before the filters (temperature, top-k, top-p), so greedy picks the best
allowed token and top-k keeps the k best allowed ones.

A poem is counted this way. A line (句) is its characters and one punctuation mark; lines end in
，and 。 in turn (a couplet, 联), and a line break follows each 。 when the vocabulary has one
(a character vocabulary does; BERT's WordPiece has none). With an acrostic, line i starts with
its i-th character, one hidden character a line as in a classical 藏头诗, and the poem ends
after the last line, with 。 whatever its place; --lines ends it after that many lines the same
way. With a rhyme, the lines that end in 。 (the
second, fourth ...: the 下句) end on a character that pypinyin reads, and each after the first
on one of the first's rhyme group; the lines that end in ，are free, as in regulated verse. With
--line the mask is on the 下句's last character; without, on its mark, which may follow only a
character that rhymes.

The whole text is the poem so far, the prompt included, on the command line and the explore
page alike (`Verse.poem` says which ids count): after a leading start token, and after a title,
which is a first line that holds no ，or 。 and ends in a line break (「春晓\n」, then the poem).
A prompt that breaks the form is refused, and the token that breaks it named.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from . import verse as judge  # the rhyme judge (the name verse is this module's constraint)
from .errors import PicoGPTError, _, text, whole_number
from .wordpiece import is_chinese

COMMA, PERIOD, NEWLINE = "，", "。", "\n"


def masked(logits: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """logits with every token that is not allowed at -inf, so that no filter or pick sees it."""
    # [..., n_vocab], [..., n_vocab] bool -> [..., n_vocab]
    return np.where(allowed, logits, -np.inf).astype(logits.dtype)


@dataclass(frozen=True, eq=False)
class Alphabet:
    """The tokens of a vocabulary that each write one character, by what they decode to."""

    n_vocab: int
    chinese: np.ndarray  # [n_vocab] bool: the token is one Chinese character (a CJK ideograph)
    ids: dict[str, int]  # character -> the one token that writes it (encode gives it back)
    start: int | None = None  # the vocabulary's start token, which a text may begin with

    def only(self, char: str) -> np.ndarray:  # -> [n_vocab] bool
        """The mask that allows the token of char and nothing else."""
        mask = np.zeros(self.n_vocab, bool)
        mask[self.ids[char]] = True
        return mask


@lru_cache(maxsize=4)
def alphabet(encoder, n_vocab: int) -> Alphabet:
    """The Alphabet of encoder's vocabulary, for a model of n_vocab tokens (the rows of wte).

    A token writes a character when it decodes to that one character and encoding the character
    gives that token back: WordPiece's "春" does, its "##春" (the same character inside a word)
    does not, and GPT-2's byte-level BPE writes most Chinese characters as two or three tokens.
    """
    chinese, ids = np.zeros(n_vocab, bool), {}
    for i in range(min(encoder.n_vocab, n_vocab)):  # a token past wte's rows is never picked
        char = encoder.decode([i])
        if len(char) == 1 and encoder.encode(char) == [i]:
            ids[char] = i
            chinese[i] = is_chinese(char)
    return Alphabet(n_vocab, chinese, ids, getattr(encoder, "start", None))


@lru_cache(maxsize=4)
def rhyme_table(encoder, n_vocab: int) -> np.ndarray:  # -> [n_vocab] int
    """Each token's rhyme group (its index in verse.py's GROUPS), for the tokens that
    write one Chinese character pypinyin reads; -1 for every other token. Read once per
    vocabulary, as alphabet is."""
    letters, groups = alphabet(encoder, n_vocab), list(judge.GROUPS)
    table = np.full(n_vocab, -1)
    for char, i in letters.ids.items():
        group = judge.rhyme(char) if letters.chinese[i] else None
        table[i] = -1 if group is None else groups.index(group)
    return table


@dataclass(frozen=True, eq=False)
class Verse:
    """A poem's form (see the module's docstring): lines of `line` characters (None: any length
    from two) ending in ，and 。 in turn; with `acrostic`, line i starts with its i-th character
    and the poem has that many lines; with `lines`, it has that many (None: no end); with
    `rhymes` (rhyme_table's), each 下句 rhymes with the first."""

    alphabet: Alphabet
    acrostic: str = ""
    line: int | None = None
    rhymes: np.ndarray | None = None  # [n_vocab] each token's rhyme group, -1 for none
    lines: int | None = None  # the acrostic's length when there is one (verse checks it)

    @property
    def n_lines(self) -> int | None:
        """How many lines the poem has, the prompt's included; None when it has no end."""
        return len(self.acrostic) if self.acrostic else self.lines

    @property
    def n_vocab(self) -> int:
        return self.alphabet.n_vocab

    def mark(self, n_done: int) -> str:
        """The punctuation that ends line n_done (counting from 0): ，then 。, and 。 last."""
        last = (self.n_lines or 0) - 1
        return PERIOD if n_done % 2 == 1 or n_done == last else COMMA

    def poem(self, ids: Sequence[int]) -> int:
        """Where the poem begins in a text's ids: after a leading start token, and after a
        title (a first line with no ，or 。, ended by a line break)."""
        begin = 1 if list(ids[:1]) == [self.alphabet.start] else 0
        marks, newline = (self.alphabet.ids[COMMA], self.alphabet.ids[PERIOD]), \
            self.alphabet.ids.get(NEWLINE)
        for i in range(begin, len(ids)):
            if ids[i] in marks:
                break
            if ids[i] == newline:
                return i + 1
        return begin

    def position(self, ids: Sequence[int]) -> tuple:
        """Where a text's ids stand in the poem: (lines done, characters of the line being
        written, whether a line break is due, the first 下句's rhyme group or None, the rhyme
        group of the last character written)."""
        place = (0, 0, False, None, -1)
        for token in ids[self.poem(ids) :]:
            place = self.advance(place, token)
        return place

    def advance(self, place: tuple, token: int) -> tuple:
        """The position after token, from the position before it; a complete poem's position
        stays where it is (what follows the poem is not counted)."""
        if self.complete(place):
            return place
        n_done, n_chars, break_due, first, last = place
        ids = self.alphabet.ids
        if token in (ids[COMMA], ids[PERIOD]):  # the first 下句's end sets the rhyme
            first = last if first is None and n_done % 2 == 1 else first
            return n_done + 1, 0, token == ids[PERIOD] and NEWLINE in ids, first, -1
        if token == ids.get(NEWLINE):
            return n_done, n_chars, False, first, last
        group = -1 if self.rhymes is None else int(self.rhymes[token])
        return n_done, n_chars + 1, break_due, first, group

    def allowed(self, ids: Sequence[int]) -> np.ndarray:  # a text's ids -> [n_vocab] bool
        """The tokens that may come next after a text's ids."""
        return self.allowed_at(self.position(ids))

    def allowed_at(self, place: tuple) -> np.ndarray:  # -> [n_vocab] bool
        """The tokens that may come next at a position (position's)."""
        n_done, n_chars, break_due, first, last = place
        if break_due:
            return self.alphabet.only(NEWLINE)
        if n_chars == 0 and self.acrostic:  # the hidden character opens the line
            return self.alphabet.only(self.acrostic[n_done])
        end_of_line = self.alphabet.only(self.mark(n_done))
        rhymed = self.rhymes is not None and n_done % 2 == 1  # a 下句 (line 2, 4 ...)
        if n_chars == self.line:
            return end_of_line
        if rhymed and n_chars == (self.line or 0) - 1:  # its last character rhymes
            return self.alphabet.chinese & self.rhyming(first)
        if self.line is None and n_chars >= 2:  # the model chooses where the line ends
            # last is the rhyme group of the character before (-1: it has none)
            may_end = not rhymed or (last >= 0 and first in (None, last))
            return self.alphabet.chinese | (end_of_line & may_end)
        return self.alphabet.chinese

    def rhyming(self, first: int | None) -> np.ndarray:  # -> [n_vocab] bool
        """The tokens a 下句 may end on: of the first 下句's group, or any that has a group
        when this is the first."""
        return self.rhymes == first if first is not None else self.rhymes >= 0

    def done(self, ids: Sequence[int]) -> bool:
        """Whether a text's ids complete the poem: every line written (the acrostic's, or
        --lines)."""
        return self.complete(self.position(ids))

    def complete(self, place: tuple) -> bool:
        """Whether a position is past the poem's last line."""
        return self.n_lines is not None and place[0] == self.n_lines

    def first_break(self, ids: Sequence[int]) -> int | None:
        """The index in ids of the first token the form does not allow after those before it,
        or None when the text keeps the form (what follows a complete poem is not the form's)."""
        place, begin = (0, 0, False, None, -1), self.poem(ids)
        for i in range(begin, len(ids)):
            if self.complete(place):
                return None
            if not self.allowed_at(place)[ids[i]]:
                return i
            place = self.advance(place, ids[i])
        return None

    def n_tokens(self, ids: Sequence[int] = ()) -> int | None:
        """How many tokens the rest of the poem takes after a text's ids, when its length is
        fixed (a number of lines, and line)."""
        n_lines = self.n_lines
        if n_lines is None or self.line is None:
            return None
        n_breaks = sum(self.mark(i) == PERIOD for i in range(n_lines - 1))  # none after the last
        whole = n_lines * (self.line + 1) + n_breaks * (NEWLINE in self.alphabet.ids)
        return max(0, whole - (len(ids) - self.poem(ids)))


def verse(encoder, acrostic: str | None = None, line: int | None = None,
          n_vocab: int | None = None, rhyme: bool = False, lines: int | None = None) -> Verse:
    """The Verse for --acrostic, --line, --rhyme and --lines, checked against encoder's
    vocabulary (n_vocab: the model's, when its wte has more rows than the vocabulary has
    tokens)."""
    check_verse(acrostic, line, rhyme, lines)
    letters = alphabet(encoder, n_vocab or encoder.n_vocab)
    needed = [c for c in (COMMA, PERIOD) if c not in letters.ids]
    if needed or not letters.chinese.any():
        raise PicoGPTError(_(
            "this vocabulary has no token of its own for {needed}: --acrostic, --line and "
            "--rhyme need each Chinese character and ，。 as one token, as a character vocabulary "
            "or BERT's WordPiece (uer's Chinese GPT-2s) has; GPT-2's byte-level BPE cuts them "
            "into bytes."
        ).format(needed=" ".join(needed) or _("Chinese characters")))
    outside = [c for c in dict.fromkeys(acrostic or "")
               if c not in letters.ids or not letters.chinese[letters.ids[c]]]
    if outside:
        raise PicoGPTError(_(
            "--acrostic {acrostic}: the vocabulary has no Chinese character token for {chars}; "
            "choose characters the model knows."
        ).format(acrostic=acrostic, chars=" ".join(outside)))
    table = rhyme_table(encoder, letters.n_vocab) if rhyme else None
    return Verse(letters, acrostic or "", line, table, lines)


def byte_level_refusal() -> PicoGPTError:
    """What --acrostic, --line and --rhyme say to a model with GPT-2's byte-level vocabulary."""
    return PicoGPTError(_(
        "--acrostic, --line and --rhyme need a vocabulary with one token per Chinese character; "
        "GPT-2's byte-level BPE cuts most into two or three. Run a Chinese model: --hf "
        "uer/gpt2-chinese-poem, or one python -m picogpt.train trained on characters."))


def check_verse(acrostic: str | None, line: int | None, rhyme: bool = False,
                lines: int | None = None) -> None:
    """Raise PicoGPTError if --acrostic, --line, --rhyme or --lines is not a form, before the
    vocabulary is read."""
    if line is not None:
        whole_number("line", line, 1, hint=_("5 for 五言, 7 for 七言"))
    if acrostic is not None:
        text("acrostic", acrostic, _("give the characters that start the lines, as 春夏秋冬"))
    if lines is not None:
        whole_number("lines", lines, 1, hint=_("4 for a 绝句, 8 for a 律诗"))
        if acrostic and lines != len(acrostic):
            raise PicoGPTError(_("--lines {lines} with --acrostic {acrostic}: the acrostic "
                                 "already makes {n} lines, one a character; drop --lines.")
                               .format(lines=lines, acrostic=acrostic, n=len(acrostic)))
    if not isinstance(rhyme, bool):
        raise PicoGPTError(_("rhyme={value!r} is not true or false; --rhyme alone turns the "
                             "rhyme on.").format(value=rhyme))
    if rhyme and line == 1 and acrostic:
        raise PicoGPTError(_("--rhyme with --line 1 and --acrostic: each line's one character "
                             "is the acrostic's, so none is left to rhyme. Use --line 2 or "
                             "more."))
    if rhyme and not judge.available():
        raise PicoGPTError(_("--rhyme reads each character's rhyme with pypinyin, which is not "
                             "installed: pip install pypinyin, or drop --rhyme."))
