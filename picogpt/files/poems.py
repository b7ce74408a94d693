"""The poems task's data: classical Chinese verse and sayings, read, cleaned, split and measured.

Owns reading poems (Debian's fortunes-zh files, chinese-poetry's poet.*.json files, or a UTF-8
text with one poem per paragraph), the cleaner that keeps only classical Chinese, the split
into training poems and held-out verses (whole poems, never trained on), the ids a model trains
on (a start token before each poem), and the share of a continuation's half-lines that keep a
prompt's length. It reads files and must not write, print or train: cli/poems.py does that with
train.py (the baselines are ngram.py's, the held-out loss train.py's).

fortunes-zh is GPL-3.0-or-later: picogpt reads it where Debian installs it and never ships it.
"""

import json
import re
from pathlib import Path

import numpy as np

from ..generate import generate
from ..wordpiece import is_chinese

FORTUNES = Path("/usr/share/games/fortunes")  # where Debian's fortunes-zh puts its files
FORTUNE_FILES = ("tang300", "song100", "chinese")  # 唐诗三百首, 宋词一百首, sayings and verse
COLOUR = re.compile(r"\x1b\[[0-9;]*m")  # the terminal colour codes fortune prints titles in
PUNCTUATION = "，。？！；："  # what ends a half-line in classical verse
MARKS = set(PUNCTUATION + "、“”‘’「」『』《》（）·…—")
# Characters of modern written Chinese that classical verse and sayings almost never use
MODERN = set("的们这吗呢您她它啊吧")


def clean_entry(entry: str) -> str | None:
    """One fortune's poem, its lines joined by newlines, or None if it is not classical
    Chinese. Dropped: colour codes, indentation, titles (《…》, 题目:《…》) and other
    lines without a punctuation mark (其一, dates), attributions ("-- 杜甫《春望》",
    "作者：王维"); then the entry itself if it holds a character that is neither
    Chinese nor Chinese punctuation (Latin letters, digits, tables), or modern
    Chinese (two or more of 的们这吗呢您她它啊吧)."""
    lines = []
    for line in COLOUR.sub("", entry).split("\n"):
        line = line.strip(" \t\u3000\xa0")
        title = line.startswith("题目") or line.startswith("《") and line.endswith("》")
        if title or line.startswith(("--", "作者")) or not any(m in line for m in PUNCTUATION):
            continue
        lines.append(line)
    poem = "\n".join(lines)
    if not poem or not all(is_chinese(c) or c in MARKS or c == "\n" for c in poem):
        return None
    return None if sum(c in MODERN for c in poem) >= 2 else poem


def clean_fortunes(text: str) -> list[str]:
    """The classical poems of a fortune file: entries between lines of "%", each cleaned."""
    entries = re.split(r"^%$", text, flags=re.MULTILINE)
    return [poem for poem in map(clean_entry, entries) if poem is not None]


def read_fortunes(folder: Path | None = None) -> list[str] | None:
    """The poems of fortunes-zh's files in folder (FORTUNES by default), once each; None when
    none is installed."""
    folder = FORTUNES if folder is None else folder
    found = [folder / name for name in FORTUNE_FILES if (folder / name).is_file()]
    if not found:
        return None
    return unique([poem for path in found
                   for poem in clean_fortunes(path.read_text(encoding="utf-8"))])


def read_poetry_json(folder: Path) -> list[str]:
    """The poems of chinese-poetry's poet.*.json files: lists of {"paragraphs": [...]}."""
    poems = []
    for path in sorted(folder.glob("poet.*.json")):
        for poem in json.loads(path.read_text(encoding="utf-8")):
            paragraphs = poem.get("paragraphs") if isinstance(poem, dict) else None
            if isinstance(paragraphs, list) and all(isinstance(p, str) for p in paragraphs):
                poems.append("\n".join(p.strip() for p in paragraphs if p.strip()))
    return unique([poem for poem in poems if poem])


def read_paragraphs(text: str) -> list[str]:
    """A text's paragraphs (blocks between blank lines), each a poem or passage."""
    blocks = re.split(r"\n\s*\n", text.replace("\r\n", "\n"))
    return unique([block.strip() for block in blocks if block.strip()])


