"""chinese-poetry, read as it comes: the collection a folder holds, its poems, in simplified
characters by default.

chinese-poetry (github.com/chinese-poetry/chinese-poetry, MIT) comes in two layouts, and this
room reads both: the GitHub checkout names its folders in Chinese (全唐诗/, 宋词/, 诗经/ ...), the
npm package `chinese-poetry` in pinyin under package/dist/ (quantangshi/, songci/, shijing/ ...).
Each collection has one name here (tangshi, songci ...) and answers to its folder names and a few
others. The Tang shi, the default, are the main poet.tang.*.json files of 全唐诗/ only: not error/
(mostly the same poems again), strains/ (tones, no text), 唐诗三百首 (the same poems) or
御定全唐詩 (a second edition).

Reading turns each JSON entry into a poem (its lines joined by "\\n", whitespace removed),
converts it to simplified characters with OpenCC (unless asked to keep it traditional), and keeps
one poem per text. Odd JSON never raises: an entry that is not a poem is skipped and counted, a
file that cannot be read is named with its reason. This room reads files; it must not write,
print or train. The corpus is never shipped with picogpt: `python -m picogpt.data chinese-poetry
DIR` downloads it (cli/data.py, files/unpack.py), pinned to COMMIT.
"""

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from ..errors import PicoGPTError, _, reason
from ..wordpiece import is_chinese
from .download import mirror

REPOSITORY = "https://github.com/chinese-poetry/chinese-poetry"
COMMIT = "99ebbef7e1345c0985c44b9fd96a3f9e776f117b"  # master on 2026-05-06
ARCHIVE = f"chinese-poetry-{COMMIT}.tar.gz"  # GitHub's name for it, and a mirror's
# GitHub's .tar.gz of COMMIT and what it unpacks to (2,285 files), about: `git archive` of COMMIT
# without 宋词/ci.db (which our copy lacked) is 91 MB and unpacks to 365 MB
ARCHIVE_MB = 95
UNPACKED_MB = 380
MAX_ARCHIVE_BYTES = 512 << 20  # a download larger than this is not chinese-poetry
MAX_FILE_BYTES = 64 << 20  # a JSON file larger than this is not read (the largest is 4.2 MB)


class Collection(NamedTuple):
    """One collection: its Chinese name, its folder in each layout (GitHub's, npm's under dist/),
    the files inside that folder that hold its poems, and the other names it answers to."""
    chinese: str
    folders: tuple[str, str]
    files: tuple[str, ...]
    aliases: tuple[str, ...] = ()


COLLECTIONS = {
    "tangshi": Collection("唐诗", ("全唐诗", "quantangshi"), ("poet.tang.*.json",),
                          ("tang", "唐詩", "全唐诗", "全唐詩", "quantangshi")),
    "songshi": Collection("宋诗", ("全唐诗", "quantangshi"), ("poet.song.*.json",),
                          ("song", "宋詩")),
    "tangshi300": Collection("唐诗三百首", ("全唐诗", "quantangshi"), ("唐诗三百首.json",),
                             ("唐詩三百首", "tangshisanbaishou")),
    "songci": Collection("宋词", ("宋词", "songci"), ("ci.song.*.json",), ("ci", "宋詞")),
    "songci300": Collection("宋词三百首", ("宋词", "songci"), ("宋词三百首.json",),
                            ("宋詞三百首", "songcisanbaishou")),
    "shijing": Collection("诗经", ("诗经", "shijing"), ("shijing.json",), ("詩經",)),
    "chuci": Collection("楚辞", ("楚辞", "chuci"), ("chuci.json",), ("楚辭",)),
    "yuanqu": Collection("元曲", ("元曲", "yuanqu"), ("yuanqu.json",)),
    "wudaishici": Collection("五代诗词", ("五代诗词", "wudaishici"),
                             ("huajianji/huajianji-*-juan.json", "nantang/poetrys.json"),
                             ("wudai", "五代詩詞")),
    "nalanxingde": Collection("纳兰性德", ("纳兰性德", "nalanxingde"), ("纳兰性德诗集.json",),
                              ("nalan", "納蘭性德")),
    "caocaoshiji": Collection("曹操诗集", ("曹操诗集", "caocaoshiji"), ("caocao.json",),
                              ("caocao", "曹操詩集")),
    "shuimotangshi": Collection("水墨唐诗", ("水墨唐诗", "shuimotangshi"),
                                ("shuimotangshi.json",), ("水墨唐詩",)),
    "yudingquantangshi": Collection("御定全唐詩", ("御定全唐詩", "yudingquantangshi"),
                                    ("json/[0-9][0-9][0-9].json",), ("yuding", "御定全唐诗")),
}
# Folders whose poet.*.json files hold no poems to learn from: error/ (entries the editors
# flagged), strains/ (the tones of each poem), rank/ (search engines' hit counts)
NOT_POEMS = ("error", "strains", "rank")
DEFAULT = "tangshi"
TEXT_KEYS = ("paragraphs", "content", "para")  # where an entry keeps its lines, by collection


