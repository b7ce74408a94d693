"""BERT's WordPiece: text to the ids of a vocab.txt and back.

It holds the `WordPiece` class, built from the tokens of vocab.txt (one a line; the line number is
its id) and the settings of tokenizer_config.json that files/vocab_files.py read. It has `Encoder`'s
face, so every command runs either vocabulary unchanged.

Encoding has two stages, as BERT's own tokenizer. Basic tokenization cuts the text into words:
it drops control characters, puts spaces around each Chinese character and each punctuation
mark, and lower-cases and strips accents if the vocabulary was built so. WordPiece then cuts each
word into the longest pieces the vocabulary holds, left to right; a piece inside a word is
spelled with "##" in front. A word it cannot cut becomes [UNK] whole. The ids equal transformers'
BertTokenizer's (tests/test_wordpiece.py); decoding, which BERT leaves spaced ("中 国"), here
gives the text a reader expects ("中国").
"""

import re
import unicodedata

from .errors import PicoGPTError, _

CONTINUES = "##"  # a piece spelled "##ing" continues the word before it
MAX_WORD = 100  # BERT's max_input_chars_per_word: a longer word is [UNK] whole, not cut
# The CJK Unified Ideographs blocks (and their extensions and compatibility forms), the
# characters BERT cuts apart: Chinese writes no spaces, so each character is a word
CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
       (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def is_chinese(char: str) -> bool:
    """Whether char is a CJK ideograph, which BERT makes a word of its own."""
    return any(low <= ord(char) <= high for low, high in CJK)


def is_punctuation(char: str) -> bool:
    """Whether BERT splits at char: Unicode punctuation, and every ASCII symbol ($ ^ ` too)."""
    code = ord(char)
    return (33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126
            or unicodedata.category(char).startswith("P"))


def clean(text: str) -> str:
    """text without U+FFFD and control characters; tabs and newlines stay, as spaces do.
    (str.split, which cuts the words after, cuts at every Unicode space, as BERT does.)"""
    return "".join(c for c in text if c in "\t\n\r" or (  # controls to Unicode, spaces to BERT
        unicodedata.category(c) not in ("Cc", "Cf", "Co", "Cs") and c != "\ufffd"))


def strip_accents(word: str) -> str:
    """word with its accents dropped: é is e followed by a combining accent (Mn) in NFD."""
    return "".join(c for c in unicodedata.normalize("NFD", word)
                   if unicodedata.category(c) != "Mn")


def split_punctuation(word: str) -> list[str]:
    """word cut before and after each punctuation mark: "don't!" -> don ' t !"""
    parts, glued = [], False  # glued: the last part is letters the next letter joins
    for char in word:
        if is_punctuation(char):
            parts.append(char)
            glued = False
        elif glued:
            parts[-1] += char
        else:
            parts.append(char)
            glued = True
    return parts


class WordPiece:
    """BERT's tokenizer: `encode(str) -> list[int]`, `decode(list[int]) -> str`."""

    def __init__(self, tokens: list[str], do_lower_case: bool = True,
                 tokenize_chinese_chars: bool = True, strip_accents: bool | None = None,
                 never_split: list[str] | tuple = (), cls_token: str = "[CLS]",
                 sep_token: str = "[SEP]", unk_token: str = "[UNK]", pad_token: str = "[PAD]",
                 mask_token: str = "[MASK]"):
        self.tokens = list(tokens)  # id -> token
        self.ids = {token: i for i, token in enumerate(self.tokens)}  # a repeated line: the last
        self.n_vocab = len(self.tokens)
        if cls_token not in self.ids:
            raise PicoGPTError(_("the vocabulary has no start token {token} (cls_token), which "
                                 "a text begins after").format(token=repr(cls_token)))
        self.start = self.ids[cls_token]
        self.end, self.unknown = self.ids.get(sep_token), self.ids.get(unk_token)
        self.lower = do_lower_case
        # BERT strips accents when it lower-cases, unless told not to; or when told to
        self.strip = strip_accents if strip_accents is not None else do_lower_case
        self.chinese = tokenize_chinese_chars
        self.never_split = set(never_split)  # words kept as typed: not lower-cased, not cut
        # Special tokens typed in the text are found before anything else and kept whole; the
        # longest first, so that a special token holding another is found whole
        specials = sorted({t for t in (cls_token, sep_token, unk_token, pad_token, mask_token)
                           if t in self.ids}, key=len, reverse=True)
        self.specials = re.compile("(" + "|".join(map(re.escape, specials)) + ")")
        self.word_pieces: dict[str, list[str] | None] = {}  # memo: words repeat a lot

    def words(self, text: str) -> list[str]:
        """Basic tokenization: text (holding no special token) cut into the words WordPiece
        looks up."""
        text = clean(text)
        if self.chinese:
            text = "".join(f" {c} " if is_chinese(c) else c for c in text)
        words = []
        for word in text.split():
            if word in self.never_split:
                words.append(word)
                continue
            if self.lower:  # a character at a time, as BertTokenizer does: Σ is always σ
                word = "".join(c.lower() for c in word)
            if self.strip:
                word = strip_accents(word)
            words += split_punctuation(word)
        return words

    def pieces(self, word: str) -> list[str] | None:
        """word cut greedily into the longest tokens the vocabulary holds, left to right
        ("unaffable" -> un ##aff ##able), or None if it cannot be cut or is too long."""
        if word in self.never_split:  # looked up whole, as BERT's Python tokenizer does
            return [word] if word in self.ids else None
        if word not in self.word_pieces:
            pieces, start = [], 0
            while start < len(word) <= MAX_WORD:
                end = len(word)  # try the longest rest first, then one character shorter
                while end > start and (CONTINUES * (start > 0) + word[start:end]) not in self.ids:
                    end -= 1
                if end == start:  # not even one character is a token here
                    pieces = None
                    break
                pieces.append(CONTINUES * (start > 0) + word[start:end])
                start = end
            self.word_pieces[word] = pieces if len(word) <= MAX_WORD else None
        return self.word_pieces[word]

    def split(self, text: str) -> list[tuple[str, list[str] | None]]:
        """Each word of text with its pieces (None: outside the vocabulary); a special token
        typed in the text is one word that is its own piece."""
        words = []
        for i, part in enumerate(self.specials.split(text)):
            if i % 2:  # re.split puts what the group matched at the odd places
                words.append((part, [part]))
            else:
                words += [(word, self.pieces(word)) for word in self.words(part)]
        return words

    def encode(self, text: str) -> list[int]:
        """Token ids of text, as BertTokenizer's encode(text, add_special_tokens=False)."""
        ids = []
        for word, pieces in self.split(text):
            if pieces is not None:
                ids += [self.ids[piece] for piece in pieces]
            elif self.unknown is not None:
                ids.append(self.unknown)
            else:
                raise PicoGPTError(_("{word} is not in this vocabulary, which has no unknown "
                                     "token to stand for it; write the text with its own tokens")
                                   .format(word=repr(word)))

        return ids

    def outside(self, text: str) -> list[str]:
        """The words of text outside the vocabulary (each becomes [UNK]), each named once."""
        return list(dict.fromkeys(word for word, pieces in self.split(text) if pieces is None))

    def prompt_ids(self, text: str) -> list[int]:
        """The ids the model is fed for a prompt: [CLS] and the text's tokens, as the uer
        models' cards feed them."""
        return [self.start, *self.encode(text)]

    def decode(self, ids: list[int]) -> str:
        """The text of the ids as a reader writes it: pieces joined, no space around Chinese,
        words spaced (BERT's own decode spaces every token)."""
        text, before = [], ""
        for i in ids:
            if not 0 <= i < self.n_vocab:
                raise ValueError(f"token id {i!r} is not one of this vocabulary's "
                                 f"{self.n_vocab} token ids")
            token = self.tokens[i]
            shown = token[len(CONTINUES):] if continues(token) else token
            # the space depends on this token and the one before only, so that the text of
            # ids[:n] is always the start of the text of ids[:n + 1], as streaming needs
            if before and shown and not continues(token) and spaced(before[-1], shown[0]):
                text.append(" ")
            text.append(shown)
            before = shown or before
        return "".join(text)

    def decode_bytes(self, ids: list[int]) -> bytes:
        """The UTF-8 bytes of decode(ids): WordPiece's tokens are whole characters."""
        return self.decode(ids).encode("utf-8")


def continues(token: str) -> bool:
    """Whether token is a piece inside a word ("##ing"; "##" alone is the text "##")."""
    return token.startswith(CONTINUES) and len(token) > len(CONTINUES)


# What decode writes against its neighbour, as English and Chinese are typeset
CLOSING = set(",.!?;:%)]}")  # no space before
OPENING = set("([{")  # no space after
JOINING = set("'-/")  # no space either side: don't, state-of-the-art, and/or


def is_tight(char: str) -> bool:
    """Chinese and Japanese characters and their full-width punctuation: no space either side."""
    code = ord(char)
    return (is_chinese(char) or 0x3000 <= code <= 0x30FF  # CJK punctuation, kana
            or 0xFF00 <= code <= 0xFFEF)  # full-width forms: ，！？（）


def spaced(before: str, after: str) -> bool:
    """Whether a reader puts a space between a word ending in before and one starting with
    after."""
    if is_tight(before) or is_tight(after) or before in JOINING or after in JOINING:
        return False
    if before in OPENING or unicodedata.category(before) in ("Ps", "Pi"):  # ( “
        return False
    if after in CLOSING or unicodedata.category(after) in ("Pe", "Pf"):  # ) ”
        return False
    return not (before in ".,:" and after.isdigit())  # 3.14, 1,000, 12:30
