"""Constrained sampling (constraints.py, `constraint=` in generate, --acrostic and --line): on
random weights, for a WordPiece vocabulary as uer's and a character vocabulary written here, the
text has the asked form every time, greedy and sampled; the mask comes before top-k; a
vocabulary that cannot write the form, or lacks a character, is refused in one line.

The references are the test's own: a regular expression of the form, the allowed tokens read
from the token list, and a loop over gpt2 that masks by the form's template."""

import re

import numpy as np
import pytest
from test_hf_chinese import small  # noqa: F401 (a fixture: uer's folder layout, small shape)
from test_openai import picogpt

from picogpt import generate, gpt2
from picogpt.constraints import masked, verse
from picogpt.errors import PicoGPTError, speaking
from picogpt.generate import generate_samples, generate_steps
from picogpt.train import init_params, tree_map
from picogpt.wordpiece import WordPiece
from scripts.fixtures import bert_vocab

HAN = "[\u4e00-\u9fff]"  # the CJK ideographs both test vocabularies hold (GB2312's, and ours)


class Characters:
    """A character vocabulary: each token one character, a line break among them, a start token
    and no end token (the face of encoder.py's Encoder, as a character-level model has it)."""

    def __init__(self, chars: str):
        self.tokens = ["<start>", "\n", *chars]
        self.ids = {t: i for i, t in enumerate(self.tokens)}
        self.n_vocab, self.start, self.end, self.unknown = len(self.tokens), 0, None, None

    def encode(self, text: str) -> list[int]:
        return [self.ids[c] for c in text if c in self.ids]

    def decode(self, ids: list[int]) -> str:
        return "".join(self.tokens[i] for i in ids)


def wordpiece() -> WordPiece:
    return WordPiece(bert_vocab.chinese_vocab(), do_lower_case=False)


def characters() -> Characters:
    han = "".join(bert_vocab.gb2312_characters()[:300])  # 春夏秋冬 are past 300: add them
    return Characters("，。！、abc" + han + "春夏秋冬山水")


VOCABULARIES = {"wordpiece": wordpiece, "characters": characters}


def random_params(n_vocab: int, seed: int = 0) -> dict:
    """A small random model, its weights 10x the initial scale so that logits differ clearly."""
    hparams = {"n_vocab": n_vocab, "n_ctx": 80, "n_embd": 32, "n_head": 2, "n_layer": 2}
    return tree_map(lambda w: w * 10, init_params(hparams, np.random.default_rng(seed)))


def form(acrostic: str, line: int, breaks: bool) -> str:
    """The regular expression of the whole poem, written out line by line."""
    lines = []
    for i, char in enumerate(acrostic):
        mark = "。" if i % 2 == 1 or i == len(acrostic) - 1 else "，"
        lines.append(f"{char}{HAN}{{{line - 1}}}{mark}")
        if mark == "。" and i < len(acrostic) - 1 and breaks:
            lines.append("\n")
    return "".join(lines)


@pytest.fixture(scope="module", params=list(VOCABULARIES))
def vocabulary(request):
    encoder = VOCABULARIES[request.param]()
    return request.param, encoder, random_params(encoder.n_vocab)


@pytest.mark.parametrize("acrostic,line", [("春夏秋冬", 5), ("春夏秋冬", 7), ("山水", 5),
                                           ("春夏秋", 7)])
def test_the_poem_has_the_asked_form_every_time(vocabulary, acrostic, line):
    name, encoder, params = vocabulary
    constraint = verse(encoder, acrostic, line)
    expected = re.compile(form(acrostic, line, breaks=name == "characters"))
    runs = [{}, *({"top_k": 40, "seed": s} for s in range(4)), {"top_p": 0.95, "seed": 9},
            {"top_k": 8, "temperature": 2.0, "repetition_penalty": 1.3, "seed": 3}]
    for settings in runs:
        ids = list(generate(encoder.prompt_ids("") if name == "wordpiece" else [0], params, 2,
                            60, encoder=encoder, constraint=constraint, **settings))
        assert expected.fullmatch(encoder.decode(ids)), (settings, encoder.decode(ids))
    batch = {}
    for i, token in generate_samples([encoder.start], params, 2, 60, n_samples=3, top_k=20,
                                     seed=5, encoder=encoder, constraint=constraint):
        batch.setdefault(i, []).append(token)
    assert len(batch) == 3 and all(expected.fullmatch(encoder.decode(ids))
                                   for ids in batch.values())


