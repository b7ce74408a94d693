"""The --explain page of a couplet model in Chromium: its numbers are trace_seq2seq's (each
attention weight, as hovered and as painted, each written character's probability, each 对位
score), its three kinds of attention have the axes their kinds have, it says what the model is,
and it fits a 390 px phone and a 1,920 px desktop in Chinese and English in every kind of font."""

import copy
import json
from pathlib import Path

import numpy as np
import pytest
from test_explore_page import ALL_SCREENS, FONTS, LABELS, intersect, named
from test_openai import picogpt
from test_transformer_inside import aligned_and_mirror_heads

from picogpt.files.loaded_model import RANDOM_WEIGHTS, load_model
from picogpt.files.store import save_model
from picogpt.model import softmax
from picogpt.transformer import init_params
from picogpt.transformer.inside import same_position_score, trace_seq2seq

TOKENS = [*"春风秋月山水花鸟云雨江海天地日星", "<|unknown|>", "<|start|>"]
FIRST = "春风秋月山水花"  # a 上句 of seven characters
KINDS = {"enc": "encoder.blocks.{i}.attn.pattern", "dec": "decoder.blocks.{i}.attn.pattern",
         "cross": "decoder.blocks.{i}.cross_attn.pattern"}
# JavaScript: the red of each cell's centre in a map's big canvas, [n_q][n_k]
PAINTED = """([id, nQ, nK]) => { const c = document.getElementById(id), ctx = c.getContext('2d');
    const sx = c.width / nK, sy = c.height / nQ, out = [];
    for (let q = 0; q < nQ; q++) { const row = []; out.push(row);
        for (let k = 0; k < nK; k++)
            row.push(ctx.getImageData(Math.floor((k + 0.5) * sx), Math.floor((q + 0.5) * sy), 1, 1)
                     .data[0]); }
    return out; }"""


