"""The BPE encoder against tiktoken's GPT-2 encoding, built offline from the same vocabulary."""

import functools
import unicodedata
from pathlib import Path

import pytest

from picogpt.encoder import END_OF_TEXT
from picogpt.files.openai import read_encoder

TRICKY = [
    "", " ", "  ", "\n", "\n\n\n", "\t", " \t \n ", "a", " a", "a ", "hello world", "Hello World",
    "   leading and trailing   ", "word\n\nword", "x  y   z    w", "tabs\tand\r\nwindows\r\n",
    "don't I'll we've they're she'd I'm it's", "DON'T I'LL WE'VE THEY'RE SHE'D I'M IT'S",
    "Don't I'Ll We'Ve They'rE She'D I'm It'S", "'s 't 're 've 'm 'll 'd ''' ' '",
    # contractions match in lower case only: upper case splits these words differently
    "O'REILLY WE'LLAMA THEY'DO IT'SELF Y'ALL I'MAGINE YOU'REPEAT WE'VERY DON'TALK",
    "o'reilly we'llama they'do it'self y'all i'magine you'repeat we'very don'talk",
    # letters from Unicode 15-17 (Kawi, Garay, Kirat Rai, Todhri, Sunuwar, Ol Onal)
    "\U00011f04\U00011f05 \U00010d50\U00010d51 \U00016d43\U00016d44 \U000105c0 \U00011bc0",
    "\U0001e5d0\U0001e5d1",
    "café naïve résumé Ångström façade", "e\u0301 combining", "Straße ǅ ﬁ",
    "日本語のテキスト", "中文文本，标点。", "한국어 텍스트", "Русский текст", "Ελληνικά",
    "עברית", "العربية", "हिन्दी", "ไทย", "emoji 😀🎉👍🏽 👨‍👩‍👧 🇺🇳", "🤖" * 5,
    "numbers 123 4567 1,000,000 3.14159 ١٢٣", "<|endoftext|>", "a<|endoftext|>b",
    "!!!???... ---- ____ ((()))", "mixed123abc_def-ghi", "\u00a0nbsp\u2009thin\u3000ideographic",
    "\x00\x01\x7f control", "def f(x):\n    return x ** 2\n",
]


CORPUS = Path(__file__).parent / "data" / "corpus.txt"  # scripts/make_corpus.py wrote it


@functools.cache
def corpus() -> dict[str, str]:
    """The tricky strings, and the shipped corpus in paragraphs: the same text on every
    machine, whatever it has installed."""
    docs = {f"tricky {i}": text for i, text in enumerate(TRICKY)}
    with open(CORPUS, encoding="utf-8", newline="") as f:  # newline="": \r\n stays as written
        text = f.read()
    docs.update({f"corpus paragraph {i}": part for i, part in enumerate(text.split("\n\n"))})
    docs["corpus, whole"] = text
    return docs


@pytest.fixture(scope="module")
def encoder(vocab_dir):
    return read_encoder(vocab_dir)


@pytest.fixture(scope="module")
def reference(vocab_dir):
    """tiktoken's GPT-2 encoding, made from the genuine files without a download."""
    import tiktoken
    import tiktoken.load
    from tiktoken_ext.openai_public import r50k_pat_str

    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(str(vocab_dir / "vocab.bpe"),
                                                          str(vocab_dir / "encoder.json"))
    return tiktoken.Encoding("gpt2", pat_str=r50k_pat_str, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": END_OF_TEXT}, explicit_n_vocab=50257)


def test_the_corpus_is_varied():
    text = "".join(corpus().values())
    scripts = {unicodedata.name(c, "?").split()[0] for c in text if c.isalpha()}
    assert len(text) > 200_000
    assert {"LATIN", "CJK", "CYRILLIC", "GREEK", "ARABIC", "HEBREW", "DEVANAGARI", "HANGUL",
            "THAI", "HIRAGANA", "KATAKANA"} <= scripts
    assert any(unicodedata.category(c) == "So" and ord(c) > 0x1F000 for c in text)  # emoji


def test_same_ids_as_tiktoken_and_a_lossless_round_trip(encoder, reference):
    mismatches = []
    for name, text in corpus().items():
        ids = encoder.encode(text)
        if ids != reference.encode_ordinary(text):
            mismatches.append(name)
        assert encoder.decode(ids) == text, name
    assert mismatches == []


def test_end_of_text_decodes_and_bad_utf8_becomes_replacement(encoder):
    assert encoder.decode([END_OF_TEXT]) == "<|endoftext|>"
    euro = encoder.encode("€")  # three UTF-8 bytes
    halves = [i for i in range(50257) if len(encoder.token_bytes[i]) == 1
              and encoder.token_bytes[i][0] >= 0x80]
    assert encoder.decode(halves[:3]).count("\ufffd") >= 1
    assert encoder.decode(euro) == "€"
    assert encoder.decode([]) == ""
    with pytest.raises(ValueError, match="50257"):
        encoder.decode([50257])