def test_lines_alone_and_an_acrostic_alone(vocabulary):
    name, encoder, params = vocabulary
    ids = list(generate([encoder.start], params, 2, 50, top_k=40, seed=1, encoder=encoder,
                        constraint=verse(encoder, line=7)))
    assert len(ids) == 50  # no acrostic: the poem goes on while tokens remain
    couplet = f"{HAN}{{7}}，{HAN}{{7}}。" + ("\n" if name == "characters" else "")
    assert re.fullmatch(f"({couplet})*({HAN}|[，。\n])*", encoder.decode(ids))
    assert re.match(couplet * 2, encoder.decode(ids))
    free = verse(encoder, acrostic="春夏")
    for seed in range(3):
        text = encoder.decode(list(generate([encoder.start], params, 2, 70, top_k=40, seed=seed,
                                            encoder=encoder, constraint=free)))
        # lines of any length from two, ended as the form says, unless the tokens ran out
        assert re.fullmatch(f"春{HAN}+(，夏{HAN}+(。)?)?", text), text
        assert re.fullmatch(f"春{HAN}+，夏{HAN}+。", text) or len(text) == 70


@pytest.mark.parametrize("line, lines", [(7, 4), (5, 8), (5, 3)])
def test_lines_ends_the_poem_after_that_many_whole_lines(vocabulary, line, lines):
    """--lines 4 is a 绝句, 8 a 律诗: the text ends after that many lines, the last ended by 。,
    however many tokens remain (issue 62: --line 7 --n_tokens 56 ended mid-line)."""
    name, encoder, params = vocabulary
    constraint = verse(encoder, line=line, lines=lines)
    one = f"{HAN}{{{line}}}"
    marks = ["。" if i % 2 == 1 or i == lines - 1 else "，" for i in range(lines)]
    breaks = "\n" if name == "characters" else ""
    poem = re.compile("".join(one + mark + (breaks if mark == "。" and i < lines - 1 else "")
                              for i, mark in enumerate(marks)))
    for seed in range(3):
        ids = list(generate([encoder.start], params, 2, 79, top_k=40, seed=seed,
                            encoder=encoder, constraint=constraint))
        assert poem.fullmatch(encoder.decode(ids)), encoder.decode(ids)


def test_lines_count_the_prompts_and_are_checked():
    """「春夏秋冬山，」 is the first of 4 lines of 5: three more are written. A prompt that holds
    them all, --lines 0, and --lines beside an acrostic of another length are refused."""
    encoder = characters()
    params = random_params(encoder.n_vocab)
    form = verse(encoder, line=5, lines=4)
    prompt = [encoder.start, *encoder.encode("春夏秋冬山，")]
    text = encoder.decode(list(generate(prompt, params, 2, 40, encoder=encoder,
                                        constraint=form)))
    assert re.fullmatch(f"{HAN}{{5}}。\n{HAN}{{5}}，{HAN}{{5}}。", text), text
    with pytest.raises(PicoGPTError, match="the prompt already holds the poem's 2 lines"):
        whole = [encoder.start, *encoder.encode("春夏秋冬山，水春夏秋冬。")]
        generate(whole, params, 2, 9, encoder=encoder, constraint=verse(encoder, line=5, lines=2))
    with pytest.raises(PicoGPTError, match="lines=0 is not a whole number from 1 up"):
        verse(encoder, line=5, lines=0)
    with pytest.raises(PicoGPTError, match="the acrostic already makes 2 lines"):
        verse(encoder, "春夏", 5, lines=4)
    assert verse(encoder, "春夏", 5, lines=2).n_tokens() == 12


