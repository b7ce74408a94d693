"""The couplet task (tasks/couplet.py, `python -m picogpt.train --task couplet`) and a couplet
model on the command line: the pairs of a poem, the held-out split, the baselines against counts
made here, a CI-sized run on a parallel text written here that beats its aligned table, both of
chinese-poetry's layouts in simplified characters, the 下句's length, --score against a float64
forward, and what only a GPT-2 takes refused in one line."""

import doctest
import importlib
import json
import shutil

import numpy as np
import pytest
from test_openai import assert_one_line_error, picogpt

from picogpt.cli.train import main
from picogpt.files.loaded_model import load_model
from picogpt.tasks import couplet
from picogpt.tasks.ngram import aligned_loss, unigram_probs
from picogpt.transformer import decode, encode, logits
from picogpt.transformer.decoding import answer_each

# Traditional characters whose simplified forms differ, and their simplified forms
TRADITIONAL, SIMPLIFIED = "風雲龍鳥東長門開書車馬魚", "风云龙鸟东长门开书车马鱼"
MIRROR = dict(zip(TRADITIONAL, TRADITIONAL[::-1]))  # what the 下句 answers each character with


def poem(rng, length: int = 5, n_pairs: int = 4) -> list[str]:
    """A poem's lines: each 下句 is its 上句 backwards, each character answered by MIRROR's, so
    character i of the 下句 answers character L-1-i of the 上句: a table of aligned places
    cannot tell it, cross-attention can."""
    lines = []
    for _ in range(n_pairs):
        first = "".join(rng.choice(list(TRADITIONAL), length))
        lines.append(f"{first}，{''.join(MIRROR[c] for c in reversed(first))}。")
    return lines


def write_corpus(root, layout: str, n_poems: int = 300, seed: int = 0):
    """A chinese-poetry folder in the npm package's layout or the GitHub checkout's."""
    rng = np.random.default_rng(seed)
    poems = [{"author": "某", "title": str(i), "paragraphs": poem(rng, 5 if i % 3 else 7)}
             for i in range(n_poems)]
    folder = root / ("package/dist/quantangshi" if layout == "npm" else "全唐诗")
    folder.mkdir(parents=True)
    for part in range(2):
        (folder / f"poet.tang.{part * 1000}.json").write_text(
            json.dumps(poems[part::2], ensure_ascii=False), encoding="utf-8")
    return root / "package" if layout == "npm" else root


def test_a_poems_pairs_are_its_lians_of_five_or_seven_characters():
    text = "床前明月光，疑是地上霜。\n举头望明月，低头思故乡。\n三字句，四个字句。"
    assert couplet.pairs(text) == [("床前明月光", "疑是地上霜", 0), ("举头望明月", "低头思故乡", 1)]
    regulated = "\n".join(["甲乙丙丁戊，己庚辛壬癸。"] * 4)
    assert couplet.is_regulated(regulated)
    assert not couplet.is_regulated(regulated + "\n子丑寅卯辰，巳午未申酉。")


def test_no_held_out_pair_is_trained_on_and_the_middle_lians_are_marked():
    rng = np.random.default_rng(1)
    poems = ["\n".join(poem(rng)) for _ in range(40)] + ["\n".join(poem(rng, n_pairs=2))] * 3
    train, held = couplet.split(poems, 10)
    assert held and not {(a, b) for a, b, _ in held} & {(a, b) for a, b, _ in train}
    assert {middle for _, _, middle in train} == {True, False}  # 律诗: 联 1 and 2 only
    assert sum(middle for _, _, middle in train + held) == 2 * 40  # each 律诗's 颔联 and 颈联


