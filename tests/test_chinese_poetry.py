"""Reading chinese-poetry (files/chinese_poetry.py) from small fake folders in both of its layouts:
GitHub's checkout (全唐诗/, 宋词/ ...) and the npm package (package/dist/quantangshi/ ...). The
corpus itself is never in the repository."""

import json
import sys
from pathlib import Path

import pytest

from picogpt import PicoGPTError
from picogpt.files import chinese_poetry
from picogpt.files.chinese_poetry import find_collection, read_chinese_poetry

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the test extra installs tomli
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]

# Tang shi as chinese-poetry stores them (traditional), in the order the files hold them
TANG = {
    "poet.tang.0.json": [["秦川雄帝宅，函谷壯皇居。", "綺殿千尋起，離宮百雉餘。"]],
    "poet.tang.2000.json": [["白日依山盡，黃河入海流。"]],
    "poet.tang.10000.json": [["床前明月光，疑是地上霜。"]],
}
TANG_POEMS = ["秦川雄帝宅，函谷壯皇居。\n綺殿千尋起，離宮百雉餘。", "白日依山盡，黃河入海流。",
              "床前明月光，疑是地上霜。"]
# poems that only the folders the default must not read hold
ELSEWHERE = {"error": "錯誤之詩一首，不應讀到。", "strains": "平平仄仄平，仄仄平平仄。",
             "tang300": "三百首之詩，重出不讀。", "yuding": "御定之詩，第二版本。",
             "song": "宋人之詩一首。"}
SONGCI = "明月几时有，把酒问青天。"
SHIJING = "关关雎鸠，在河之洲。窈窕淑女，君子好逑。"


def entries(poems: list[list[str]], key: str = "paragraphs") -> list[dict]:
    return [{"author": "某", "title": "某", key: lines} for lines in poems]


