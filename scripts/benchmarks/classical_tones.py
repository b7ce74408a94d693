"""The Mandarin tone judge (picogpt/verse.py) against chinese-poetry's own classical tones.

chinese-poetry's strains/ files give each Tang poem's tones mark by mark: 平 (level), 仄
(oblique), ○ where a character may be either, at the places of the poem's characters (matched by
the poem's id). The couplet task judges 平仄 by today's Mandarin instead (pypinyin: tones 1 and 2
level, 3 and 4 oblique), which misreads the entering tone (入声): characters that ended in -p, -t,
-k were oblique, and Mandarin spread them over all four tones (宅 zhái, 国 guó, 白 bái read
level). This compares the two on the couplet task's held-out pairs (the same split as
`python -m picogpt.train --task couplet --n_held_out N`, in simplified characters):
- each character both judge: how often they agree, and the characters most often oblique in the
  classical marks but level in Mandarin;
- the two shares the run prints (tones opposed at the 2nd, 4th and 6th places; 下句 ending on a
  level tone), on the real pairs, by each judge, for every 联 and the 颔联/颈联;
- with --model, the model's top-k 8 下句 that curve.json keeps, judged by Mandarin and by each
  character's usual classical mark (its most frequent one in every Tang poem's strains).

    python -m scripts.benchmarks.classical_tones --text chinese-poetry/ [--model models/dui]

The corpus is read, never copied: nothing is written.
"""

import argparse
import json
from collections import Counter
from pathlib import Path

from picogpt import verse
from picogpt.files.chinese_poetry import find_collection, poem_text, read_entries, simplifier
from picogpt.tasks import couplet

LEVEL, OBLIQUE = verse.LEVEL, verse.OBLIQUE


def strains_folder(text: Path) -> Path:
    """strains/json beside the Tang poems: the npm package's dist/strains/json or the GitHub
    checkout's strains/json, under the folder given or a folder above it."""
    for base in (text, *text.parents):
        for place in (base / "dist" / "strains" / "json", base / "strains" / "json"):
            if place.is_dir():
                return place
    raise SystemExit(f"no strains/json folder in or above {text}: give chinese-poetry's folder")


def marked_poems(text: str) -> tuple[list[str], dict[str, str]]:
    """The Tang poems as the couplet task reads them (simplified, each text once, in reading
    order), and for each poem whose marks line up with its characters, its marks: a text as long
    as the poem, 平 仄 or ○ at each character's place."""
    _name, files = find_collection(text)
    strains, convert = strains_folder(Path(text)), simplifier()
    poems, marks, seen = [], {}, set()
    for file in files:
        entries, marked = read_entries(file), read_entries(strains / file.name)
        by_id = {entry.get("id"): entry.get("strains") for entry in marked
                 if isinstance(entry, dict)} if isinstance(marked, list) else {}
        for entry in entries if isinstance(entries, list) else []:
            poem = poem_text(entry)
            if poem is None:
                continue
            simple = convert(poem)
            key = "".join(simple.split())
            if key in seen:
                continue
            seen.add(key)
            poems.append(simple)
            lines = by_id.get(entry.get("id"))
            said = "\n".join(lines) if isinstance(lines, list) else ""
            if len(said) == len(poem) == len(simple):  # mark i is character i's
                marks[simple] = said
    return poems, marks


def pair_marks(poems: list[str], marks: dict[str, str]) -> dict[tuple[str, str], tuple]:
    """(上句, 下句) -> their marks, for each 联 of a marked poem (the first poem's, if two hold
    the same 联)."""
    found = {}
    for poem in poems:
        said = marks.get(poem)
        for match in couplet.COUPLET.finditer(poem) if said else ():
            key = (match[1], match[2])
            if key not in found and len(match[1]) == len(match[2]) and len(match[1]) in (5, 7):
                found[key] = (said[match.start(1):match.end(1)], said[match.start(2):match.end(2)])
    return found


def mark_shares(pairs: list[tuple[str, str]]) -> dict:
    """verse.tone_shares' two shares, from marks (平, 仄; anything else is not judged)."""
    opposed = judged = level = ends = 0
    for first, second in pairs:
        even = [(a, b) for a, b in zip(first[1::2], second[1::2])
                if {a, b} <= {LEVEL, OBLIQUE}]
        opposed, judged = opposed + sum(a != b for a, b in even), judged + len(even)
        level, ends = level + (second[-1] == LEVEL), ends + (second[-1] in (LEVEL, OBLIQUE))
    return {"opposition": round(opposed / max(1, judged), 4),
            "level_end": round(level / max(1, ends), 4)}


def usual_marks(marks: dict[str, str]) -> dict[str, str]:
    """Each character's most frequent mark (平 or 仄) over every marked poem."""
    counts = Counter((char, mark) for poem, said in marks.items() for char, mark in zip(poem, said)
                     if mark in (LEVEL, OBLIQUE))
    usual = {}
    for (char, mark), _n in counts.most_common():
        usual.setdefault(char, mark)
    return usual