class Poems(NamedTuple):
    """What reading a collection gave: its poems (each one text, lines joined by "\\n"), the
    entries skipped as malformed or not a poem, the repeats dropped, and the files that could
    not be read ("name: reason")."""
    collection: str
    poems: list[str]
    skipped: int
    repeats: int
    unreadable: list[str]


def canonical(name: str) -> str | None:
    """The collection's own name for name (any case, spaces, - or _), or None."""
    key = re.sub(r"[\s_\-]", "", name).lower()
    for own, collection in COLLECTIONS.items():
        names = (own, collection.chinese, *collection.folders, *collection.aliases)
        if key in map(str.lower, names):
            return own
    return None


def holdings(folder: Path) -> dict[str, list[Path]]:
    """The collections folder holds, each with its files in reading order: folder may be a
    checkout's root, the npm package's folder or its dist/, or one collection's own folder."""
    found = {}
    if folder.name in NOT_POEMS or folder.parent.name in NOT_POEMS:
        return found
    for name, collection in COLLECTIONS.items():
        places = [base / sub for base in (folder, folder / "dist") for sub in collection.folders]
        for place in [*places, folder]:  # last: folder is the collection's own, perhaps renamed
            files = sorted({path for pattern in collection.files for path in place.glob(pattern)
                            if path.is_file()}, key=reading_order)
            if files:
                found[name] = files
                break
    return found