def test_the_baselines_are_the_counts_of_the_held_out_tokens():
    """The unigram and the aligned table, against probabilities counted here; the end of the
    下句 gets the unigram's probability of an end in both."""
    from picogpt.chars import Chars

    train_rows = [("甲乙", "丙丁", False), ("甲丙", "乙丁", True), ("乙甲", "丁丙", False)]
    held_rows = [("甲乙", "丁丙", True)]
    encoder = Chars(["甲", "乙", "丙", "丁", "<|unknown|>", "<|start|>"])
    train, held = couplet.as_ids(train_rows, encoder), couplet.as_ids(held_rows, encoder)
    got = couplet.baselines(train, held, encoder.n_vocab, encoder.end)
    outs = [encoder.encode(b) + [encoder.end] for _, b, _ in train_rows]
    counts = np.bincount([i for out in outs for i in out], minlength=6) + 1
    unigram = counts / counts.sum()
    held_ids = encoder.encode("丁丙") + [encoder.end]
    assert got["unigram"] == pytest.approx(-np.mean(np.log(unigram[held_ids])), abs=1e-4)
    u = np.array(encoder.encode("甲乙甲丙乙甲"))
    w = np.array(encoder.encode("丙丁乙丁丁丙"))
    chars = aligned_loss(u, w, np.array(encoder.encode("甲乙")), np.array(encoder.encode("丁丙")),
                         unigram_probs(np.concatenate([np.array(o) for o in outs]), 6))
    expected = (2 * chars - np.log(unigram[encoder.end])) / 3
    assert got["aligned"] == pytest.approx(expected, abs=1e-4)
    assert got["aligned_middle"] == got["aligned"]  # the one held-out pair is a middle one


@pytest.fixture(scope="module")
def ci_run(tmp_path_factory):
    """A CI-sized run on the npm layout of a corpus the test writes, in seconds: two encoder
    blocks and three decoder blocks, which the folder must load as (a check of its tensors once
    counted only a GPT-2's h0, h1 ... and refused any encoder of two blocks)."""
    root = tmp_path_factory.mktemp("couplet")
    text = write_corpus(root, "npm")
    models = root / "models"
    done = picogpt(str(text), "--task", "couplet", "--name", "dui", "--models_dir", str(models),
                   "--n_layer", "2", "--n_dec_layer", "3", "--n_head", "2", "--n_embd", "32",
                   "--n_batch", "32",
                   "--steps", "300", "--lr", "3e-3", "--curve_every", "100", "--n_held_out", "30",
                   entry=main)
    return root, models, done


def test_a_ci_sized_run_beats_its_aligned_table_and_writes_simplified_characters(ci_run):
    _root, models, done = ci_run
    assert done.returncode == 0, done.stderr
    curve = json.loads((models / "dui" / "curve.json").read_text(encoding="utf-8"))
    best = next(m for m in curve["measured"] if m["step"] == curve["best"]["step"])
    assert best["held_out"] < curve["baselines"]["aligned"] - 0.3
    tokens = json.loads((models / "dui" / "chars.json").read_text(encoding="utf-8"))
    assert set(SIMPLIFIED) <= set(tokens) and not set(TRADITIONAL) - set(SIMPLIFIED) & set(tokens)
    assert "simplified with OpenCC" in done.stderr and "aligned table" in done.stderr


def test_the_github_layout_reads_the_same_poems(tmp_path):
    from picogpt.files.poems import read_poems

    npm = read_poems(str(write_corpus(tmp_path / "a", "npm")))
    github = read_poems(str(write_corpus(tmp_path / "b", "github")))
    assert npm[0] == github[0] and npm[1] == github[1] == "chinese-poetry"
    assert all(c not in "".join(npm[0]) for c in set(TRADITIONAL) - set(SIMPLIFIED))


def test_the_command_answers_a_shang_ju_with_a_xia_ju_of_its_length(ci_run):
    """Every sampler flag and --n_samples: each 下句 as long as its 上句, in the model's own
    characters; greedy is repeatable; a prompt it cannot answer is one line."""
    _root, models, _done = ci_run
    model = ["--model_size", "dui", "--models_dir", str(models)]
    for first in ("风云龙鸟东", "风云龙鸟东长门"):
        for flags in ([], ["--top_k", "3", "--seed", "1"], ["--top_p", "0.9", "--seed", "2"],
                      ["--temperature", "0.5", "--top_k", "8"]):
            ran = picogpt(first, *model, *flags)
            assert ran.returncode == 0, ran.stderr
            line = ran.stdout.strip()
            assert len(line) == len(first) and set(line) <= set(SIMPLIFIED), line
    several = picogpt("风云龙鸟东，", *model, "--n_samples", "3", "--top_k", "5", "--seed", "0")
    lines = [line for line in several.stdout.splitlines() if not line.startswith("=")]
    assert several.returncode == 0 and [len(line) for line in lines] == [5, 5, 5]
    for args, message in ((["海阔凭鱼跃"], "which this model's vocabulary lacks"),
                          ([""], "give a couplet model one 上句"),
                          (["风云", "--line", "5"], "--line is for a GPT-2"),
                          (["风云", "--stop", "x"], "--stop is for a GPT-2"),
                          (["风云", "--explore"], "is a couplet model (an encoder-decoder)")):
        assert_one_line_error(picogpt(*args, *model), message)