def test_greedy_and_top_k_pick_among_the_allowed_tokens_after_the_mask(vocabulary):
    """A loop over gpt2 written here masks by the form's template: greedy is its argmax, and
    each top-k draw is one of its k best allowed tokens. Masking after top-k would fail this:
    the k best tokens overall are rarely the one character a line must start with."""
    name, encoder, params = vocabulary
    acrostic, line = "春夏秋冬", 5
    template = form(acrostic, line, breaks=name == "characters").replace(f"{HAN}{{4}}", "xxxx")
    han = [i for i, t in enumerate(encoder.tokens) if len(t) == 1 and "一" <= t <= "\u9fff"]
    prompt = encoder.prompt_ids("") if name == "wordpiece" else [0]
    constraint = verse(encoder, acrostic, line)

    def best_allowed(ids: list[int], k: int) -> list[int]:
        char = template[len(ids) - len(prompt)]
        choices = han if char == "x" else [encoder.tokens.index(char)]
        logits = gpt2(ids, **params, n_head=2)[-1]
        return sorted(choices, key=lambda i: -logits[i])[:k]

    ids = list(prompt)
    for _ in template:
        ids.append(best_allowed(ids, 1)[0])
    greedy = list(generate(prompt, params, 2, 40, encoder=encoder, constraint=constraint))
    assert greedy == ids[len(prompt):]
    for seed in range(3):
        drawn = list(generate(prompt, params, 2, 40, top_k=3, seed=seed, encoder=encoder,
                              constraint=constraint))
        assert len(drawn) == len(template)
        for t, token in enumerate(drawn):
            assert token in best_allowed([*prompt, *drawn[:t]], 3)


def test_the_candidates_show_the_model_before_the_mask(vocabulary):
    """A Step's `before` is the model's own distribution (the mask is where `after` comes from)."""
    name, encoder, params = vocabulary
    constraint = verse(encoder, "春夏", 5)
    steps = list(generate_steps([encoder.start], params, 2, 12, candidates=5, encoder=encoder,
                                constraint=constraint))
    first = gpt2([encoder.start], **params, n_head=2)[-1].astype(np.float64)
    expected = np.exp(first - first.max()) / np.exp(first - first.max()).sum()
    np.testing.assert_allclose(steps[0].before[:5], np.sort(expected)[::-1][:5], rtol=1e-5)
    token = steps[0].token
    assert token == encoder.encode("春")[0] and steps[0].after[list(steps[0].ids).index(token)] == 1


def test_masked_sets_what_is_not_allowed_to_minus_infinity():
    logits = np.array([[2.0, 1.0, 0.5], [0.0, -1.0, 3.0]], np.float32)
    allowed = np.array([[False, True, True], [True, False, False]])
    out = masked(logits, allowed)
    assert out.dtype == np.float32 and out.shape == (2, 3)
    assert out.tolist() == [[-np.inf, 1.0, 0.5], [0.0, -np.inf, -np.inf]]


def test_the_alphabet_is_read_from_the_vocabulary():
    encoder = wordpiece()
    letters = verse(encoder, line=5).alphabet
    han = {i for i, t in enumerate(encoder.tokens) if len(t) == 1 and "\u4e00" <= t <= "\u9fff"}
    assert set(np.flatnonzero(letters.chinese)) == han  # "##春" writes no character of its own
    assert letters.ids["，"] == encoder.tokens.index("，")
    assert letters.ids["。"] == encoder.tokens.index("。") and "\n" not in letters.ids


def test_gpt2_vocabulary_and_a_missing_character_are_refused_in_one_line(vocab_dir):
    from picogpt.files.folder_vocab import read_vocab

    with pytest.raises(PicoGPTError, match="no token of its own for ，") as error:
        verse(read_vocab(vocab_dir, "-", gpt2=True), line=5)
    assert "\n" not in str(error.value)
    with pytest.raises(PicoGPTError, match="no Chinese character token for 㐀 a;"):
        verse(wordpiece(), "春㐀a")
    with speaking("zh"), pytest.raises(PicoGPTError, match="藏头"):
        verse(wordpiece(), "春㐀")
    with pytest.raises(PicoGPTError, match="line=0 is not a whole number"):
        verse(wordpiece(), line=0)


def test_a_poem_longer_than_n_tokens_is_refused_before_any_token():
    encoder = wordpiece()
    params = random_params(encoder.n_vocab)
    with pytest.raises(PicoGPTError, match="takes 24 tokens, but n_tokens=23"):
        generate([101], params, 2, 23, constraint=verse(encoder, "春夏秋冬", 5))
    with pytest.raises(PicoGPTError, match="made for 21128 tokens, but the model has 50"):
        generate([0], random_params(50), 2, 30, constraint=verse(encoder, "春夏秋冬", 5))


def test_the_command_writes_an_acrostic_on_a_uer_model(small):  # noqa: F811
    folder, _ = small
    for args in ([], ["--top_k", "40", "--seed", "2"], ["--n_samples", "2", "--top_k", "9"]):
        done = picogpt("", "--hf", str(folder), "--acrostic", "春夏秋冬", "--line", "7", *args)
        assert done.returncode == 0, done.stderr
        poems = [t for t in done.stdout.splitlines() if t and not t.startswith("=")]
        assert poems and all(re.fullmatch(form("春夏秋冬", 7, False), p) for p in poems), poems