def compare(pairs: list[tuple[str, str]], marked: dict) -> dict:
    """Character by character on the pairs' marked 联: the two judges' agreement and the
    characters misread."""
    both, mistaken, level_read_oblique = Counter(), Counter(), Counter()
    for first, second in pairs:
        for text, said in zip((first, second), marked[(first, second)]):
            for char, mark in zip(text, said):
                mandarin = verse.tone(char)
                if mark in (LEVEL, OBLIQUE) and mandarin:
                    both[(mark, mandarin)] += 1
                    if mark == OBLIQUE and mandarin == LEVEL:
                        mistaken[char] += 1
                    elif mark == LEVEL and mandarin == OBLIQUE:
                        level_read_oblique[char] += 1
    total = sum(both.values())
    return {"characters": total,
            "agree": round((both[(LEVEL, LEVEL)] + both[(OBLIQUE, OBLIQUE)]) / total, 4),
            "oblique_read_level": round(both[(OBLIQUE, LEVEL)] / total, 4),
            "level_read_oblique": round(both[(LEVEL, OBLIQUE)] / total, 4),
            "classical_oblique_read_level": round(
                both[(OBLIQUE, LEVEL)] / max(1, both[(OBLIQUE, LEVEL)] + both[(OBLIQUE, OBLIQUE)]),
                4),
            "most_misread_oblique": mistaken.most_common(15),
            "most_misread_level": level_read_oblique.most_common(8),
            "宅": {"classical_oblique_read_level": mistaken["宅"]}}


def measure(text: str, n_held_out: int, model: str | None = None) -> dict:
    """Every figure this prints, as a dict."""
    poems, marks = marked_poems(text)
    _train, held = couplet.split(poems, n_held_out)
    marked = pair_marks(poems, marks)
    rows = [(first, second, middle) for first, second, middle in held
            if (first, second) in marked]
    result = {"poems": len(poems), "marked_poems": len(marks), "held_out_pairs": len(held),
              "marked_pairs": len(rows)}
    pairs = [(first, second) for first, second, _middle in rows]
    result["characters"] = compare(pairs, marked)
    for name, keep in (("every", lambda middle: True), ("middle", lambda middle: middle)):
        chosen = [(first, second) for first, second, middle in rows if keep(middle)]
        result[name] = {"pairs": len(chosen), "mandarin": verse.tone_shares(chosen),
                        "classical": mark_shares([marked[pair] for pair in chosen])}
    if model:
        kept = json.loads((Path(model) / "curve.json").read_text(encoding="utf-8"))
        made = kept["finish"]["pairs"]  # [上句, the model's 下句, the poet's 下句]
        usual = usual_marks(marks)

        def by_table(pairs):
            return mark_shares([("".join(usual.get(c, "?") for c in a),
                                 "".join(usual.get(c, "?") for c in b)) for a, b in pairs])
        for name, column in (("model", 1), ("poets", 2)):
            chosen = [(row[0], row[column]) for row in made]
            result[f"{name}_top_k_8" if name == "model" else name] = {
                "pairs": len(chosen), "mandarin": verse.tone_shares(chosen),
                "usual_classical": by_table(chosen)}
    return result


def report(result: dict) -> list[str]:
    """The figures as lines to read."""
    chars = result["characters"]
    lines = [f"{result['poems']:,} Tang poems, {result['marked_poems']:,} with marks lined up; "
             f"{result['marked_pairs']:,} of {result['held_out_pairs']:,} held-out 联 marked",
             f"characters judged by both: {chars['characters']:,}; the judges agree on "
             f"{chars['agree']:.1%}; classical 仄 read 平 in Mandarin "
             f"{chars['oblique_read_level']:.1%} (of the classical 仄: "
             f"{chars['classical_oblique_read_level']:.1%}); classical 平 read 仄 "
             f"{chars['level_read_oblique']:.1%}",
             "classical 仄, Mandarin 平 (most often): " + " ".join(
                 f"{c}{n}" for c, n in chars["most_misread_oblique"]),
             "classical 平, Mandarin 仄 (most often): " + " ".join(
                 f"{c}{n}" for c, n in chars["most_misread_level"]),
             f"宅 read 平 where the marks say 仄: {chars['宅']['classical_oblique_read_level']} "
             "times", "", "| pairs | judge | opposition at 2, 4, 6 | level end |",
             "|---|---|---|---|"]
    for name, label in (("every", "every held-out 联"), ("middle", "颔联/颈联"),
                        ("model_top_k_8", "the model's top-k 8 下句"), ("poets", "their poets'")):
        if name not in result:
            continue
        row = result[name]
        for judge, shares in row.items():
            if judge != "pairs":
                lines.append(f"| {label} ({row['pairs']:,}) | {judge} | "
                             f"{shares['opposition']:.3f} | {shares['level_end']:.3f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--text", required=True, help="chinese-poetry's folder")
    parser.add_argument("--n_held_out", type=int, default=couplet.Options().n_held_out,
                        help="as the run's --n_held_out: the same held-out pairs")
    parser.add_argument("--model", help="a couplet model folder: judge its curve.json's 下句")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    result = measure(args.text, args.n_held_out, args.model)
    print(json.dumps(result, ensure_ascii=False, indent=1) if args.json
          else "\n".join(report(result)))


if __name__ == "__main__":
    main()