def test_the_answer_is_the_one_the_shang_ju_asks_for(ci_run):
    """The 下句 reads its 上句: on 上句 never seen, the greedy 下句 is mostly the corpus's rule
    (character i answers MIRROR's of the 上句's character L-1-i), which a decoder that ignored
    its encoder could not follow past chance (1 in 12), however long and well-formed its lines;
    and the command line writes the same 下句 as the function (--distinct on)."""
    _root, models, _done = ci_run
    loaded = load_model("dui", str(models))
    mirror = dict(zip(SIMPLIFIED, SIMPLIFIED[::-1]))  # MIRROR, in the simplified corpus
    rng = np.random.default_rng(11)
    firsts = ["".join(rng.choice(list(SIMPLIFIED), length)) for length in [5] * 12 + [7] * 12]
    made = answer_each(firsts, loaded.params, loaded.hparams, loaded.encoder)
    expected = ["".join(mirror[c] for c in reversed(first)) for first in firsts]
    right = np.mean([a == b for line, want in zip(made, expected) for a, b in zip(line, want)])
    assert right > 0.6, list(zip(firsts, made))
    ran = picogpt(firsts[0], "--model_size", "dui", "--models_dir", str(models), "--top_k", "1")
    assert ran.returncode == 0, ran.stderr  # --distinct is on by default
    assert ran.stdout.strip() == answer_each(firsts[:1], loaded.params, loaded.hparams,
                                             loaded.encoder, distinct=True)[0]


def test_a_couplet_model_samples_with_its_sampler_json_temperature_included(ci_run, tmp_path):
    """With no sampler flag a couplet model draws as its sampler.json says, temperature
    included, as a GPT-2 does: the same 下句, seed for seed, as those flags typed, and not the
    same as top-k 8 at temperature 1."""
    _root, models, _done = ci_run
    hot = tmp_path / "hot"
    shutil.copytree(models / "dui", hot)
    (hot / "sampler.json").write_text(json.dumps({"top_k": 8, "temperature": 3.0}))
    model = ["--model_size", "hot", "--models_dir", str(tmp_path)]
    first = "风云龙鸟东长门"
    own, typed, cool = [], [], []
    for seed in ("0", "1", "2", "3"):
        ran = picogpt(first, *model, "--seed", seed)
        assert ran.returncode == 0 and "--temperature 3.0" in ran.stderr, ran.stderr
        own.append(ran.stdout.strip())
        typed.append(picogpt(first, *model, "--top_k", "8", "--temperature", "3", "--seed",
                             seed).stdout.strip())
        cool.append(picogpt(first, *model, "--top_k", "8", "--seed", seed).stdout.strip())
    assert own == typed and own != cool, (own, typed, cool)


