"""Two judges of classical verse, fixed here so every measurement uses the same: rhyme and tones.

Rhyme: two characters rhyme when their finals (pypinyin's, in Mandarin) fall in the same group
of the thirteen rhymes of Beijing's folk verse, 十三辙 (发花 a ia ua, 梭波 o e uo, 乜斜 ie üe, 一七
i ü er, 姑苏 u, 怀来 ai uai, 灰堆 ei ui, 遥条 ao iao, 油求 ou iu, 言前 an ian uan üan, 人辰 en in un
ün, 江阳 ang iang uang, 中东 eng ing ong iong), which folds the finals a modern reader hears as
one rhyme. Tones: Mandarin's first and second tones are level (平), the third and fourth oblique
(仄). Both judge by today's Mandarin, which is not Tang Chinese: the entering tone (入声) has
left Mandarin, so a character that was oblique (宅, 白, 国) may be read level here, and some old
rhymes no longer rhyme (docs/couplet.md compares chinese-poetry's own classical tones).

pypinyin is needed only here: `available()` says whether it is there, a run without it says
what it left out of its measurements, and --rhyme (constraints.py's table of rhyme groups, one per
vocabulary) says how to get it. The shares below are what the poems task measures over held-out
regulated poems, for the model, the real poems and a shuffled baseline alike. No I/O.
"""

PUNCTUATION = "，。？！；："  # what ends a 句 in classical verse
GROUPS = {"发花": "a ia ua", "梭波": "o e uo", "乜斜": "ie ve", "一七": "i v er",
          "姑苏": "u", "怀来": "ai uai", "灰堆": "ei ui uei", "遥条": "ao iao",
          "油求": "ou iu iou", "言前": "an ian uan van", "人辰": "en in un uen vn",
          "江阳": "ang iang uang", "中东": "eng ing ong iong ueng"}
RHYME_OF = {final: group for group, finals in GROUPS.items() for final in finals.split()}
LEVEL, OBLIQUE = "平", "仄"


def available() -> bool:
    """Whether pypinyin can be imported (the judges need it)."""
    try:
        import pypinyin  # noqa: F401
    except ImportError:
        return False
    return True


def rhyme(char: str) -> str | None:
    """The character's rhyme group (一七, 江阳 ...), or None for a character pypinyin cannot
    read."""
    from pypinyin import Style, lazy_pinyin

    # strict: the final as spoken (去 qù's is ü, written v), not as written after q (u)
    return RHYME_OF.get(lazy_pinyin(char, style=Style.FINALS, strict=True)[0])


def tone(char: str) -> str | None:
    """平 for Mandarin's first and second tones, 仄 for the third and fourth; None for a
    character pypinyin cannot read. A character whose usual reading is in the neutral tone
    (子 zi, 着 zhe, 了 le) is judged by its first reading that has a tone, in pypinyin's order
    (子 zǐ, 着 zhāo, 了 liǎo): verse gives them their full tone (游子, 君子)."""
    from pypinyin import Style, pinyin

    # heteronym: every reading, the usual one first (as lazy_pinyin gives it)
    readings = pinyin(char, style=Style.TONE3, heteronym=True, neutral_tone_with_five=True)[0]
    toned = [said[-1] for said in readings if said[-1:] in "1234" and said[-1:]]
    return {"1": LEVEL, "2": LEVEL, "3": OBLIQUE, "4": OBLIQUE}.get(toned[0]) if toned else None


def rhymes(a: str, b: str) -> bool | None:
    """Whether two characters rhyme, or None when either cannot be judged."""
    ra, rb = rhyme(a), rhyme(b)
    return None if ra is None or rb is None else ra == rb


def opposition(first: str, second: str) -> tuple[int, int]:
    """At the even places of a 联 (the 2nd, 4th and 6th characters), how many have opposite
    tones in the 上句 and the 下句 (平仄相对), and how many could be judged."""
    pairs = [(tone(a), tone(b)) for a, b in list(zip(first, second))[1::2]]
    judged = [(a, b) for a, b in pairs if a and b]
    return sum(a != b for a, b in judged), len(judged)


def tone_shares(pairs: list[tuple[str, str]]) -> dict:
    """Over 联 (上句, 下句): the share of judged even places whose tones oppose, and the share of
    下句 that end on a level tone."""
    opposed = judged = level = ends = 0
    for first, second in pairs:
        o, j = opposition(first, second)
        opposed, judged = opposed + o, judged + j
        last = tone(second[-1]) if second else None
        level, ends = level + (last == LEVEL), ends + (last is not None)
    return {"opposition": round(opposed / max(1, judged), 4),
            "level_end": round(level / max(1, ends), 4)}


def rhyme_share(pairs: list[tuple[str, str]]) -> tuple[float, int]:
    """Over pairs of characters (the first 下句's last, a later 下句's last), the share that
    rhyme, and how many could be judged (both characters read by pypinyin)."""
    judged = [said for said in (rhymes(a, b) for a, b in pairs) if said is not None]
    return round(sum(judged) / max(1, len(judged)), 4), len(judged)


def shuffled(items: list, lengths: list[int]) -> list:
    """items, each replaced by the next one of the same length (lengths[i] is item i's), the
    last by the first: an item from another poem of the same form, the baseline that says how
    often chance alone rhymes or opposes. An item with no other of its length stays."""
    by_length: dict[int, list[int]] = {}
    for i, length in enumerate(lengths):
        by_length.setdefault(length, []).append(i)
    other = {}
    for group in by_length.values():
        other |= {i: group[(k + 1) % len(group)] for k, i in enumerate(group)}
    return [items[other[i]] for i in range(len(items))]