def couplet_folder(models_dir: Path, name: str, hparams: dict, params: dict,
                   random: bool) -> None:
    """A couplet model's folder as the couplet task writes it (hparams.json, chars.json,
    params/), and random-weights.txt when its weights were drawn at random."""
    extra = {"chars.json": TOKENS} | ({RANDOM_WEIGHTS: "drawn at random by a test\n"}
                                      if random else {})
    save_model(models_dir / name, {"model": "transformer", "norm_first": True, "n_ctx": 16,
                                   "n_vocab": len(TOKENS), **hparams}, params, None, extra)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    """"rnd": random weights, one encoder block and two decoder blocks (the page must not mix
    the two counts), two heads; "heads": the aligned and the mirror head of
    test_transformer_inside, as a trained model's folder (no random-weights.txt);
    "heads-swapped": the same with the aligned head second."""
    models_dir = tmp_path_factory.mktemp("couplet-page")
    shape = {"n_embd": 16, "n_head": 2, "n_layer": 1, "n_dec_layer": 2}
    couplet_folder(models_dir, "rnd", shape, init_params(
        {**shape, "n_vocab": len(TOKENS)}, np.random.default_rng(0)), random=True)
    hparams, params = aligned_and_mirror_heads(6)
    params["embed"] = np.zeros((len(TOKENS), hparams["n_embd"]), np.float32)
    shape = {key: hparams[key] for key in ("n_embd", "n_head", "n_layer", "n_dec_layer")}
    couplet_folder(models_dir, "heads", shape, params, random=False)
    swapped = copy.deepcopy(params)  # head 1 aligns, head 0 mirrors: q's two halves swapped
    q = swapped["decoder"]["blocks"][0]["cross_attn"]["q"]["w"]
    q[:] = np.concatenate([q[:, q.shape[1] // 2:], q[:, :q.shape[1] // 2]], axis=1)
    couplet_folder(models_dir, "heads-swapped", shape, swapped, random=False)
    return models_dir


def explained(models_dir: Path, name: str, first: str, path: Path, *flags: str) -> str:
    """Run picogpt FIRST --explain PATH on a couplet model: the 下句 it printed."""
    done = picogpt(first, "--model_size", name, "--models_dir", str(models_dir), "--explain",
                   str(path), *flags)
    assert done.returncode == 0, done.stderr
    assert f"wrote {path}" in done.stderr or f"已写入 {path}" in done.stderr, done.stderr
    return done.stdout.strip()


def traced(models_dir: Path, name: str, first: str, second: str):
    """trace_seq2seq of the pair as the decoder ran it: the start token, then the 下句."""
    loaded = load_model(name, str(models_dir))
    encoder = loaded.encoder
    tgt = [encoder.start, *encoder.encode(second)]
    logits, values = trace_seq2seq(encoder.encode(first), tgt, loaded.params, loaded.hparams)
    return loaded, logits, values


def open_page(browser, path: Path, locale: str = "en-US", width: int = 1200):
    phone = width < 500
    context = browser.new_context(locale=locale, viewport={"width": width, "height": 900},
                                  is_mobile=phone, has_touch=phone)
    page = context.new_page()
    page.errors, page.requests = [], []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
    page.on("request", lambda request: page.requests.append(request.url))
    page.goto(path.as_uri())
    return page


def labels(page, axis: str) -> list[str]:
    return page.locator(f"#{axis} .label").all_inner_texts()


def test_the_page_draws_the_traces_three_kinds_of_attention_on_their_axes(models, browser,
                                                                         tmp_path):
    """Every layer and head of each kind: the hover names the trace's weight, each cell is
    painted with its shade, rows and columns are the kind's (上句 × 上句; the characters written
    × the start token and the characters read; the characters written × 上句), and the cross
    picture is as wide as the 上句 and one row taller."""
    path = tmp_path / "page.html"
    second = explained(models, "rnd", FIRST, path, "--top_k", "5", "--seed", "3")
    assert len(second) == len(FIRST)
    loaded, logits, values = traced(models, "rnd", FIRST, second)
    n = len(FIRST)
    page = open_page(browser, path)
    for kind, n_block in (("enc", 1), ("dec", 2), ("cross", 2)):  # the encoder's one block,
        assert page.locator(f"#{kind}-layer option").count() == n_block  # the decoder's two
    axes = {"enc": (list(FIRST), list(FIRST)),
            "dec": ([*second, "end"], ["<|start|>", *second]),
            "cross": ([*second, "end"], list(FIRST))}
    for kind, (rows, cols) in axes.items():
        assert labels(page, f"{kind}-y") == rows and labels(page, f"{kind}-x") == cols, kind
        box = page.locator(f"#{kind}-map").bounding_box()
        assert box["width"] / box["height"] == pytest.approx(len(cols) / len(rows), rel=0.02)
        n_layer = page.locator(f"#{kind}-layer option").count()
        for layer in range(n_layer):
            for head in range(2):
                page.select_option(f"#{kind}-layer", str(layer))
                page.select_option(f"#{kind}-head", str(head))
                pattern = values[KINDS[kind].format(i=layer)][head]  # [n_q, n_k]
                assert pattern.shape == (len(rows), len(cols))
                shade = np.round(255 * (1 - np.sqrt(pattern.astype(np.float64))))
                painted = np.array(page.evaluate(PAINTED, [f"{kind}-map", *pattern.shape]))
                assert np.abs(painted - shade).max() <= 1, (kind, layer, head)
                page.locator(f"#{kind}-map").scroll_into_view_if_needed()
                box = page.locator(f"#{kind}-map").bounding_box()
                for q, k in [(0, 0), (len(rows) - 1, len(cols) - 1), (len(rows) - 1, 0),
                             (1, len(cols) - 2)]:
                    page.mouse.move(box["x"] + (k + 0.5) * box["width"] / len(cols),
                                    box["y"] + (q + 0.5) * box["height"] / len(rows))
                    tip = page.locator(f"#{kind}-tip").inner_text()
                    assert f"layer {layer} head {head}: " in tip, tip
                    assert float(tip.rsplit(" ", 1)[1]) == pytest.approx(pattern[q, k],
                                                                         rel=1e-6, abs=1e-9)
                    if kind != "enc":  # a decoder row says what it writes
                        assert f"(writes {rows[q]})" in tip, tip
    # the 上句, the 下句 and its end, position above position, with ids and p
    encoder = loaded.encoder
    columns = page.locator("#pair .col[data-i]")
    assert columns.count() == n + 1
    assert page.locator("#pair .first .char").all_inner_texts() == list(FIRST)
    assert page.locator("#pair .second .char").all_inner_texts() == [*second, "end"]
    written = [*encoder.encode(second), encoder.end]
    assert [int(i) for i in page.locator("#pair .second .id").all_inner_texts()] == written
    for i in (0, n - 1, n):  # each position's column holds its own characters
        column = columns.nth(i)
        assert column.locator(".second .char").inner_text() == ([*second, "end"])[i]
        assert column.locator(".first .char").all_inner_texts() == list(FIRST[i : i + 1])
    # each p is the one of the distribution the character was drawn from: the length mask
    # (no end and no unknown before the nth place, only the end at it), --distinct's (on by
    # default), then top-k 5
    np.testing.assert_allclose(shown_p(page), drawn_from(logits, written, encoder, top_k=5,
                                                         first=FIRST), atol=5e-5)
    assert len(set(second)) == len(second)  # FIRST has seven different characters
    assert "distribution it was drawn from" in page.locator("#n-couplet").inner_text()
    assert page.errors == [] and page.requests == [path.as_uri()]  # nothing fetched


def shown_p(page) -> list[float]:
    return [float(p) for p in page.evaluate(
        "() => [...document.querySelectorAll('#pair .col[data-i] .p')].map(e => e.title)")]


def drawn_from(logits: np.ndarray, written: list[int], encoder, top_k: int | None = None,
               first: str | None = None):
    """Each written id's probability under the couplet's length mask, --distinct's when first
    (the 上句) is given, and top-k, made here from the trace's logits [n + 1, n_vocab]: the last
    row may write only the end; row i no character of rows j < i where first[j] != first[i]."""
    n, masked = len(written) - 1, logits.astype(np.float64).copy()
    masked[:n, [encoder.end, encoder.unknown]] = -np.inf
    masked[n, np.arange(masked.shape[1]) != encoder.end] = -np.inf
    for i in range(n if first else 0):
        unasked = {written[j] for j in range(i) if first[j] != first[i]}
        asked = {written[j] for j in range(i) if first[j] == first[i]}
        masked[i, list(unasked - asked)] = -np.inf
    if top_k is not None:
        kth = np.sort(masked, -1)[:, -top_k][:, None]
        masked[masked < kth] = -np.inf
    return softmax(masked)[np.arange(n + 1), written]


def test_a_whole_lian_shows_the_poets_xia_ju_fed_in_and_the_models_masked_distribution(
        models, browser, tmp_path):
    """picogpt "上句，下句" --explain: the page's attention is the trace of the real 联, each p is
    the model's own probability of the poet's character under the length mask, the page says the
    下句 was fed in; the other flags keep their refusal."""
    second = "风月日日月月月"
    path = tmp_path / "lian.html"
    printed = explained(models, "rnd", f"{FIRST}，{second}", path)
    assert printed == ""  # nothing was written by the model
    loaded, logits, values = traced(models, "rnd", FIRST, second)
    encoder = loaded.encoder
    written = [*encoder.encode(second), encoder.end]
    for locale, said in (("en-US", "teacher forcing"), ("zh-CN", "教师强制")):
        page = open_page(browser, path, locale)
        assert said in page.locator("#settings").inner_text()
        assert page.locator("#pair .second .char").all_inner_texts()[:-1] == list(second)
        np.testing.assert_allclose(shown_p(page), drawn_from(logits, written, encoder),
                                   atol=5e-5)
        page.select_option("#cross-layer", "1")
        page.select_option("#cross-head", "1")
        pattern = values["decoder.blocks.1.cross_attn.pattern"][1]  # [n + 1, n]
        painted = np.array(page.evaluate(PAINTED, ["cross-map", *pattern.shape]))
        shade = np.round(255 * (1 - np.sqrt(pattern.astype(np.float64))))
        assert np.abs(painted - shade).max() <= 1
        assert page.errors == []
        page.context.close()
    from test_openai import assert_one_line_error

    model = ["--model_size", "rnd", "--models_dir", str(models)]
    for flags, message in (([], "a whole 联 goes with --explain"),
                           (["--explain", str(path), "--top_k", "3"], "--top_k does nothing"),
                           (["--explain", str(path), "--n_samples", "2"], "--n_samples"),
                           (["--explain", str(path), "--line", "7"], "--line is for a GPT-2")):
        assert_one_line_error(picogpt(f"{FIRST}，{second}", *model, *flags), message)
    assert_one_line_error(picogpt(f"{FIRST}，风月", *model, "--explain", str(path)),
                          "the 下句 has 2 characters and the 上句 7")


def test_the_same_position_scores_are_the_traces_and_the_aligned_head_is_seen(models, browser,
                                                                           tmp_path):
    """On the model whose head 0 aligns and head 1 mirrors: the grid and the badges under the
    heads are same_position_score's, the aligned head scores 1 and lights the diagonal, and a
    click on a score shows that head."""
    first = FIRST[:6]  # the length the mirror head was built for
    path = tmp_path / "heads.html"
    second = explained(models, "heads", first, path)
    _loaded, _logits, values = traced(models, "heads", first, second)
    expected = same_position_score(values)  # [1, 2]
    assert expected[0, 0] > 0.99 and expected[0, 1] < 0.05
    for locale in ("en-US", "zh-CN"):
        page = open_page(browser, path, locale)
        cells = page.locator("#same td")
        assert cells.count() == expected.size
        titles = page.evaluate("() => [...document.querySelectorAll('#same td')].map(td => "
                               "td.title)")
        assert all(title.startswith("对位") for title in titles)
        np.testing.assert_allclose([float(title.split("：" if "：" in title else ": ")[-1])
                                    for title in titles], expected.ravel(), atol=1e-4)
        badges = page.locator("#cross-overview figcaption").all_inner_texts()
        assert badges == [f"对位 {v:.2f}" for v in expected[0]]
        page.click("#same td[data-layer='0'][data-head='1']")
        assert page.locator("#cross-head").input_value() == "1"
        assert page.locator("#cross-overview canvas.sel").get_attribute("data-head") == "1"
        assert page.locator("#same td[aria-pressed='true']").get_attribute("data-head") == "1"
        page.click("#same td[data-layer='0'][data-head='0']")
        painted = np.array(page.evaluate(PAINTED, ["cross-map", 7, 6]))  # 0 is dark blue
        assert np.all(np.diagonal(painted) < 40) and np.all(painted[:6][~np.eye(6, dtype=bool)]
                                                             > 200)
        assert page.errors == []
        page.context.close()


def test_the_page_opens_on_the_most_aligned_cross_attention_head(models, browser, tmp_path):
    """The cross-attention panel opens on the head of the highest 对位 score (here head 1 of
    the swapped model), not on head 0 of block 0, and lights its diagonal."""
    first = FIRST[:6]
    for name, best in (("heads-swapped", 1), ("heads", 0)):
        path = tmp_path / f"{name}.html"
        second = explained(models, name, first, path)
        scores = same_position_score(traced(models, name, first, second)[2])  # [1, 2]
        assert int(np.argmax(scores)) == best and scores.max() > 0.99, scores
        page = open_page(browser, path)
        assert page.locator("#cross-layer").input_value() == "0"
        assert page.locator("#cross-head").input_value() == str(best)
        assert page.locator("#same td[aria-pressed='true']").get_attribute("data-head") == \
            str(best)
        painted = np.array(page.evaluate(PAINTED, ["cross-map", 7, 6]))
        assert np.all(np.diagonal(painted) < 40), painted
        page.context.close()


def test_the_page_says_what_the_model_is_in_both_languages(models, browser, tmp_path):
    """A couplet model, an encoder-decoder of its own two counts of layers, never GPT-2; random
    weights said as such; the sampler as the run used it."""
    pages = {"rnd": tmp_path / "rnd.html", "heads": tmp_path / "heads.html"}
    explained(models, "rnd", FIRST, pages["rnd"], "--top_k", "3", "--seed", "7")
    explained(models, "heads", FIRST[:6], pages["heads"])
    said = {("rnd", "en-US"): "a couplet model with random weights (an encoder-decoder of 1 + 2 "
                              "layers, not GPT-2)",
            ("rnd", "zh-CN"): "随机权重的对对子模型（编码器-解码器，1 + 2 层，不是 GPT-2）",
            ("heads", "en-US"): '"heads", a couplet model trained by picogpt (an encoder-decoder'
                                " of 1 + 1 layers, not GPT-2)",
            ("heads", "zh-CN"): "“heads”，picogpt 训练的对对子模型（编码器-解码器，1 + 1 层，不是 "
                                "GPT-2）"}
    for (name, locale), words in said.items():
        page = open_page(browser, pages[name], locale)
        heading = page.locator("h1").inner_text()
        assert words in heading and words in page.title(), heading
        settings = page.locator("#settings").inner_text()
        sampler = {("rnd", "en-US"): "; sampling: temperature 1, top_k 3, top_p off, seed 7.",
                   ("rnd", "zh-CN"): "；采样：温度 1，top_k 3，top_p 未设置，随机种子 7。",
                   ("heads", "en-US"): "(a mask on the logits); greedy.",
                   ("heads", "zh-CN"): "（靠 logits 上的掩码）；贪心解码。"}
        assert sampler[name, locale] in settings, settings
        page.context.close()


@pytest.mark.parametrize("locale, width", [("en-US", 390), ("zh-CN", 390), ("en-US", 1200)])
def test_a_short_models_name_stays_whole_in_the_title(models, browser, tmp_path, locale, width):
    """A model named "dui" on a phone and a desktop: its name on one line of the title, never
    split at the line's end ("d / ui"), and the title and the row labels within their boxes."""
    shape = {"n_embd": 16, "n_head": 2, "n_layer": 1, "n_dec_layer": 1}
    if not (models / "dui").exists():
        couplet_folder(models, "dui", shape, init_params({**shape, "n_vocab": len(TOKENS)},
                                                         np.random.default_rng(2)), random=False)
    path = tmp_path / "dui.html"
    explained(models, "dui", FIRST, path)
    page = open_page(browser, path, locale, width)
    name = page.locator("h1 .name")
    assert name.inner_text() == "dui"
    assert name.evaluate("e => e.getClientRects().length") == 1
    assert_couplet_fits(page, width)
    page.context.close()


def assert_couplet_fits(page, width: int) -> None:
    """No sideways scroll; the title, the settings and the pair within their boxes; each map's
    canvas and heads within the page; each axis label's text inside its own box, inside its
    axis (nothing clipped) and clear of its neighbour's."""
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    for box in ("title", "settings", "pair"):
        assert page.evaluate(f"(e => e.scrollWidth <= e.clientWidth)(document.getElementById("
                             f"'{box}'))"), box
    for kind in KINDS:
        for part in ("map", "overview"):
            assert page.locator(f"#{kind}-{part}").bounding_box()["x"] + page.locator(
                f"#{kind}-{part}").bounding_box()["width"] <= width, (kind, part)
        for axis in ("x", "y"):
            found = page.evaluate(LABELS, f"{kind}-{axis}")
            outer = page.locator(f"#{kind}-{axis}").bounding_box()
            for label in found:
                text, box = label["text"], label["box"]
                for inner, around in ((text, box), (text, {
                        "left": outer["x"], "right": outer["x"] + outer["width"],
                        "top": outer["y"], "bottom": outer["y"] + outer["height"]})):
                    assert (around["left"] - 0.5 <= inner["left"]
                            and inner["right"] <= around["right"] + 0.5
                            and around["top"] - 0.5 <= inner["top"]
                            and inner["bottom"] <= around["bottom"] + 0.5), (kind, axis, label)
            assert not any(intersect(a["text"], b["text"]) for a, b in zip(found, found[1:]))


@pytest.mark.parametrize("layout", ALL_SCREENS, ids=named(ALL_SCREENS))
def test_the_page_fits_a_phone_and_a_desktop_in_any_font(models, browser, layout, tmp_path):
    """A 上句 of seven characters on a model of four heads, with a long name: the layout holds in
    the fonts the machine has (and the pair and the grid need no scrolling in them), and in each
    kind of font with letter spacings that stand for fonts wider than any installed here."""
    locale, width = layout
    shape = {"n_embd": 16, "n_head": 4, "n_layer": 2, "n_dec_layer": 2}
    name = "dui-" + "长名字" * 12 + "-seven-character-couplets"
    if not (models / name).exists():
        couplet_folder(models, name, shape, init_params({**shape, "n_vocab": len(TOKENS)},
                                                        np.random.default_rng(1)), random=False)
    path = tmp_path / "page.html"
    explained(models, name, FIRST, path, "--top_k", "5", "--seed", "1")
    page = open_page(browser, path, locale, width)
    assert page.evaluate("innerWidth") == width
    assert_couplet_fits(page, width)
    # the fonts installed: the 对位 grid of four heads needs no scrolling, nor the pair wrapping
    assert page.evaluate("(e => e.scrollWidth <= e.clientWidth)(document.getElementById('same'))")
    tops = {round(box["y"]) for box in (page.locator("#pair .col").nth(i).bounding_box()
                                         for i in range(len(FIRST) + 2))}
    assert len(tops) == 1, tops
    page.screenshot(path=str(tmp_path / f"{locale}-{width}.png"), full_page=True)
    for font in FONTS:
        for spacing in ("0px", "0.1em", "0.3em"):
            page.evaluate("""([font, spacing]) => {
                let style = document.getElementById('font-test');
                if (!style) { style = document.createElement('style'); style.id = 'font-test';
                              document.head.append(style); }
                style.textContent = `* { font-family: ${font} !important;
                                         letter-spacing: ${spacing} !important; }`; }""",
                          [font, spacing])
            assert_couplet_fits(page, width)
    assert page.errors == []
    page.context.close()


def test_a_couplet_pages_data_is_json_the_page_reads_and_the_explore_refusal_stays(models):
    """The page holds its data as JSON in the one place fill puts it; the explore page still
    refuses a couplet model in one line."""
    from test_openai import assert_one_line_error

    from picogpt.transformer.decoding import read_pair
    from picogpt.web.couplet import couplet_data

    loaded = load_model("rnd", str(models))
    made = read_pair(FIRST, "风月日日月月月", loaded.params, loaded.hparams, loaded.encoder)
    data = couplet_data(FIRST, made, loaded.params, loaded.hparams, loaded.encoder,
                        {"top_k": None, "top_p": None, "temperature": 1.0, "seed": None},
                        loaded.about(), forced=True)
    assert json.loads(json.dumps(data)) == data
    assert data["model"]["kind"] == "random" and data["model"]["seq2seq"]
    # row i reads the start token or character i - 1, and writes character i or the end
    assert [tok["text"] for tok in data["reads"]] == ["<|start|>", *"风月日日月月月"]
    assert [tok["text"] for tok in data["writes"]] == [*"风月日日月月月", "<|start|>"]
    assert_one_line_error(picogpt("春风", "--explore", "--model_size", "rnd", "--models_dir",
                                  str(models)), "is a couplet model (an encoder-decoder)")