def unique(poems: list[str]) -> list[str]:
    """poems without repeats: a poem whose first line came before is dropped (the fortune files
    quote some poems twice), so no held-out verse is also trained on."""
    seen, kept = set(), []
    for poem in poems:
        first = poem.split("\n")[0]
        if first not in seen:
            seen.add(first)
            kept.append(poem)
    return kept


def half_lines(text: str) -> list[str]:
    """The half-lines of a text: the runs of characters each punctuation mark ends."""
    return re.findall(f"([^{PUNCTUATION}\n]+)[{PUNCTUATION}]", text)


def is_verse(poem: str, min_halves: int = 4) -> bool:
    """Whether a poem is regular verse: at least min_halves half-lines, every one five
    characters long, or every one seven."""
    halves = half_lines(poem)
    return {len(half) for half in halves} in ({5}, {7}) and len(halves) >= min_halves


def split_poems(poems: list[str], n_held_out: int, seed: int = 41) -> tuple[list, list]:
    """Training poems and n_held_out verses drawn from the poems at random (the same draw for
    every run's --seed, so baselines and runs compare), at most half of them; paragraphs when
    there is no verse. Never a window of the training text."""
    verses = [i for i, poem in enumerate(poems) if is_verse(poem)]
    if len(verses) < 2:  # a text with no verse (prose, English): hold out whole paragraphs
        verses = list(range(len(poems)))
    held = set(np.random.default_rng(seed).choice(verses, min(n_held_out, len(verses) // 2),
                                                  replace=False).tolist())
    return ([poem for i, poem in enumerate(poems) if i not in held],
            [poem for i, poem in enumerate(poems) if i in held])


def poem_ids(poems: list[str], encoder) -> np.ndarray:
    """The ids a model trains on: each poem after the start token, ending with a line break."""
    ids = []
    for poem in poems:
        ids += [encoder.start, *encoder.encode(poem + "\n")]
    return np.array(ids, dtype=np.int64)


def line_starts(ids: np.ndarray, encoder) -> np.ndarray:
    """Where lines begin in ids (poem_ids'): each start token, and each line break that a line
    follows (not a poem's last, which the next start token follows). A window that begins there
    puts a line's first character at position 1, as a prompt after the start token has it."""
    newline = [i for i in encoder.encode("\n") if i != encoder.unknown]
    before_line = np.isin(ids, newline)
    before_line[:-1] &= ids[1:] != encoder.start
    before_line[-1:] = False  # the text's last token: no line follows it
    return np.flatnonzero((ids == encoder.start) | before_line)


def kept_length(prompt: str, continuation: str) -> tuple[int, int]:
    """How many whole half-lines of continuation have the length of prompt's last one, and how
    many whole half-lines it has (a half-line ends at a punctuation mark)."""
    halves = half_lines(prompt)
    wanted = len(halves[-1]) if halves else len(prompt)
    lengths = [len(half.strip()) for half in half_lines(continuation)]
    return sum(n == wanted for n in lengths), len(lengths)


def first_halves(verses: list[str]) -> list[str]:
    """Each verse's first half-line with its punctuation mark: the prompts of line_share."""
    return [re.match(f"[^{PUNCTUATION}]*[{PUNCTUATION}]?", verse)[0] for verse in verses]


def sample(params: dict, n_head: int, encoder, prompt: str, n_tokens: int, top_k: int = 8,
           seed: int = 0) -> str:
    """A continuation of prompt, top-k sampled, up to n_tokens long or the end token."""
    return encoder.decode(list(generate(encoder.prompt_ids(prompt), params, n_head, n_tokens,
                                        top_k=top_k, seed=seed, encoder=encoder)))


def line_share(params: dict, n_head: int, encoder, prompts: list[str], n_tokens: int = 24,
               top_k: int = 8, seed: int = 0) -> tuple[float, list[str]]:
    """The share of whole half-lines, over a continuation of each prompt (top-k sampling, no
    constraint), that keep the prompt's half-line length; and the continuations."""
    texts = [sample(params, n_head, encoder, prompt, n_tokens, top_k, seed + i)
             for i, prompt in enumerate(prompts)]
    counts = np.array([kept_length(prompt, text) for prompt, text in zip(prompts, texts)])
    return float(counts[:, 0].sum() / max(1, counts[:, 1].sum())), texts
