"""The poems task's data: classical Chinese verse and sayings, read and cleaned.

Owns reading poems (Debian's fortunes-zh files, a collection of chinese-poetry's folder through
files/chinese_poetry.py, or a UTF-8 text with one poem per paragraph, cut by the text task's one
rule) and the cleaner that keeps only classical Chinese. It reads files and must not write,
print or train: what a model meets of the poems (held-out verses, windows, the form it keeps) is
picogpt/tasks/poems.py's.

fortunes-zh is GPL-3.0-or-later: picogpt reads it where Debian installs it and never ships it.
"""

import re
from pathlib import Path

from ..chars import paragraphs
from ..errors import PicoGPTError, _, reason
from ..verse import PUNCTUATION
from ..wordpiece import is_chinese
from .chinese_poetry import read_chinese_poetry
from .store import read_regular

FORTUNES = Path("/usr/share/games/fortunes")  # where Debian's fortunes-zh puts its files
FORTUNE_FILES = ("tang300", "song100", "chinese")  # 唐诗三百首, 宋词一百首, sayings and verse
COLOUR = re.compile(r"\x1b\[[0-9;]*m")  # the terminal colour codes fortune prints titles in
MARKS = set(PUNCTUATION + "、“”‘’「」『』《》（）·…—")
# Characters of modern written Chinese that classical verse and sayings almost never use
# the largest --text read (a novel is a few MB; training in NumPy on a GB would take days)
MAX_TEXT_BYTES = 1 << 30
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


def read_poems(text_file: str | None, collection: str | None = None,
               traditional: bool = False) -> tuple[list[str], str, str]:
    """The poems to learn from, where they came from ("fortunes", "chinese-poetry" or "text"),
    and a line that says what was read: fortunes-zh's, a collection of chinese-poetry's folder
    (in simplified characters unless traditional), or a text's paragraphs."""
    if collection is not None and (text_file is None or not Path(text_file).is_dir()):
        raise PicoGPTError(_("--collection chooses one of chinese-poetry's collections; give "
                             "--text chinese-poetry's folder with it, or drop it."))
    note = ""
    if text_file is None:
        poems, source = read_fortunes(), "fortunes"
        if poems is None:
            raise PicoGPTError(_("no poems to learn from: fortunes-zh is not in {folder}. Run "
                                 "apt-get install fortunes-zh, or give --text a UTF-8 text (one "
                                 "poem a paragraph) or chinese-poetry's folder (python -m "
                                 "picogpt.data chinese-poetry DIR gets it).").format(
                                     folder=FORTUNES))
    elif Path(text_file).is_dir():
        read = read_chinese_poetry(text_file, collection, traditional)
        poems, source = read.poems, "chinese-poetry"
        note = _("read {n} poems of {collection} from {folder}, {script}; {skipped} entries "
                 "skipped (not a poem, or malformed), {repeats} repeats dropped.").format(
            n=len(poems), collection=read.collection, folder=text_file,
            script=_("traditional characters") if traditional else _("simplified with OpenCC"),
            skipped=read.skipped, repeats=read.repeats)
        if read.unreadable:
            note += " " + _("Not read: {files}.").format(files="; ".join(read.unreadable[:5]))
    else:
        poems, source = read_paragraphs(read_text(text_file)), "text"
    if len(poems) < 2:
        raise PicoGPTError(_("{text} holds {n} poems; the poems task needs two or more, one a "
                             "paragraph, to hold some out.").format(text=text_file or FORTUNES,
                                                                   n=len(poems)))
    return poems, source, note


def read_text(text_file: str) -> str:
    """The text file's text, which must be UTF-8, from a regular file of at most
    MAX_TEXT_BYTES."""
    try:
        return read_regular(text_file, MAX_TEXT_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PicoGPTError(_("cannot read {file} as UTF-8 text ({error}); give a UTF-8 text "
                             "file.").format(file=text_file, error=reason(e))
                           ) from None


def read_paragraphs(text: str) -> list[str]:
    """A text's paragraphs (chars.py's one rule, the text task's), each a poem or passage, once
    each."""
    return unique([part.strip() for part in paragraphs(text)])


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