def test_the_command_writes_a_whole_jueju_with_lines(small):  # noqa: F811
    """--line 7 --lines 4 with tokens to spare: four whole lines, then the text ends."""
    folder, _ = small
    done = picogpt("", "--hf", str(folder), "--line", "7", "--lines", "4", "--n_tokens", "60",
                   "--top_k", "40", "--seed", "1")
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(f"({HAN}{{7}}，{HAN}{{7}}。){{2}}", done.stdout.strip()), done.stdout


def test_a_missing_character_is_refused_before_the_weights_are_read(small, tmp_path):  # noqa: F811
    """The folder's weights are damaged here: the line names the character, not the file."""
    import shutil

    folder = shutil.copytree(small[0], tmp_path / "uer")
    (folder / "model.safetensors").write_bytes(b"not weights")
    done = picogpt("", "--hf", str(folder), "--acrostic", "春𠀀")
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert "𠀀" in done.stderr and "safetensors" not in done.stderr


def test_the_command_refuses_gpt2_before_loading_anything(tmp_path):
    done = picogpt("", "--acrostic", "春夏", "--models_dir", str(tmp_path),
                   "--base_url", "http://127.0.0.1:9")
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert "one token per Chinese character" in done.stderr and not any(tmp_path.iterdir())
    done = picogpt("", "--line", "0", "--models_dir", str(tmp_path))
    assert done.returncode == 1 and "line=0" in done.stderr


def test_every_message_of_the_constraints_has_chinese():
    """Each _("...") in constraints.py, generate.py and cli/generate.py has an entry in the zh_CN
    catalog (a message without one would be shown in English to a Chinese reader)."""
    import ast
    from pathlib import Path

    import picogpt
    from picogpt.errors import catalog

    root = Path(picogpt.__file__).parent
    messages = [node.args[0].value for name in ("constraints.py", "generate.py", "cli/generate.py")
                for node in ast.walk(ast.parse((root / name).read_text()))
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "_"
                and isinstance(node.args[0], ast.Constant)]
    assert len(messages) >= 8
    missing = [m for m in messages if catalog("zh").gettext(m) == m]
    assert not missing, missing


@pytest.mark.parametrize("acrostic, line", [("春夏秋", 5), ("", 7), ("春夏", None)])
def test_first_break_is_the_first_token_the_form_would_have_masked(acrostic, line):
    """first_break walks the text once; it must name the same token as asking allowed() of
    every prefix (a complete poem ends the check), on random texts that mostly keep the form."""
    chars = characters()
    form = verse(chars, acrostic or None, line)
    rng = np.random.default_rng(5)
    pool = [chars.ids[c] for c in "，。\n山水春夏秋冬a"]
    for _ in range(300):
        ids, complete = [], False
        for _i in range(rng.integers(0, 30)):  # a kept token mostly, now and then any of pool
            complete = complete or form.done(ids)
            kept = pool if complete else np.flatnonzero(form.allowed(ids))
            ids.append(int(rng.choice(kept if rng.random() < 0.9 else pool)))
        wanted = None
        for i in range(form.poem(ids), len(ids)):  # a title, if any, is not the poem
            if form.done(ids[:i]):  # what follows a complete poem is free
                break
            if not form.allowed(ids[:i])[ids[i]]:
                wanted = i
                break
        assert form.first_break(ids) == wanted, (ids, wanted)