def write(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")


def write_corpus(root: Path, layout: str) -> dict[str, Path]:
    """A small chinese-poetry in layout "github" or "npm"; returns the folders a user may give."""
    npm = layout == "npm"
    base = root / "package" / "dist" if npm else root
    tang = base / ("quantangshi" if npm else "全唐诗")
    for name, poems in TANG.items():
        write(tang / name, entries(poems))
    write(tang / "poet.song.0.json", entries([[ELSEWHERE["song"]]]))
    write(tang / "唐诗三百首.json", entries([[ELSEWHERE["tang300"]]]))
    write(tang / "error" / "poet.tang.0.json", entries([[ELSEWHERE["error"]]]))
    write(base / "strains" / "json" / "poet.tang.0.json", [{"strains": [ELSEWHERE["strains"]]}])
    write(base / ("yudingquantangshi" if npm else "御定全唐詩") / "json" / "001.json",
          entries([[ELSEWHERE["yuding"]]]))
    write(base / ("songci" if npm else "宋词") / "ci.song.0.json", entries([[SONGCI]]))
    write(base / ("shijing" if npm else "诗经") / "shijing.json", entries([[SHIJING]], "content"))
    return {"root": root / "package" if npm else root, "tang": tang, "base": base}


@pytest.fixture(params=["github", "npm"])
def corpus(request, tmp_path) -> dict[str, Path]:
    return write_corpus(tmp_path, request.param)


@pytest.mark.parametrize("given", ["root", "tang"])
def test_the_default_is_the_main_tang_files_only_in_reading_order(corpus, given):
    """From the checkout's root, its 全唐诗, the npm package/ or its dist/quantangshi: the
    poet.tang.*.json files (2000 before 10000), never error/, strains/, 唐诗三百首, 御定全唐詩."""
    read = read_chinese_poetry(corpus[given], traditional=True)
    assert read.collection == "tangshi"
    assert read.poems == TANG_POEMS
    assert (read.skipped, read.repeats, read.unreadable) == (0, 0, [])


def test_poems_become_simplified_by_default(corpus):
    read = read_chinese_poetry(corpus["root"])
    # the simplified forms by hand (壯->壮, 綺->绮, 尋->寻, 離->离, 餘->余, 盡->尽, 黃->黄)
    assert read.poems == ["秦川雄帝宅，函谷壮皇居。\n绮殿千寻起，离宫百雉余。",
                          "白日依山尽，黄河入海流。", "床前明月光，疑是地上霜。"]


@pytest.mark.parametrize("name, collection, poem", [
    ("宋词", "songci", SONGCI), ("songci", "songci", SONGCI), ("Song Ci", "songci", SONGCI),
    ("宋詞", "songci", SONGCI), ("诗经", "shijing", SHIJING), ("shijing", "shijing", SHIJING),
    ("宋诗", "songshi", ELSEWHERE["song"]), ("唐诗三百首", "tangshi300", ELSEWHERE["tang300"]),
    ("御定全唐詩", "yudingquantangshi", ELSEWHERE["yuding"]),
])
def test_a_collection_is_chosen_by_either_layouts_name(corpus, name, collection, poem):
    read = read_chinese_poetry(corpus["root"], name, traditional=True)
    assert (read.collection, read.poems) == (collection, [poem])


def test_an_unknown_name_is_one_line_listing_what_the_folder_holds(corpus):
    with pytest.raises(PicoGPTError) as caught:
        find_collection(corpus["root"], "tang poems")
    message = str(caught.value)
    assert "'tang poems' is not a collection" in message and "\n" not in message
    assert ("tangshi (唐诗), songshi (宋诗), tangshi300 (唐诗三百首), songci (宋词), "
            "shijing (诗经), yudingquantangshi (御定全唐詩)") in message


def test_a_collection_the_folder_lacks_is_one_line_listing_what_it_holds(corpus):
    with pytest.raises(PicoGPTError, match=r"holds no songci \(宋词\); it holds tangshi \(唐诗\), "
                                           r"songshi \(宋诗\), tangshi300 \(唐诗三百首\): choose"):
        find_collection(corpus["tang"], "宋词")


def test_a_folder_without_the_tang_shi_names_what_it_has(tmp_path):
    write(tmp_path / "宋词" / "ci.song.0.json", entries([[SONGCI]]))
    with pytest.raises(PicoGPTError, match=r"holds no tangshi \(唐诗\); it holds songci \(宋词\)"):
        read_chinese_poetry(tmp_path)


@pytest.mark.parametrize("folder", ["error", "strains/json", "nothing"])
def test_a_folder_that_is_not_the_corpus_is_one_line(corpus, tmp_path, folder):
    given = {"error": corpus["tang"] / "error", "strains/json": corpus["base"] / "strains" / "json",
             "nothing": tmp_path / "empty"}[folder]
    given.mkdir(exist_ok=True)
    with pytest.raises(PicoGPTError, match="holds none of chinese-poetry's collections"):
        read_chinese_poetry(given)


def test_repeats_are_dropped_by_their_whole_text_after_conversion(tmp_path):
    write(tmp_path / "全唐诗" / "poet.tang.0.json", entries([
        ["白日依山盡，", "黃河入海流。"],
        ["白日依山尽，黄河入海流。"],  # the same text, simplified and cut into one line
        [" 白日依山盡，\u3000黃河入海流。 "],  # the same with spaces
        ["白日依山盡，黃河入海流。", "欲窮千里目，更上一層樓。"],  # the same first line only
    ]))
    read = read_chinese_poetry(tmp_path)
    assert read.poems == ["白日依山尽，\n黄河入海流。",
                          "白日依山尽，黄河入海流。\n欲穷千里目，更上一层楼。"]
    assert read.repeats == 2
    kept = read_chinese_poetry(tmp_path, traditional=True)  # 盡 and 尽 differ until converted
    assert (len(kept.poems), kept.repeats) == (3, 1)


def test_odd_json_is_skipped_and_counted_never_raised(tmp_path, monkeypatch):
    tang = tmp_path / "全唐诗"
    write(tang / "poet.tang.0.json", [
        {"paragraphs": ["春眠不覺曉，處處聞啼鳥。"]},  # the one poem
        "a text", 42, None, ["list"],  # entries that are not objects
        {"title": "no lines"}, {"paragraphs": "春眠不覺曉"}, {"paragraphs": ["春", 1]},
        {"paragraphs": [["春眠不覺曉"]]}, {"paragraphs": [[[[["deep"]]]]]},  # malformed lines
        {"paragraphs": []}, {"paragraphs": ["。", " "]}, {"paragraphs": ["abc"]},  # no Chinese
    ])
    write(tang / "poet.tang.1.json", {"paragraphs": ["not a list of poems"]})
    (tang / "poet.tang.2.json").write_bytes(  # saved as GB 18030, as an old editor might
        '[{"paragraphs": ["春眠不覺曉"]}]'.encode("gb18030"))
    (tang / "poet.tang.3.json").write_text("[" * 100_000 + "]" * 100_000)
    (tang / "poet.tang.4.json").write_text('[{"paragraphs": ["unfinished"')
    (tang / "poet.tang.5.json").write_text(json.dumps([{"paragraphs": ["夜來風雨聲。"]}] * 40_000))
    (tang / "poet.tang.6.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(
        [{"paragraphs": ["花落知多少。"]}], ensure_ascii=False).encode())  # a BOM is fine
    (tang / "poet.tang.7.json").mkdir()  # a folder by a poem file's name: not a file
    monkeypatch.setattr(chinese_poetry, "MAX_FILE_BYTES", 1 << 20)  # poet.tang.5.json: 1.4 MB

    read = read_chinese_poetry(tmp_path, traditional=True)
    assert read.poems == ["春眠不覺曉，處處聞啼鳥。", "花落知多少。"]
    assert read.skipped == 12
    assert read.unreadable == ["poet.tang.1.json: not a list of poems",
                               "poet.tang.2.json: not UTF-8 text",
                               "poet.tang.3.json: nested too deeply", "poet.tang.4.json: not JSON",
                               "poet.tang.5.json: larger than 1 MB"]