def test_score_is_the_float64_forward_of_the_pair(ci_run):
    """--score of 「上句，下句」: each character of the 下句 and the end, given the 上句, equal to
    transformer/model.py's forward on the same pair in float64 (its own distribution: no mask)."""
    _root, models, _done = ci_run
    loaded = load_model("dui", str(models))
    encoder, params = loaded.encoder, loaded.params
    model = ["--model_size", "dui", "--models_dir", str(models)]
    ran = picogpt("风云龙鸟东，东长门开书", "--score", "--json", *model)
    assert ran.returncode == 0, ran.stderr
    scored, ids = json.loads(ran.stdout), encoder.encode("东长门开书")
    wide = couplet_float64(params)
    src = np.array([encoder.encode("风云龙鸟东")])
    tgt = np.array([[encoder.start, *ids]])
    memory = encode(src, wide, 2, -1, True)
    out = decode(tgt, memory, wide, 2, -1, np.zeros((1, 5)), True)
    log_p = logits(out[0], wide)
    log_p = log_p - np.log(np.exp(log_p - log_p.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
        - log_p.max(-1, keepdims=True)
    expected = log_p[np.arange(6), [*ids, encoder.end]]
    got = [token["logprob"] for token in scored["tokens"]]
    np.testing.assert_allclose(got, expected, atol=1e-4)  # float32 against float64
    assert scored["n_tokens"] == 6 and scored["tokens"][-1]["text"] == "<|start|>"
    assert_one_line_error(picogpt("风云龙鸟东，西门", "--score", *model), "the 下句 holds 西")
    assert_one_line_error(picogpt("风云龙鸟东", "--score", *model), "give a couplet model a 联")


def couplet_float64(params):
    from picogpt.train import tree_map

    return tree_map(lambda a: a.astype(np.float64), params)


def test_answer_is_a_function_a_learner_imports_and_its_example_runs():
    decoding = importlib.import_module("picogpt.transformer.decoding")
    failed, tried = doctest.testmod(decoding, optionflags=doctest.ELLIPSIS)
    assert tried >= 1 and failed == 0


def mandarin_tone(char: str) -> str | None:
    """平 or 仄 by pypinyin's tone number, written here apart from picogpt/verse.py."""
    from pypinyin import Style, lazy_pinyin

    number = lazy_pinyin(char, style=Style.TONE3, neutral_tone_with_five=True)[0][-1:]
    return {"1": "平", "2": "平", "3": "仄", "4": "仄"}.get(number)


def shares(pairs) -> dict:
    """The opposition at the even places and the level-end share, counted here."""
    even = [(mandarin_tone(a), mandarin_tone(b)) for first, second in pairs
            for a, b in zip(first[1::2], second[1::2])]
    even = [(a, b) for a, b in even if a and b]
    ends = [mandarin_tone(second[-1]) for _first, second in pairs]
    ends = [end for end in ends if end]
    return {"opposition": sum(a != b for a, b in even) / len(even),
            "level_end": ends.count("平") / len(ends)}


def test_the_run_ends_with_the_tones_of_the_models_the_poets_and_a_unigrams_xia_ju(ci_run):
    """The closing lines judge 平仄 on the held-out 联 against the goals, and curve.json keeps the
    shares, on every 联 and on the 颔联/颈联: the model's and the poets' equal to pypinyin's
    tones counted here on the pairs kept (here every held-out 联 is judged and kept)."""
    pytest.importorskip("pypinyin", reason="pip install pypinyin (a dependency of picogpt)")
    _root, models, done = ci_run
    curve = json.loads((models / "dui" / "curve.json").read_text(encoding="utf-8"))
    tones, pairs = curve["finish"]["tones"], curve["finish"]["pairs"]
    middle = [row for row in pairs if row[3]]
    assert tones["every"]["pairs"] == len(pairs) > 50 and tones["middle"]["pairs"] == len(middle)
    assert 0 < len(middle) < len(pairs)
    for which, column in (("model", 1), ("real", 2)):
        for kind, rows in (("every", pairs), ("middle", middle)):
            counted = shares([(row[0], row[column]) for row in rows])
            for key, share in counted.items():
                assert tones[kind][which][key] == pytest.approx(share, abs=1e-4), (kind, which)
    assert set(tones["middle"]["unigram"]) == {"opposition", "level_end"}
    assert "tones opposed at the even places (平仄相对)" in done.stderr
    assert "下句 that end on a level tone (平)" in done.stderr
    assert "(goal ≥ 0.75)" in done.stderr and "(goal ≥ 0.85)" in done.stderr
    real = tones["middle"]["real"]["level_end"], tones["every"]["real"]["level_end"]
    assert "the poets' own {:.2f}, {:.2f}".format(*real) in done.stderr


def test_a_unigram_samplers_xia_ju_reads_nothing_of_the_shang_ju():
    """Lines as long as each 上句, drawn from the probabilities given, never the start token
    (the end) or the unknown one."""
    from picogpt.chars import Chars

    encoder = Chars(["春", "风", "秋", "<|unknown|>", "<|start|>"])
    probs = np.array([0.0, 0.1, 0.3, 0.3, 0.3])  # 春 never; start and unknown are left out
    lines = couplet.unigram_lines(["山水花鸟月", "山水花"] * 200, probs, encoder,
                                  np.random.default_rng(0))
    assert [len(line) for line in lines[:2]] == [5, 3]
    drawn = "".join(lines)
    assert set(drawn) == {"风", "秋"}
    assert drawn.count("秋") / len(drawn) == pytest.approx(0.75, abs=0.03)


def test_without_pypinyin_the_run_says_in_one_line_that_the_tones_were_skipped(tmp_path,
                                                                              monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pypinyin", None)  # `import pypinyin` fails
    models = tmp_path / "models"
    done = picogpt(str(write_corpus(tmp_path, "github", n_poems=60)), "--task", "couplet",
                   "--name", "dui", "--models_dir", str(models), "--n_layer", "1", "--n_head",
                   "2", "--n_embd", "16", "--n_batch", "8", "--steps", "4", "--curve_every",
                   "4", "--n_held_out", "10", entry=main)
    assert done.returncode == 0, done.stderr
    skipped = [line for line in done.stderr.splitlines() if "(平仄)" in line]
    assert skipped == ["picogpt: pypinyin cannot be imported, so the tones (平仄) of the 下句 "
                       "were not judged; pip install pypinyin, then train again to see them."]
    curve = json.loads((models / "dui" / "curve.json").read_text(encoding="utf-8"))
    assert curve["finish"]["tones"] is None


TOKENS = [*"春风秋月山水花鸟云雨江海天地日星", "<|unknown|>", "<|start|>"]  # 18


def small_couplet_folder(models_dir, name: str = "c", extra: dict | None = None,
                         hparams: dict | None = None, vocab: list[str] = TOKENS):
    """A couplet model folder of random weights over TOKENS' rows (vocab is its chars.json)."""
    from picogpt.files.store import save_model
    from picogpt.transformer import init_params

    shape = {"model": "transformer", "norm_first": True, "n_vocab": len(TOKENS), "n_ctx": 16,
             "n_embd": 16, "n_head": 2, "n_layer": 1, "n_dec_layer": 1}
    params = init_params(shape, np.random.default_rng(0))
    save_model(models_dir / name, {**shape, **(hparams or {})}, params, None,
               {"chars.json": vocab, **(extra or {})})
    return models_dir / name


@pytest.mark.parametrize("source", ["the flag", "sampler.json"])
def test_a_top_k_above_the_couplet_vocabulary_is_one_line(tmp_path, source):
    """--top_k 100 (or sampler.json's) on a model of 18 tokens: one line, as a GPT-2's top_k
    past its vocabulary is (it was ValueError: kth out of bounds)."""
    extra = {"sampler.json": {"top_k": 100}} if source == "sampler.json" else {}
    small_couplet_folder(tmp_path, extra=extra)
    flags = ["--top_k", "100"] if source == "the flag" else []
    done = picogpt("春风秋月", "--model_size", "c", "--models_dir", str(tmp_path), *flags)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "picogpt: top_k=100 is not a whole number from 1 to 18; 1 is greedy; leave it unset "
        "for greedy decoding.")


def test_a_corpus_of_few_characters_trains_and_samples_within_its_vocabulary(tmp_path):
    """Poems of three characters (a vocabulary of 5, below the samples' top-k of 8): the run's
    samples and its sampler.json take a k that fits (it ended in a traceback and a .part)."""
    rng = np.random.default_rng(0)

    def line():
        return "".join(rng.choice(list("春风月"), 5))

    text = tmp_path / "few.txt"
    text.write_text("\n\n".join(f"{line()}，{line()}。\n{line()}，{line()}。" for _ in range(40)),
                    encoding="utf-8")
    done = picogpt(str(text), "--task", "couplet", "--name", "few", "--models_dir",
                   str(tmp_path / "models"), "--n_layer", "1", "--n_head", "2", "--n_embd", "16",
                   "--n_batch", "4", "--steps", "4", "--curve_every", "2", "--n_held_out", "4",
                   entry=main)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert json.loads((tmp_path / "models" / "few" / "sampler.json").read_text()) == {"top_k": 5}
    assert not (tmp_path / "models" / "few.part").exists()


def spoil_in_place(path, value: float) -> None:
    """Overwrite the .npy at path with an array of its shape, full of value: the same size, the
    manifest left as it was (still saying finite, with the old CRC-32)."""
    array = np.load(path)
    size = path.stat().st_size
    np.save(path, np.full_like(array, value))
    assert path.stat().st_size == size


@pytest.mark.parametrize("case", ["chars past the rows", "NaN at the same size", "n_ctx 10**15",
                                  "norm_first 'yes'"])
@pytest.mark.parametrize("mode", [[], ["--score"]])
def test_a_couplet_folder_whose_files_disagree_is_one_line(tmp_path, case, mode):
    """A couplet folder's files checked against each other as it loads: a chars.json longer than
    the weights' rows (a broadcasting traceback), NaN weights swapped in under a manifest that
    says finite (IndexError, or nan and exit 0 from --score), an n_ctx no 上句 should reach
    (minutes at 4.7 GB), a norm_first that is not a bool (said to be an unknown model)."""
    vocab = [*TOKENS[:-2], *"甲乙", *TOKENS[-2:]] if case == "chars past the rows" else TOKENS
    hparams = {"n_ctx 10**15": {"n_ctx": 10**15}, "norm_first 'yes'": {"norm_first": "yes"}
               }.get(case, {})
    folder = small_couplet_folder(tmp_path, hparams=hparams, vocab=vocab)
    if case == "NaN at the same size":
        spoil_in_place(folder / "params" / "embed.npy", np.nan)
    prompt = "春风秋月，山水花鸟" if mode else "春风秋月"
    done = picogpt(prompt, "--model_size", "c", "--models_dir", str(tmp_path), *mode)
    said = {"chars past the rows": "vocabulary holds 20 tokens, but its weights have 18 rows",
            "NaN at the same size": "params is missing or damaged",
            "n_ctx 10**15": "n_ctx=1000000000000000 is past the 1024 a couplet model",
            "norm_first 'yes'": "is not Transformer (2017) hparams (it needs positive integers "
                                "n_vocab, n_ctx, n_embd, n_head, n_layer, n_dec_layer; true or "
                                "false norm_first)"}[case]
    assert_one_line_error(done, said)


@pytest.mark.parametrize("change", ["none", "a copy", "8 blocks of 4 KiB flipped"])
def test_the_store_trusts_a_file_by_its_stamp_and_else_by_its_crc(tmp_path, change):
    """params/ as written, copied (every stamp new, the bytes the same: read, CRC-checked), and
    with 8 blocks of 4 KiB flipped inside a file at its size (the stamp changed and the CRC-32
    differs: stale, as a converted store is converted again)."""
    import shutil

    from picogpt.files.store import read_params, write_params

    rng = np.random.default_rng(0)
    arrays = {"wte": rng.normal(size=(64, 256)).astype(np.float32), "ln_f.g": np.ones(256,
                                                                                      np.float32)}
    write_params(tmp_path / "m", arrays.items(), source=None)
    folder = tmp_path / "m"
    if change == "a copy":
        folder = tmp_path / "copy"
        shutil.copytree(tmp_path / "m", folder, copy_function=shutil.copyfile)
    elif change != "none":
        wte = folder / "params" / "wte.npy"
        data = bytearray(wte.read_bytes())
        for block in range(8):
            at = 128 + block * 8192
            data[at : at + 4096] = bytes(255 - b for b in data[at : at + 4096])
        wte.write_bytes(bytes(data))
    read = read_params(folder)
    if change == "8 blocks of 4 KiB flipped":
        assert read is None
    else:
        assert read is not None and np.array_equal(read["wte"], arrays["wte"])