def test_the_command_line_and_the_page_give_the_same_mask_counting_the_whole_text():
    """「床前明月光，」 with a line of 5: generate (the command line's path) and the explore page's
    session count the prompt as the poem's first line, so both allow a Chinese character next
    (the second line's first), and, five characters on, only 。; at every step the two masks are
    the same array. A title on its own line is not counted; a prompt that breaks the form is
    refused in one line, as the page refuses such a text."""
    import importlib

    from picogpt.chars import Chars, count_chars
    from picogpt.web.session import Session

    chars = Chars(count_chars("床前明月光，疑是地上霜。\n举头望山水春夏秋冬" * 2))
    params = random_params(chars.n_vocab)
    hparams = {"n_vocab": chars.n_vocab, "n_ctx": 80, "n_embd": 32, "n_head": 2, "n_layer": 2}
    generation = importlib.import_module("picogpt.generate")  # the module, not the function
    form = verse(chars, None, 5)
    prompt = chars.prompt_ids("床前明月光，")
    seen, real = [], generation.masked

    def recording(logits, allowed):
        seen.append(allowed.copy())
        return real(logits, allowed)

    generation.masked = recording
    try:
        made = list(generate(prompt, params, 2, 8, constraint=form, encoder=chars))
    finally:
        generation.masked = real
    session = Session(chars, hparams, params, {"name": "t", "kind": "trained"})
    for step in range(len(made)):
        session.set_ids([*prompt, *made[:step]])
        np.testing.assert_array_equal(session.allowed(form)[None], seen[step], err_msg=step)
    assert form.alphabet.chinese[np.flatnonzero(seen[0][0])].all()  # the second line's first
    assert chars.decode(made[5:7]) == "。\n"
    assert form.position(chars.prompt_ids("春夏\n"))[:3] == (0, 0, False)  # a title is not counted
    with pytest.raises(PicoGPTError, match="the prompt does not keep the form: its token 6"):
        generate(chars.prompt_ids("床前明月光疑，"), params, 2, 8, constraint=form, encoder=chars)


# The thirteen rhymes (十三辙) written out here as the test's own reference: the finals, as
# pypinyin spells them with strict=True (ü as v), that each rhyme holds
THIRTEEN = ["a ia ua", "o e uo", "ie ve", "i v er", "u", "ai uai", "ei ui uei", "ao iao",
            "ou iu iou", "an ian uan van", "en in un uen vn", "ang iang uang",
            "eng ing ong iong ueng"]


def rhyme_of(char: str) -> int | None:
    """The test's own rhyme of a character: the index of its final's group in THIRTEEN."""
    from pypinyin import Style, lazy_pinyin

    if len(char) != 1 or not "\u4e00" <= char <= "\u9fff":
        return None
    final = lazy_pinyin(char, style=Style.FINALS, strict=True)[0]
    return next((i for i, finals in enumerate(THIRTEEN) if final in finals.split()), None)


def xia_ju(text: str) -> list[str]:
    """The 下句 of a text: its second, fourth ... line (a line ends in ，or 。)."""
    return re.findall(f"({HAN}+)[，。]", text)[1::2]


def test_the_rhyme_table_holds_each_characters_rhyme_group():
    from picogpt.constraints import rhyme_table

    chars = characters()
    table = rhyme_table(chars, chars.n_vocab)
    assert table.shape == (chars.n_vocab,) and table.dtype.kind == "i"
    reference = [rhyme_of(token) for token in chars.tokens]
    assert [group >= 0 for group in table] == [group is not None for group in reference]
    han = [i for i, group in enumerate(reference) if group is not None]
    assert len(han) > 250
    for i in han:  # two characters share a group in the table when they share one here
        assert [table[j] == table[i] for j in han] == [reference[j] == reference[i] for j in han]
    ids = chars.ids
    assert table[ids["安"]] == table[ids["班"]] != table[ids["八"]] == table[ids["巴"]]  # an, a
    assert table[ids["，"]] == table[ids["a"]] == table[ids["\n"]] == -1


def test_the_rhyme_mask_allows_the_first_xia_jus_rhyme_and_leaves_the_shang_ju_free():
    """With --line 5, a 下句's last character must have a rhyme, and after the first 下句 the
    rhyme of its last; a 上句 ends as it likes. Without --line the mark of a 下句 may follow only
    a character that rhymes."""
    chars = characters()
    han = {i for i, token in enumerate(chars.tokens) if rhyme_of(token) is not None}
    chinese = set(np.flatnonzero(verse(chars).alphabet.chinese))
    form = verse(chars, line=5, rhyme=True)
    allowed = lambda text: set(np.flatnonzero(form.allowed([0, *chars.encode(text)])))  # noqa
    assert allowed("啊阿埃挨") == chinese  # a 上句's last character: free
    assert allowed("啊阿埃挨哎，唉哀皑癌") == han  # the first 下句's: any that rhymes
    an = {i for i in han if rhyme_of(chars.tokens[i]) == rhyme_of("班")}  # 言前
    assert allowed("啊阿埃挨哎，唉哀皑癌班。\n蔼矮艾碍爱，隘鞍氨安") == an
    assert allowed("啊阿埃挨哎，唉哀皑癌班。\n蔼矮艾碍爱，隘鞍氨安") != han
    assert allowed("啊阿埃挨哎，唉哀皑癌班。\n蔼矮艾碍爱，隘鞍氨安扳。\n啊阿埃挨") == chinese
    free = verse(chars, rhyme=True)
    after = lambda text: set(np.flatnonzero(free.allowed([0, *chars.encode(text)])))  # noqa
    period = chars.ids["。"]
    assert period in after("啊阿，唉班。\n蔼矮，隘鞍氨")  # 氨 ān rhymes with 班 bān
    assert after("啊阿，唉班。\n蔼矮，隘鞍艾") == chinese  # 艾 ài does not: no 。 yet
    assert chars.ids["，"] in after("啊阿，唉班。\n蔼矮艾")  # a 上句 ends where it likes