def test_without_opencc_one_line_says_what_to_do_and_traditional_still_reads(corpus,
                                                                             monkeypatch):
    monkeypatch.setitem(sys.modules, "opencc", None)  # None: `import opencc` fails
    with pytest.raises(PicoGPTError) as caught:
        read_chinese_poetry(corpus["root"])
    message = str(caught.value)
    assert "pip install opencc" in message and "--traditional" in message and "\n" not in message
    assert read_chinese_poetry(corpus["root"], traditional=True).poems == TANG_POEMS


# ---- which OpenCC each platform installs -----------------------------------------------------

PLATFORMS = {  # the marker environment pip sees; opencc 1.4.2 has wheels for these (2026-08)
    "Linux x86-64": ("linux", "x86_64", "Linux", "posix"),
    "Linux aarch64": ("linux", "aarch64", "Linux", "posix"),
    "macOS arm64": ("darwin", "arm64", "Darwin", "posix"),
    "macOS x86-64": ("darwin", "x86_64", "Darwin", "posix"),
    "Windows x86-64": ("win32", "AMD64", "Windows", "nt"),
}
NO_WHEELS = {  # and none for these: the pure-Python opencc-py installs instead
    "Linux armv7": ("linux", "armv7l", "Linux", "posix"),
    "Windows arm64": ("win32", "ARM64", "Windows", "nt"),
    "FreeBSD": ("freebsd14", "amd64", "FreeBSD", "posix"),
}


def opencc_packages(platform: tuple, python: str) -> list[str]:
    """The OpenCC packages pyproject.toml's dependencies select on platform with python."""
    from packaging.requirements import Requirement

    sys_platform, machine, system, os_name = platform
    environment = {"sys_platform": sys_platform, "platform_machine": machine,
                   "platform_system": system, "os_name": os_name, "python_version": python,
                   "python_full_version": f"{python}.0", "implementation_name": "cpython",
                   "platform_python_implementation": "CPython"}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    chosen = [Requirement(line) for line in project["dependencies"]]
    return [r.name for r in chosen if r.name.startswith("opencc")
            and (r.marker is None or r.marker.evaluate(environment))]


@pytest.mark.parametrize("python", ["3.10", "3.13", "3.14", "3.15"])
@pytest.mark.parametrize("platform", [*PLATFORMS, *NO_WHEELS])
def test_each_platform_gets_one_opencc_that_installs_there(platform, python):
    wheels = platform in PLATFORMS and python != "3.15"  # 3.15: no wheel published yet
    expected = ["opencc"] if wheels else ["opencc-py"]
    assert opencc_packages({**PLATFORMS, **NO_WHEELS}[platform], python) == expected


@pytest.mark.parametrize("traditional", [False, True])
def test_a_lone_surrogate_is_one_skipped_entry(tmp_path, traditional):
    """"床前\\ud800明月光" (valid JSON, no valid text): one entry skipped and counted, in OpenCC
    (by default) and in the hashing that drops repeats (--traditional); it was a traceback."""
    tang = tmp_path / "全唐诗"
    tang.mkdir()
    (tang / "poet.tang.0.json").write_text(
        '[{"paragraphs": ["床前\\ud800明月光"]}, {"paragraphs": ["春眠不覺曉。"]}]')
    read = read_chinese_poetry(tmp_path, traditional=traditional)
    assert read.poems == ["春眠不覺曉。" if traditional else "春眠不觉晓。"]
    assert read.skipped == 1


@pytest.mark.parametrize("flags, block", [
    ({}, {"model": "gpt2", "variant": None}),  # the recipe docs/why-llama.md chose
    ({"model": "llama"}, {"model": "llama", "variant": None}),
    ({"variant": "rope"}, {"model": "gpt2", "variant": "rope"}),
])
def test_a_chinese_poetry_run_takes_ten_minutes_of_steps_and_400_held_out_poems(tmp_path, flags,
                                                                               block):
    """chinese-poetry's defaults are ten minutes of GPT-2's steps with 400 held-out poems (at
    least 100 continuations judged); fortunes-zh (no --text) keeps 200; --model or --variant
    chooses the block."""
    from picogpt.cli.train import build_run
    from picogpt.tasks.poems import defaults

    folders = write_corpus(tmp_path, "npm")
    run, _task = build_run({"task": "poems", "text": str(folders["root"]), "name": "s",
                            "models_dir": str(tmp_path / "models"), **flags})
    assert {"model": run.model, "variant": run.variant} == block
    assert (run.steps, run.options.n_held_out) == (defaults("chinese-poetry")["steps"], 400)
    fortunes, _task = build_run({"task": "poems", "name": "f",
                                 "models_dir": str(tmp_path / "models")})
    assert (fortunes.model, fortunes.options.n_held_out) == ("gpt2", 200)