def reading_order(path: Path) -> list:
    """A key that puts poet.tang.2000.json before poet.tang.10000.json (numbers as numbers)."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(path))]


def listing(found: dict[str, list[Path]]) -> str:
    """The collections found, as "tangshi (唐诗), songshi (宋诗), ..." for a message."""
    return ", ".join(f"{name} ({COLLECTIONS[name].chinese})" for name in found)


def find_collection(path: str | Path, collection: str | None = None) -> tuple[str, list[Path]]:
    """The collection (DEFAULT if None) that path holds, by its own name, and its files."""
    folder = Path(path)
    if not folder.is_dir():
        raise PicoGPTError(_("{path} is not a folder; give chinese-poetry's folder (a checkout, "
                             "the npm package's package/ folder, or python -m picogpt.data "
                             "chinese-poetry DIR to get it).").format(path=path))
    found = holdings(folder)
    if not found:
        raise PicoGPTError(_("{path} holds none of chinese-poetry's collections; give the "
                             "checkout's folder, its 全唐诗 folder, the npm package's package/ "
                             "folder or its dist/quantangshi.").format(path=path))
    name = canonical(str(collection)) if collection is not None else DEFAULT
    if name is None:
        raise PicoGPTError(_("--collection {name!r} is not a collection of chinese-poetry; "
                             "{path} holds {found}.").format(
                                 name=collection, path=path, found=listing(found)))
    if name not in found:
        raise PicoGPTError(_("{path} holds no {name} ({chinese}); it holds {found}: choose one "
                             "with --collection.").format(
                                 path=path, name=name, chinese=COLLECTIONS[name].chinese,
                                 found=listing(found)))
    return name, found[name]


def read_chinese_poetry(path: str | Path, collection: str | None = None,
                        traditional: bool = False) -> Poems:
    """The poems of a collection (the Tang shi by default) in chinese-poetry's folder at path,
    in simplified characters unless traditional, each text once."""
    name, files = find_collection(path, collection)
    convert = (lambda text: text) if traditional else simplifier()
    poems, seen, skipped, repeats, unreadable = [], set(), 0, 0, []
    for file in files:
        entries = read_entries(file)
        if isinstance(entries, str):
            unreadable.append(f"{file.name}: {entries}")
            continue
        for entry in entries:
            poem = poem_text(entry)
            if poem is None:
                skipped += 1
                continue
            poem = convert(poem)
            key = "".join(poem.split())  # one text, however its lines were cut
            if key in seen:
                repeats += 1
                continue
            seen.add(key)
            poems.append(poem)
    return Poems(name, poems, skipped, repeats, unreadable)


def read_entries(file: Path) -> list | str:
    """The entries of a JSON file (a list), or why it cannot be read."""
    try:
        if file.stat().st_size > MAX_FILE_BYTES:
            return _("larger than {mb} MB").format(mb=MAX_FILE_BYTES >> 20)
        entries = json.loads(file.read_bytes().decode("utf-8-sig"))
    except OSError as e:
        return reason(e)
    except UnicodeDecodeError:
        return _("not UTF-8 text")
    except RecursionError:  # json's decoder recurses once per level: [[[[...]]]]
        return _("nested too deeply")
    except ValueError:  # JSONDecodeError, and an integer too long to read
        return _("not JSON")
    return entries if isinstance(entries, list) else _("not a list of poems")


def poem_text(entry) -> str | None:
    """One entry's poem, its lines joined by "\\n" and their whitespace removed; None if the
    entry is malformed (not an object, lines not a list of texts, a lone surrogate) or holds
    no Chinese."""
    if not isinstance(entry, dict):
        return None
    lines = next((entry[key] for key in TEXT_KEYS if key in entry), None)
    if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
        return None
    kept = ["".join(line.split()) for text in lines for line in text.splitlines()]
    poem = "\n".join(line for line in kept if line)
    try:
        poem.encode("utf-8")  # JSON's "\ud800" is a lone surrogate, a character of no text
    except UnicodeEncodeError:
        return None
    return poem if any(is_chinese(char) for char in poem) else None


def simplifier() -> Callable[[str], str]:
    """OpenCC's traditional-to-simplified conversion (its t2s configuration)."""
    try:
        import opencc  # the opencc package where it has wheels, else opencc-py (pyproject.toml)
    except (ImportError, OSError):  # absent, or its compiled library would not load
        raise PicoGPTError(_("cannot turn traditional characters into simplified: the opencc "
                             "package is not installed. Run pip install opencc (or pip install "
                             "opencc-py where opencc will not install), or keep them "
                             "traditional with --traditional.")) from None
    return opencc.OpenCC("t2s").convert


def archive_url(base_url: str | None = None) -> str:
    """Where COMMIT's archive is: a mirror (base_url, else $PICOGPT_BASE_URL) serving it as
    ARCHIVE, else GitHub."""
    base = mirror(base_url)
    return f"{base}/{ARCHIVE}" if base else f"{REPOSITORY}/archive/{COMMIT}.tar.gz"


def check_checkout(folder: Path) -> None:
    """Refuse an unpacked archive that does not hold chinese-poetry's Tang shi."""
    if DEFAULT not in holdings(folder):
        raise PicoGPTError(_("the archive holds no 全唐诗 folder with poet.tang.*.json files: it "
                             "is not chinese-poetry. Check the download address (--base_url or "
                             "PICOGPT_BASE_URL); nothing was written."))