@pytest.mark.parametrize("line", [5, 7])
def test_every_xia_ju_rhymes_with_the_first_on_random_weights(vocabulary, line):
    """Greedy, sampled and batched: every 下句 of the poem ends on the first 下句's rhyme (the
    test's own 十三辙), in the form asked. (Without --line a random model seldom ends a line:
    the mask test above checks that case.)"""
    name, encoder, params = vocabulary
    constraint = verse(encoder, "春夏秋冬山水", line, rhyme=True)
    prompt = encoder.prompt_ids("") if name == "wordpiece" else [0]
    runs = [{}, *({"top_k": 40, "seed": s} for s in range(4)), {"top_p": 0.95, "seed": 9},
            {"top_k": 8, "temperature": 2.0, "seed": 3}]
    texts = [encoder.decode(list(generate(prompt, params, 2, 75, encoder=encoder,
                                          constraint=constraint, **settings)))
             for settings in runs]
    batch = {}
    for i, token in generate_samples(prompt, params, 2, 75, n_samples=3, top_k=20, seed=5,
                                     encoder=encoder, constraint=constraint):
        batch.setdefault(i, []).append(token)
    texts += [encoder.decode(ids) for ids in batch.values()]
    for text in texts:
        lines = xia_ju(text)
        assert [len(x) for x in lines] == [line] * 3, text
        assert re.fullmatch(f"春{HAN}+，夏{HAN}+。\n?秋{HAN}+，冬{HAN}+。\n?山{HAN}+，水{HAN}+。",
                            text), text
        rhymes = [rhyme_of(x[-1]) for x in lines]
        assert rhymes[0] is not None and rhymes == [rhymes[0]] * 3, (text, rhymes)


def test_the_rhyme_is_refused_where_it_cannot_be_kept(monkeypatch):
    from picogpt import verse as judge

    with pytest.raises(PicoGPTError, match="rhyme='yes' is not true or false"):
        verse(characters(), rhyme="yes")
    with pytest.raises(PicoGPTError, match="--line 2 or more"):
        verse(characters(), "春夏", 1, rhyme=True)
    monkeypatch.setattr(judge, "available", lambda: False)
    with pytest.raises(PicoGPTError, match="pip install pypinyin") as error:
        verse(characters(), line=5, rhyme=True)
    assert "\n" not in str(error.value)
    verse(characters(), line=5)  # without --rhyme, pypinyin is not needed


def test_a_couplet_model_refuses_the_rhyme_as_it_refuses_the_other_forms():
    from picogpt.cli.couplet import refuse_gpt_only

    refuse_gpt_only({"rhyme": False, "line": None})  # not given: nothing to refuse
    with pytest.raises(PicoGPTError, match="--rhyme is for a GPT-2"):
        refuse_gpt_only({"rhyme": True})


def test_the_command_rhymes_with_the_prompts_first_xia_ju(small):  # noqa: F811
    """On the command line the prompt is the poem's start: 鸟 (niǎo, 遥条) ends its first 下句,
    so every 下句 the model writes ends on 遥条, whatever the sampler."""
    folder, _ = small
    prompt = "春眠不觉晓，处处闻啼鸟。"
    for args in ([], ["--top_k", "40", "--seed", "2"], ["--n_samples", "2", "--top_k", "9"]):
        done = picogpt(prompt, "--hf", str(folder), "--line", "5", "--rhyme", "--n_tokens",
                       "24", *args)
        assert done.returncode == 0, done.stderr
        texts = [t for t in done.stdout.splitlines() if t and not t.startswith("=")]
        for text in texts:
            lines = xia_ju(prompt + text)
            assert len(lines) == 3 and {rhyme_of(x[-1]) for x in lines} == {rhyme_of("鸟")}, text
