"""Write tests/data/corpus.txt: the multi-script text the encoder is compared with tiktoken on.

    python scripts/make_corpus.py

The corpus is committed, so every machine tests the same text (one gathered from the system's
locale catalogs and Python's test data differed between machines and vanished on slim images).
It is generated here, not copied: words drawn from the letters of each script the tests want
(Latin with accents, CJK, kana, Hangul, Cyrillic, Greek, Arabic, Hebrew, Devanagari, Thai),
with digits of several scripts, emoji with modifiers and joiners, combining marks, English
contractions in both cases, runs of spaces, tabs and newlines, and some Python source.
Python's `random.Random(seed)` draws them: its sequence for a seed is the same on every
platform and Python version this project supports.
"""

import random
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "corpus.txt"
SCRIPTS = {  # code point ranges of letters of each script
    "latin": [(0x61, 0x7A), (0x41, 0x5A), (0xE0, 0xFF), (0x100, 0x17F)],
    "cjk": [(0x4E00, 0x9FFF)],
    "hiragana": [(0x3041, 0x3096)], "katakana": [(0x30A1, 0x30FA)],
    "hangul": [(0xAC00, 0xD7A3)], "cyrillic": [(0x410, 0x44F)], "greek": [(0x3B1, 0x3C9)],
    "arabic": [(0x627, 0x64A)], "hebrew": [(0x5D0, 0x5EA)], "devanagari": [(0x915, 0x939)],
    "thai": [(0xE01, 0xE2E)],
}
MARKS = ["\u0301", "\u0308", "\u0327", "\u093f", "\u0e34", "\u064e"]  # combining
DIGITS = ["0123456789", "٠١٢٣٤٥٦٧٨٩", "०१२३४५६७८९", "０１２３４５６７８９"]
EMOJI = ["😀", "🎉", "👍🏽", "👨\u200d👩\u200d👧", "🇺🇳", "🤖", "❤️", "🧑🏿\u200d💻"]
SPACES = [" ", " ", " ", "  ", "   ", "\t", "\n", "\n\n", " \n", "\r\n", "\u3000", "\u00a0"]
PUNCTUATION = [".", ",", "!", "?", "...", "—", "、", "。", "،", "«", "»", "(", ")", "'", '"']
CONTRACTIONS = ["don't", "I'll", "we've", "they're", "she'd", "I'm", "it's", "DON'T", "WE'LL",
                "O'Reilly", "'s", "'t"]


def word(rng: random.Random, script: str) -> str:
    """A pseudo-word of 1 to 8 letters of one script, sometimes with a combining mark."""
    letters = []
    for _ in range(rng.randint(1, 8)):
        low, high = rng.choice(SCRIPTS[script])
        letters.append(chr(rng.randint(low, high)))
    if rng.random() < 0.05:
        letters.insert(rng.randint(1, len(letters)), rng.choice(MARKS))
    return "".join(letters)


def paragraph(rng: random.Random) -> str:
    """About 60 tokens' worth of mixed text, mostly in one script, with everything else mixed
    in at random."""
    script = rng.choice(list(SCRIPTS))
    pieces = []
    for _ in range(rng.randint(20, 80)):
        roll = rng.random()
        if roll < 0.70:
            pieces.append(word(rng, script if rng.random() < 0.8 else rng.choice(list(SCRIPTS))))
        elif roll < 0.78:
            pieces.append("".join(rng.choice(rng.choice(DIGITS)) for _ in range(rng.randint(1, 7))))
        elif roll < 0.84:
            pieces.append(rng.choice(EMOJI) * rng.randint(1, 3))
        elif roll < 0.92:
            pieces.append(rng.choice(PUNCTUATION))
        else:
            pieces.append(rng.choice(CONTRACTIONS))
        pieces.append(rng.choice(SPACES) if rng.random() < 0.9 else "")
    return "".join(pieces)


def main() -> None:
    rng = random.Random(2026)
    parts = [paragraph(rng) for _ in range(400)]
    source = Path(__file__).read_text(encoding="utf-8")  # some Python: indentation, operators
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n\n".join([*parts, source]), encoding="utf-8", newline="")
    print(f"wrote {OUT}: {OUT.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
