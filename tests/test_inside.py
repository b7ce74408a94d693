"""The inside view: trace and logit lens against transformers, step candidates against draws,
and the --explain page in a real browser (Debian's chromium, driven by Playwright)."""

import base64
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import hf_model
from test_generate import chi_square, chi_square_limit
from test_model import float64, load, prompt_ids
from test_openai import picogpt

from picogpt import generate, gpt2, softmax, trace
from picogpt.files.openai import load_encoder_hparams_and_params, read_encoder
from picogpt.generate import generate_steps
from picogpt.inside import (
    last_break_score,
    logit_lens,
    previous_line_score,
    residual_names,
    rhyme_score,
)
from picogpt.sampling import Sampling, sample_rngs
from picogpt.show import shown, visible
from scripts.fixtures.circuits import induction_circuit


def test_trace_equals_transformers_attentions_and_hidden_states(tiny):
    hparams, params = load(tiny.models_dir)
    ids = prompt_ids(20, seed=2)
    logits, values = trace(ids, params, hparams["n_head"])
    model = hf_model(tiny)
    model.set_attn_implementation("eager")  # sdpa does not return the attention weights
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    n_layer = hparams["n_layer"]
    for i in range(n_layer):
        pattern = values[f"blocks.{i}.attn.pattern"]
        assert pattern.shape == (hparams["n_head"], 20, 20)
        np.testing.assert_allclose(pattern.sum(-1), 1, rtol=1e-5)
        np.testing.assert_allclose(pattern, out.attentions[i][0].numpy(), atol=1e-5)
    hidden = out.hidden_states  # embeddings, each block's output; the last has ln_f applied
    np.testing.assert_allclose(values["blocks.0.resid_pre"], hidden[0][0].numpy(), atol=1e-5)
    for i in range(n_layer - 1):
        np.testing.assert_allclose(values[f"blocks.{i}.resid_post"], hidden[i + 1][0].numpy(),
                                   atol=1e-5)
    np.testing.assert_allclose(values["ln_final"], hidden[n_layer][0].numpy(), atol=1e-5)
    np.testing.assert_allclose(logits, out.logits[0].numpy(), atol=1e-4)
    for i in range(n_layer):  # the parts add up as the block adds them
        block = {name: values[f"blocks.{i}.{name}"] for name in
                 ("resid_pre", "attn_out", "resid_mid", "mlp_out", "resid_post")}
        np.testing.assert_array_equal(block["resid_pre"] + block["attn_out"], block["resid_mid"])
        np.testing.assert_array_equal(block["resid_mid"] + block["mlp_out"], block["resid_post"])
    np.testing.assert_array_equal(values["embed"] + values["pos_embed"],
                                  values["blocks.0.resid_pre"])


def hf_attention_internals(model, ids) -> dict[str, np.ndarray]:
    """q, k, v, the pre-softmax scores, the pattern, z and the MLP's pre and post activations
    of transformers' GPT-2 (eager attention), read with forward hooks on its own modules."""
    seen, hooks = {}, []
    config = model.config
    n_head, d_head = config.n_head, config.n_embd // config.n_head

    def heads(a):  # [1, n_seq, n_embd] -> [n_head, n_seq, d_head]
        return a[0].reshape(a.shape[1], n_head, d_head).transpose(1, 0, 2)

    for i, block in enumerate(model.transformer.h):
        def c_attn(module, inputs, output, i=i):
            q, k, v = np.split(output.detach().numpy(), 3, axis=-1)
            seen[f"blocks.{i}.attn.q"], seen[f"blocks.{i}.attn.k"], seen[f"blocks.{i}.attn.v"] = (
                heads(q), heads(k), heads(v))

        def c_proj(module, inputs, i=i):  # attention's output before its projection
            seen[f"blocks.{i}.attn.z"] = heads(inputs[0].detach().numpy())

        def mlp_fc(module, inputs, output, i=i):
            seen[f"blocks.{i}.mlp.pre"] = output[0].detach().numpy()

        def mlp_act(module, inputs, output, i=i):
            seen[f"blocks.{i}.mlp.post"] = output[0].detach().numpy()

        hooks += [block.attn.c_attn.register_forward_hook(c_attn),
                  block.attn.c_proj.register_forward_pre_hook(c_proj),
                  block.mlp.c_fc.register_forward_hook(mlp_fc),
                  block.mlp.act.register_forward_hook(mlp_act)]
    try:
        with torch.no_grad():
            out = model(torch.tensor([ids]), output_attentions=True)
    finally:
        for hook in hooks:
            hook.remove()
    for i, pattern in enumerate(out.attentions):
        seen[f"blocks.{i}.attn.pattern"] = pattern[0].numpy()
    return seen


def test_traced_attention_and_mlp_internals_equal_transformers(tiny):
    hparams, params = load(tiny.models_dir)
    ids = prompt_ids(18, seed=7)
    n_head, n_layer = hparams["n_head"], hparams["n_layer"]
    _, values = trace(ids, float64(params), n_head)  # float64 on both sides
    model = hf_model(tiny, float64=True)
    model.set_attn_implementation("eager")  # sdpa does not return the attention weights
    reference = hf_attention_internals(model, ids)
    d_head = hparams["n_embd"] // n_head
    shapes = {"q": (n_head, 18, d_head), "k": (n_head, 18, d_head), "v": (n_head, 18, d_head),
              "z": (n_head, 18, d_head), "pattern": (n_head, 18, 18)}
    for i in range(n_layer):
        for name, shape in shapes.items():
            assert values[f"blocks.{i}.attn.{name}"].shape == shape
            np.testing.assert_allclose(values[f"blocks.{i}.attn.{name}"],
                                       reference[f"blocks.{i}.attn.{name}"], atol=1e-5, rtol=0)
        for name in ("pre", "post"):
            assert values[f"blocks.{i}.mlp.{name}"].shape == (18, 4 * hparams["n_embd"])
            np.testing.assert_allclose(values[f"blocks.{i}.mlp.{name}"],
                                       reference[f"blocks.{i}.mlp.{name}"], atol=1e-5, rtol=0)
        # the scores before the softmax, from transformers' own q and k, where a query may look
        q, k = reference[f"blocks.{i}.attn.q"], reference[f"blocks.{i}.attn.k"]
        expected = q @ k.transpose(0, 2, 1) / np.sqrt(d_head)  # [n_head, n_seq, n_seq]
        scores = values[f"blocks.{i}.attn.attn_scores"]
        assert scores.shape == (n_head, 18, 18)
        visible = np.tri(18, dtype=bool)  # query i sees keys 0..i
        np.testing.assert_allclose(scores[:, visible], expected[:, visible], atol=1e-5, rtol=0)
        assert (scores[:, ~visible] < -1e9).all()  # the masked ones are far below any score


def test_traced_logits_are_gpt2s_bit_for_bit_and_names_filter(checkpoint):
    hparams, params = load(checkpoint.models_dir)
    ids = prompt_ids(30, seed=3)
    logits, values = trace(ids, params, hparams["n_head"], names={"blocks.1.attn.pattern"})
    assert np.array_equal(logits, gpt2(np.array(ids), **params, n_head=hparams["n_head"]))
    assert set(values) == {"blocks.1.attn.pattern"}


@pytest.fixture(params=["tiny", "gpt2_124m"])
def checkpoint(request):
    return request.getfixturevalue(request.param)


def test_every_row_of_the_logit_lens_is_transformers_final_norm_and_head(tiny):
    """Row l: transformers' own ln_f and lm_head applied to its hidden state after l blocks
    (hidden_states[l]; the last one already has ln_f applied, so the last row uses logits)."""
    hparams, params = load(tiny.models_dir)
    ids = prompt_ids(12, seed=4)
    _, values = trace(ids, params, hparams["n_head"], names=set(residual_names(hparams["n_layer"])))
    lens_ids, lens_probs = logit_lens(values, params, top=3)
    model = hf_model(tiny, float64=True)
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_hidden_states=True)
        rows = [model.lm_head(model.transformer.ln_f(h[0])) for h in out.hidden_states[:-1]]
        rows.append(out.logits[0])
    for layer, logits in enumerate(rows):
        probs = torch.softmax(logits, -1)
        best = torch.topk(probs, 3)
        ties = (best.values[:, 2] - torch.topk(probs, 4).values[:, 3]) > 1e-7
        assert np.array_equal(lens_ids[layer][ties.numpy()], best.indices.numpy()[ties.numpy()])
        np.testing.assert_allclose(lens_probs[layer], best.values.numpy(), rtol=1e-4, atol=1e-8)


def test_the_logit_lens_last_row_is_the_models_prediction(tiny):
    hparams, params = load(tiny.models_dir)
    ids = prompt_ids(12, seed=4)
    logits, values = trace(ids, params, hparams["n_head"],
                           names=set(residual_names(hparams["n_layer"])))
    lens_ids, lens_probs = logit_lens(values, params, top=3)
    assert lens_ids.shape == lens_probs.shape == (hparams["n_layer"] + 1, 12, 3)
    probs = softmax(logits)
    expected = np.argsort(-probs, axis=-1, kind="stable")[:, :3]
    assert np.array_equal(lens_ids[-1], expected)
    np.testing.assert_allclose(lens_probs[-1], np.take_along_axis(probs, expected, -1),
                               rtol=1e-5)
    assert not np.array_equal(lens_ids[0], lens_ids[-1])  # earlier layers predict otherwise


def test_step_candidates_are_the_distribution_the_sampler_drew_from(tiny):
    hparams, params = load(tiny.models_dir)
    ids, n_head = prompt_ids(6, seed=5), hparams["n_head"]
    settings = {"top_k": 6, "top_p": 0.9, "temperature": 0.8, "repetition_penalty": 1.3}
    first = next(generate_steps(ids, params, n_head, 1, seed=0, candidates=10, **settings))
    logits = gpt2(np.array(ids), **params, n_head=n_head)[-1]
    seen = np.zeros(len(logits), bool)
    seen[ids] = True
    sampling = Sampling(**settings)
    filtered = sampling.filter(logits, seen)
    # 2,500 draws from this one row, with the generators generate gives samples 0 to 2,499
    # (a batch of 2,500 rows took 12 s to say the same)
    tokens = np.array([sampling.pick(filtered, rng) for rng in sample_rngs(0, 2500)])
    assert tokens[0] == first.token  # the draw generate made for sample 0
    np.testing.assert_allclose(first.before, softmax(logits.astype(np.float64))[first.ids],
                               rtol=1e-5)
    np.testing.assert_allclose(first.after, softmax(filtered.astype(np.float64))[first.ids],
                               rtol=1e-5)
    kept = first.ids[first.after > 0]
    assert 2 <= len(kept) <= 6 and first.after[first.after > 0].sum() == pytest.approx(1)
    assert set(tokens) <= set(kept.tolist())
    counts = np.array([np.sum(tokens == i) for i in kept])
    assert chi_square(counts, first.after[first.after > 0]) < chi_square_limit(len(kept) - 1)
    p = first.after[first.after > 0]
    assert first.entropy == pytest.approx(-np.sum(p * np.log(p)))


def test_candidates_flag_prints_aligned_columns(tiny, vocab_dir):
    encoder = read_encoder(vocab_dir)
    hparams, params = load(tiny.models_dir)
    done = picogpt("Alan Turing", "--n_tokens", "5", "--candidates", "3", "--top_k", "10",
                   "--seed", "2", "--models_dir", str(tiny.models_dir))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    steps = list(generate_steps(encoder.encode("Alan Turing"), params, hparams["n_head"], 5,
                                top_k=10, seed=2, candidates=3))
    rows = lines[1:6]
    for row, step in zip(rows, steps):
        chosen = ("'" + visible(encoder.decode_bytes([step.token])) + "'")[:14]
        assert row[6:20].rstrip() == chosen.rstrip()  # the column after the step number
    arrows = {tuple(m.start() for m in re.finditer("->", row)) for row in rows}
    assert len(arrows) == 1 and len(next(iter(arrows))) == 3  # three columns, aligned
    assert lines[6] == encoder.decode([step.token for step in steps])


# ---- the page, in a real browser ------------------------------------------------------------

PROMPT = "语言模型怎样预测下一个词？Alan Turing"  # Chinese: characters split across tokens


def valid_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def test_the_explain_page_shows_the_engines_numbers_offline(tiny, vocab_dir, browser, tmp_path):
    encoder = read_encoder(vocab_dir)
    hparams, params = load(tiny.models_dir)
    path = tmp_path / "report.html"
    done = picogpt(PROMPT, "--n_tokens", "8", "--top_k", "20", "--seed", "1", "--explain",
                   str(path), "--models_dir", str(tiny.models_dir))
    assert done.returncode == 0, done.stderr
    prompt = encoder.encode(PROMPT)
    steps = list(generate_steps(prompt, params, hparams["n_head"], 8, top_k=20, seed=1,
                                candidates=10))
    ids = prompt + [step.token for step in steps]
    _, values = trace(ids, params, hparams["n_head"])

    page = browser.new_page(viewport={"width": 1200, "height": 900})
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.as_uri())

    pieces = page.locator("#tokens .tok")
    assert pieces.count() == len(ids)
    for k, token_id in enumerate(ids):
        data = encoder.decode_bytes([token_id])
        assert pieces.nth(k).locator(".id").inner_text() == str(token_id)
        text = pieces.nth(k).locator(".text").inner_text()
        if valid_utf8(data):
            assert text.strip() == data.decode("utf-8").strip()
        else:  # part of a character: its bytes, never U+FFFD
            assert text == data.hex(" ") and "\ufffd" not in text
    split = [i for i in ids if not valid_utf8(encoder.decode_bytes([i]))]
    assert len(split) >= 4  # the prompt did split characters across tokens

    for layer, head in [(0, 0), (1, 3)]:  # choose, then hover cells of the heatmap
        page.select_option("#layer", str(layer))
        page.select_option("#head", str(head))
        page.locator("#attn").scroll_into_view_if_needed()
        box = page.locator("#attn").bounding_box()
        n = len(ids)
        for q, k in [(0, 0), (5, 2), (n - 1, 7), (n - 1, n - 1)]:
            page.mouse.move(box["x"] + (k + 0.5) * box["width"] / n,
                            box["y"] + (q + 0.5) * box["height"] / n)
            tip = page.locator("#attn-tip").inner_text()
            assert f"layer {layer} head {head}: query {q} " in tip and f" key {k} " in tip
            expected = values[f"blocks.{layer}.attn.pattern"][head, q, k]
            assert float(tip.rsplit(" ", 1)[1]) == pytest.approx(expected, rel=1e-6, abs=1e-9)

    for s in (0, 5):
        page.select_option("#step", str(s))
        shown = page.locator("#cands .p.after").all_inner_texts()
        before = page.locator("#cands .p.before").all_inner_texts()
        np.testing.assert_allclose([float(x) for x in shown], steps[s].after, atol=5e-5)
        np.testing.assert_allclose([float(x) for x in before], steps[s].before, atol=5e-5)
        for kind in ("before", "after"):  # bars against the column's largest value
            widths = page.evaluate(f"""() => [...document.querySelectorAll('#cands .bar.{kind}')]
                                       .map(bar => parseFloat(bar.style.width))""")
            probs = getattr(steps[s], kind)
            np.testing.assert_allclose(widths, 100 * probs / probs.max(), atol=0.06)
        assert "▶" in page.locator("#cands .chosen").inner_text()
    page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    assert errors == [] and requests == [path.as_uri()]  # nothing but the file itself


def test_a_64_token_page_of_the_124m_shape_stays_under_5_mb(gpt2_124m, tmp_path):
    path = tmp_path / "report.html"
    done = picogpt(" ".join(["word"] * 24), "--n_tokens", "40", "--ignore_end", "--explain",
                   str(path), "--models_dir", str(gpt2_124m.models_dir))
    assert done.returncode == 0, done.stderr
    assert 1_000_000 < path.stat().st_size < 5_000_000
    html = path.read_text(encoding="utf-8")  # GPT-2's shape, random weights: not "GPT-2 124M"
    assert '"kind": "random"' in html and '"kind": "released"' not in html


def test_candidates_flag_prints_transformers_probabilities_and_entropy(tiny, vocab_dir):
    """--candidates' numbers against an independent computation: transformers' logits at each
    step's position, its TopKLogitsWarper, and the entropy of what is left, in float64."""
    from transformers import TopKLogitsWarper

    encoder = read_encoder(vocab_dir)
    done = picogpt("Alan Turing", "--n_tokens", "6", "--candidates", "4", "--top_k", "10",
                   "--seed", "2", "--models_dir", str(tiny.models_dir))
    assert done.returncode == 0, done.stderr
    rows = done.stdout.splitlines()[1:7]
    hparams, params = load(tiny.models_dir)
    prompt = encoder.encode("Alan Turing")
    tokens = [step.token for step in generate_steps(prompt, params, hparams["n_head"], 6,
                                                    top_k=10, seed=2, candidates=4)]
    with torch.no_grad():
        logits = hf_model(tiny, float64=True)(torch.tensor([prompt + tokens])).logits[0]
    for step, row in enumerate(rows):
        scores = logits[len(prompt) - 1 + step][None]  # what step `step` was picked from
        before = torch.softmax(scores, -1)[0]
        after = torch.softmax(TopKLogitsWarper(10)(None, scores.clone()), -1)[0]
        kept = after[after > 0]
        entropy = float(-(kept * kept.log()).sum())
        assert float(row[21:28]) == pytest.approx(entropy, abs=1e-3)  # printed with 3 decimals
        pairs = re.findall(r"(\S+) +-> (\S+)", row[28:])
        best = torch.argsort(before, descending=True)[:4]
        assert len(pairs) == 4
        for (b, a), i in zip(pairs, best):  # 3 significant digits, most likely first
            assert float(b) == pytest.approx(float(before[i]), rel=5e-3)
            assert float(a) == pytest.approx(float(after[i]), rel=5e-3)


def test_a_long_page_keeps_the_last_positions_attention_at_the_right_offset(tiny_end, vocab_dir,
                                                                             browser, tmp_path):
    """Past ATTENTION_BYTES the page keeps the attention of the last positions only; each cell
    must still name and show its own query and key. The logit lens and the wpe picture are the
    engine's numbers too."""
    from picogpt.web.views import ATTENTION_BYTES, N_WPE

    encoder = read_encoder(vocab_dir)
    hparams, params = load(tiny_end.models_dir)
    prompt = " ".join(f"item{i}" for i in range(200))  # ~400 tokens
    path = tmp_path / "long.html"
    done = picogpt(prompt, "--n_tokens", "2", "--explain", str(path), "--models_dir",
                   str(tiny_end.models_dir))
    assert done.returncode == 0, done.stderr
    ids = encoder.encode(prompt)
    ids += [step.token for step in generate_steps(ids, params, hparams["n_head"], 2,
                                                  candidates=10)]
    n_layer, n_head = hparams["n_layer"], hparams["n_head"]
    n_kept = int((ATTENTION_BYTES / (n_layer * n_head * 4)) ** 0.5)
    first = len(ids) - n_kept
    assert first > 20  # the page does crop
    _, values = trace(ids, params, n_head)
    lens_ids, lens_probs = logit_lens(values, params, top=3)

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    assert errors == []
    assert page.locator("#attn-range").inner_text() == (
        f"(positions {first} to {len(ids) - 1} only: the page keeps the last {n_kept} to stay "
        f"small)")
    page.select_option("#layer", "1")
    page.select_option("#head", "2")
    for q, k in [(0, 0), (n_kept - 1, 0), (n_kept - 1, n_kept - 1), (200, 57)]:
        # the pointer at the first whole pixel inside the cell, as a mouse reports positions
        # (cells are one pixel wide at this length, and the canvas has a border)
        page.evaluate("""([q, k, n]) => { const c = document.getElementById("attn"),
            r = c.getBoundingClientRect(), w = c.clientWidth / n, h = c.clientHeight / n;
            c.dispatchEvent(new MouseEvent("mousemove", {
                clientX: Math.ceil(r.left + c.clientLeft + k * w),
                clientY: Math.ceil(r.top + c.clientTop + q * h)}));
            }""", [q, k, n_kept])
        tip = page.locator("#attn-tip").inner_text()
        assert f"query {first + q} " in tip and f" key {first + k} " in tip, tip
        expected = values["blocks.1.attn.pattern"][2, first + q, first + k]
        assert float(tip.rsplit(" ", 1)[1]) == pytest.approx(expected, rel=1e-6, abs=1e-9)

    rows = page.locator("#lens tr")
    assert rows.count() == n_layer + 2  # the header and one row per residual stream
    for layer in range(n_layer + 1):
        cells = rows.nth(layer + 1).locator("td")
        assert cells.count() == len(ids)
        for i in (0, 7, len(ids) - 1):
            text = visible(encoder.decode_bytes([int(lens_ids[layer, i, 0])]))
            assert cells.nth(i).inner_text() == f"'{text}'\n{lens_probs[layer, i, 0]:.3f}"

    wpe = np.asarray(params["wpe"][:N_WPE], np.float64)
    unit = wpe / np.linalg.norm(wpe, axis=-1, keepdims=True)
    expected = np.round(255 * np.clip(unit @ unit.T, 0, 1))  # the page's grey scale
    pixels = page.evaluate("""() => { const c = document.getElementById("wpe");
        return Array.from(c.getContext("2d").getImageData(0, 0, c.width, c.height).data); }""")
    grey = np.array(pixels).reshape(N_WPE, N_WPE, 4)[:, :, 0]
    assert np.abs(grey - expected).max() <= 1  # float32 similarity, rounded to 0..255


HEADINGS = {"en-US": ["Tokens", "Step candidates", "Attention", "Head scores", "Logit lens",
                      "Position embeddings"],
            "zh-CN": ["词元序列", "每一步的候选", "注意力", "注意力头打分",
                      "logit 透镜（logit lens）", "位置嵌入"]}


def test_the_page_speaks_the_browsers_language_shows_characters_and_labels_both_axes(
        tiny, vocab_dir, browser, tmp_path):
    encoder = read_encoder(vocab_dir)
    prompt = "GPT-2 把 语言模型 written in 中文 读成字节"
    path = tmp_path / "mixed.html"
    done = picogpt(prompt, "--n_tokens", "3", "--explain", str(path), "--models_dir",
                   str(tiny.models_dir))
    assert done.returncode == 0, done.stderr
    for locale, headings in HEADINGS.items():
        context = browser.new_context(locale=locale)
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
        page.goto(path.as_uri())
        assert page.locator("h2").all_inner_texts() == headings, locale
        other = "en-US" if locale == "zh-CN" else "zh-CN"
        page.click(f"#lang button[data-lang={other[:2]}]")  # the switch
        assert page.locator("h2").all_inner_texts() == HEADINGS[other]
        assert page.evaluate("document.documentElement.lang") == ("zh-CN" if other == "zh-CN"
                                                                  else "en")
        assert errors == []
        context.close()

    page = browser.new_page(locale="en-US")
    page.goto(path.as_uri())
    strip = page.locator("#tokens").inner_text()
    chinese = [ch for ch in prompt if "\u4e00" <= ch <= "\u9fff"]
    assert len(chinese) == 11
    for ch in chinese:  # each character is shown, though its tokens hold only bytes of it
        assert ch in strip, ch
    shown = page.evaluate("""() => [...document.querySelectorAll('#tokens .tok .text')]
                             .map(e => e.textContent)""")
    n = len(shown)
    for axis in ("#attn-x", "#attn-y"):  # every position's token, as text on each axis
        labels = page.evaluate(f"""() => [...document.querySelectorAll('{axis} .label')]
                                   .map(e => e.textContent)""")
        assert labels == shown, axis
    assert n == len(encoder.encode(prompt)) + 3
    assert "\ufffd" not in strip


def has_chinese(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def test_the_chinese_page_hovers_captions_and_tooltips_are_chinese(tiny, vocab_dir, browser,
                                                                   tmp_path):
    """In a zh-CN browser, every caption, the settings line, the chosen step, the hover over
    the heatmap and the heads' tooltips are Chinese, and the hover names the weight trace
    computed; switching to English and back changes each of them."""
    hparams, params = load(tiny.models_dir)
    path = tmp_path / "zh.html"
    done = picogpt(PROMPT, "--n_tokens", "4", "--top_k", "20", "--seed", "1", "--explain",
                   str(path), "--models_dir", str(tiny.models_dir))
    assert done.returncode == 0, done.stderr
    ids = read_encoder(vocab_dir).encode(PROMPT)
    ids += [step.token for step in generate_steps(ids, params, hparams["n_head"], 4, top_k=20,
                                                  seed=1, candidates=10)]
    _, values = trace(ids, params, hparams["n_head"])
    context = browser.new_context(locale="zh-CN", viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.goto(path.as_uri())

    def words() -> dict[str, str]:
        captions = page.evaluate("""() => [...document.querySelectorAll('[data-t]')]
                                    .map(e => e.textContent)""")
        page.locator("#attn").scroll_into_view_if_needed()
        box = page.locator("#attn").bounding_box()
        n = len(ids)
        page.mouse.move(0, 0)  # away first: the hover below is then a move onto the cell
        page.mouse.move(box["x"] + 2.5 * box["width"] / n, box["y"] + (n - 0.5) * box["height"] / n)
        return {"captions": "\n".join(captions),
                "settings": page.locator("#settings").inner_text(),
                "step": page.locator("#step-info").inner_text(),
                "tip": page.locator("#attn-tip").inner_text(),
                "heads": " ".join(page.evaluate("""() => [...document.querySelectorAll(
                    '#overview canvas')].map(c => c.title)""")),
                "title": page.title()}

    chinese = words()
    assert all(has_chinese(text) for text in chinese.values()), chinese
    assert all(has_chinese(line) for line in chinese["captions"].splitlines() if line), chinese
    n = len(ids)
    assert chinese["tip"].startswith(f"第 0 层第 0 个头：查询 {n - 1} ")
    weight = values["blocks.0.attn.pattern"][0, n - 1, 2]
    assert float(chinese["tip"].rsplit("：", 1)[1]) == pytest.approx(weight, rel=1e-6)
    page.click("#lang button[data-lang=en]")
    english = words()
    assert not any(has_chinese(english[key]) for key in ("captions", "step", "tip", "heads"))
    assert english["tip"].startswith(f"layer 0 head 0: query {n - 1} ")
    assert "Each BPE piece" in english["captions"] and "WordPiece" not in english["captions"]
    # top_p was not set: the settings line says so in words, never JavaScript's null
    assert "top_p off" in english["settings"] and "top_p 未设置" in chinese["settings"]
    assert "null" not in english["settings"] + chinese["settings"]
    page.click("#lang button[data-lang=zh]")
    assert words() == chinese
    context.close()


# ---- head scores ------------------------------------------------------------------------------


def crafted_values(ids: list[int]) -> dict[str, np.ndarray]:
    """Patterns written by hand for ids, as trace names them: block 0 head 0 looks at the
    previous position, head 1 at the first; block 1 head 0 spreads evenly over what it may
    see, head 1 looks at the positions right after each earlier copy of the current token."""
    n = len(ids)
    previous, first, even, induction = (np.zeros((n, n)) for _ in range(4))
    for i in range(n):
        previous[i, max(i - 1, 0)] = 1
        first[i, 0] = 1
        even[i, : i + 1] = 1 / (i + 1)
        after = [j + 1 for j in range(i) if ids[j] == ids[i]]
        for j in after:
            induction[i, j] = 1 / len(after)
        if not after:
            induction[i, i] = 1
    return {"blocks.0.attn.pattern": np.stack([previous, first]),
            "blocks.1.attn.pattern": np.stack([even, induction])}


def test_head_scores_are_exact_on_patterns_written_by_hand():
    from fractions import Fraction

    from picogpt.inside import first_token_score, induction_score, previous_token_score

    ids = [9, 1, 2, 3, 1, 2, 7]  # 1 and 2 come back: queries 4 and 5 have an earlier copy
    values = crafted_values(ids)
    even_previous = float(sum(Fraction(1, i + 1) for i in range(1, 7)) / 6)  # 1/(i+1) at i-1
    even_first = even_previous  # the even head gives position 0 the same 1/(i+1)
    even_induction = float((Fraction(1, 5) + Fraction(1, 6)) / 2)  # queries 4, 5: one key each
    # the first-position head's query 1 looks at position 0, which is its previous one
    np.testing.assert_allclose(previous_token_score(values), [[1, 1 / 6], [even_previous, 0]])
    np.testing.assert_allclose(first_token_score(values), [[1 / 6, 1], [even_first, 0]])
    np.testing.assert_allclose(induction_score(values, ids), [[0, 0], [even_induction, 1]])
    assert previous_token_score(values).shape == (2, 2)
    with pytest.raises(ValueError, match="a token that occurs twice"):
        induction_score(values, list(range(7)))


def test_head_scores_find_heads_written_into_a_models_weights():
    """The scores of a model whose previous-token and induction heads were written by hand:
    those two score near 1, every other head low; and the circuit works, predicting the
    second copy of a random sequence."""
    from picogpt.inside import (
        first_token_score,
        induction_score,
        previous_token_score,
        repeated_tokens,
    )

    params = induction_circuit()
    ids = repeated_tokens(8, seed=3, n_vocab=20)  # <|endoftext|>, 8 random tokens, again
    assert len(ids) == 17 and ids[1:9] == ids[9:]
    logits, values = trace(ids, params, 3)
    previous, induction = previous_token_score(values), induction_score(values, ids)
    assert previous.shape == induction.shape == (2, 3)
    assert previous[0, 0] > 0.95 and induction[1, 0] > 0.95
    others = np.ones((2, 3), bool)
    others[0, 0] = others[1, 0] = False
    assert previous[others].max() < 0.4 and induction[others].max() < 0.4
    assert first_token_score(values)[0, 0] < 0.1  # it looks back one, not at the start
    predicted = logits.argmax(axis=-1)  # [n_seq]
    assert predicted[9:16].tolist() == ids[10:17]  # the second copy, token by token


def test_the_page_names_the_model_it_shows_in_its_title_and_header_in_both_languages(
        tiny, vocab_dir, browser, tmp_path):
    """A released size, a model picogpt trained (said not to be GPT-2) and a Hugging Face
    folder: each page's title and heading name it, in English and in Chinese."""
    from test_hf import add_tokenizer, random_hf_model

    from picogpt.cli.train import train

    text = tmp_path / "text.txt"
    text.write_text((Path(__file__).parent / "data" / "corpus.txt").read_text(
        encoding="utf-8")[:4000], encoding="utf-8")
    train(str(text), name="mine", models_dir=str(tmp_path / "models"), n_layer=1, n_head=2,
          n_embd=16, n_ctx=16, n_batch=2, steps=1, vocab_dir=str(vocab_dir))
    folder = tmp_path / "hf-folder"
    random_hf_model(1, 32, 2, 0).save_pretrained(folder)
    add_tokenizer(folder, vocab_dir)
    runs = {  # flags: what the title names, in English and in Chinese
        ("--models_dir", str(tiny.models_dir)): (  # random weights in a folder named 124M
            "a 2-layer model with random weights (not GPT-2)", "随机权重的 2 层模型（不是 GPT-2）"),
        ("--model_size", "mine", "--models_dir", str(tmp_path / "models")): (
            '"mine", a 1-layer model trained by picogpt (not GPT-2)',
            "“mine”，picogpt 训练的 1 层模型（不是 GPT-2）"),
        ("--hf", str(folder)): (f"the Hugging Face model {folder} (GPT-2's architecture)",
                                f"Hugging Face 模型 {folder}（GPT-2 架构）"),
    }
    for i, (flags, names) in enumerate(runs.items()):
        page_file = tmp_path / f"page{i}.html"
        done = picogpt("Hello", "--n_tokens", "2", "--explain", str(page_file), *flags)
        assert done.returncode == 0, done.stderr
        for locale, name in zip(("en-US", "zh-CN"), names):
            context = browser.new_context(locale=locale)
            page = context.new_page()
            page.goto(page_file.as_uri())
            heading = page.locator("h1").inner_text()
            assert name in heading and name in page.title(), (locale, heading)
            assert "GPT-2 124M" not in heading + page.title()
            assert name in page.locator("#settings").inner_text()
            context.close()


def test_the_pages_head_scores_are_the_libraries_and_a_click_shows_that_head(tiny, vocab_dir,
                                                                             browser, tmp_path):
    from picogpt.inside import first_token_score, induction_score, previous_token_score

    hparams, params = load(tiny.models_dir)
    prompt = "one two three four one two three four"  # tokens that repeat: an induction score
    path = tmp_path / "heads.html"
    done = picogpt(prompt, "--n_tokens", "3", "--explain", str(path), "--models_dir",
                   str(tiny.models_dir))
    assert done.returncode == 0, done.stderr
    ids = read_encoder(vocab_dir).encode(prompt)
    ids += list(generate(ids, params, hparams["n_head"], 3))
    _, values = trace(ids, params, hparams["n_head"])
    expected = {"previous": previous_token_score(values), "first": first_token_score(values),
                "induction": induction_score(values, ids)}
    page = browser.new_page(locale="en-US")
    page.goto(path.as_uri())
    for kind, scores in expected.items():
        cells = page.locator(f"#heads .scores[data-kind={kind}] td")
        assert cells.count() == scores.size
        shown = np.array([float(cell.split(": ")[-1]) for cell in page.evaluate(
            f"""() => [...document.querySelectorAll('#heads .scores[data-kind={kind}] td')]
                .map(td => td.title)""")]).reshape(scores.shape)
        np.testing.assert_allclose(shown, scores, atol=1e-4)
    page.click("#heads .scores[data-kind=induction] td[data-layer='1'][data-head='2']")
    assert (page.locator("#layer").input_value(), page.locator("#head").input_value()) == (
        "1", "2")
    assert page.locator("#overview canvas.sel").get_attribute("data-head") == "2"


def verse_heads(seed: int = 0):
    """Random causal attention patterns for two layers of three heads over a short verse's ids
    (5 ends a half-line, 6 a line), as trace would keep them."""
    rng = np.random.default_rng(seed)
    ids = np.array([1, 2, 3, 5, 2, 4, 1, 6, 3, 3, 2, 5, 1, 1, 6, 4, 2])
    n = len(ids)
    scores = rng.normal(size=(2, 3, n, n)) + np.triu(np.full((n, n), -np.inf), 1)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    return ids, {f"blocks.{i}.attn.pattern": weights[i] for i in range(2)}, weights


def test_the_last_break_and_previous_line_scores_follow_their_definitions():
    ids, values, weights = verse_heads()
    breaks = (5, 6)
    last, above = [], []
    line, place, lines = 0, 0, {}  # each position's (line, place), counted here in a loop
    where = []
    for token in ids:
        where.append((line, place))
        lines[line, place] = len(where) - 1
        line, place = (line + 1, 0) if token in breaks else (line, place + 1)
    for i in range(len(ids)):
        earlier = [j for j in range(i) if ids[j] in breaks]
        if earlier:
            last.append(weights[:, :, i, earlier[-1]])
        k, p = where[i]
        if (k - 1, p) in lines:
            above.append(weights[:, :, i, lines[k - 1, p]])
    np.testing.assert_allclose(last_break_score(values, ids, breaks), np.mean(last, axis=0),
                               rtol=1e-12)
    np.testing.assert_allclose(previous_line_score(values, ids, breaks), np.mean(above, axis=0),
                               rtol=1e-12)
    assert last_break_score(values, ids, breaks).shape == (2, 3)


def test_a_head_that_reads_the_line_above_scores_one():
    ids = np.array([1, 2, 5, 3, 4, 5, 2, 2, 6])  # three lines of three tokens
    n = len(ids)
    weights = np.zeros((1, 1, n, n))
    for i in range(n):
        weights[0, 0, i, i - 3 if i >= 3 else 0] = 1.0
    values = {"blocks.0.attn.pattern": weights[0]}
    assert previous_line_score(values, ids, (5, 6))[0, 0] == 1.0
    assert last_break_score(values, ids, (5, 6))[0, 0] < 0.5


def test_the_rhyme_score_follows_its_definition():
    """Over verse_heads' ids, in which 6 ends a 下句 (as 。 does): each position whose next
    token is a 下句's last character, after the first 下句, is a query, and its key is the last
    character of the 下句 before; the score is the mean weight there, found here by a loop."""
    ids, values, weights = verse_heads()
    ids = np.concatenate([ids, [3, 3, 2, 6, 1]])  # a third 下句, and a token after it
    n = len(ids)
    scores = np.random.default_rng(1).normal(size=(2, 3, n, n)) + np.triu(np.full((n, n),
                                                                                  -np.inf), 1)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    values = {f"blocks.{i}.attn.pattern": weights[i] for i in range(2)}
    rhymes = [j for j in range(n - 1) if ids[j + 1] == 6]  # each 下句's last character
    assert rhymes == [6, 13, 19]
    expected = np.mean([weights[:, :, rhymes[m] - 1, rhymes[m - 1]]
                        for m in range(1, len(rhymes))], axis=0)
    np.testing.assert_allclose(rhyme_score(values, ids, (6,)), expected, rtol=1e-12)
    assert rhyme_score(values, ids, (6,)).shape == (2, 3)
    exact = np.zeros((1, 1, n, n))  # a head that looks only at the rhyme it must match
    exact[0, 0, np.arange(n), 0] = 1.0
    exact[0, 0, 12, 6] = exact[0, 0, 18, 13] = 1.0
    exact[0, 0, 12, 0] = exact[0, 0, 18, 0] = 0.0
    assert rhyme_score({"blocks.0.attn.pattern": exact[0]}, ids, (6,))[0, 0] == 1.0
    with pytest.raises(ValueError, match="two 下句"):
        rhyme_score(values, ids[:10], (6,))
def test_random_weights_are_titled_random_whatever_their_folder_is_called(tiny):
    """The loaded model's own word (random=True) on any kind of folder, and a folder named for
    an OpenAI size that holds another shape, are random weights; a trained model stays itself."""
    from picogpt.web.page import titled

    encoder, hparams, params = load_encoder_hparams_and_params("124M", str(tiny.models_dir))
    shape = {key: hparams[key] for key in ("n_layer", "n_head", "n_embd")}
    for model in ({"name": "124M", "kind": "released", **shape},
                  {"name": "x", "kind": "hf", "random": True, **shape},
                  {"name": "mine", "kind": "trained", "random": True, **shape}):
        assert titled(model, params, encoder) == {**model, "kind": "random"}
    mine = {"name": "mine", "kind": "trained", "random": False, **shape}
    assert titled(mine, params, encoder) == mine


# ---- the views keep only what they show ------------------------------------------------------


def long_model(n_seq: int = 1000):
    """A 2-layer, 4-head model with GPT-2's vocabulary and n_seq + 24 positions, and n_seq
    token ids in which tokens repeat (an induction score), random weights."""
    from picogpt.files.params import nest
    from scripts.fixtures.checkpoint import random_arrays

    hparams = {"n_vocab": 50257, "n_ctx": n_seq + 24, "n_embd": 64, "n_head": 4, "n_layer": 2}
    arrays = random_arrays(hparams, 3, sharp=True)
    params = nest({name.removeprefix("model/").replace("/", "."): a[0] if a.ndim == 3 else a
                   for name, a in arrays.items()})
    ids = np.random.default_rng(0).integers(0, 50257, n_seq // 2)
    return params, [*ids.tolist(), *ids.tolist()]


@pytest.mark.parametrize("lens_kept", [False, True])  # --explain's lens, and the explore page's
def test_the_views_of_a_long_text_hold_a_fraction_of_its_patterns_and_lens(vocab_dir,
                                                                          lens_kept):
    """At 1,000 positions, this model's patterns together are 32 MB and one residual stream's
    lens over the vocabulary 201 MB; the views, which make both a few rows at a time, hold under
    40 MB of arrays at their peak (NumPy reports its allocations to tracemalloc)."""
    import tracemalloc

    from picogpt.web.views import views

    params, ids = long_model()
    encoder = read_encoder(vocab_dir)
    tracemalloc.start()
    try:
        views(ids, params, 4, encoder, lens_kept=lens_kept)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40e6, f"{peak / 1e6:.0f} MB"


def test_the_views_made_in_pieces_equal_the_definitions_on_the_whole_trace(vocab_dir,
                                                                           monkeypatch):
    """With attention and GELU made 7 positions at a time and the lens 5 at a time, the
    views' attention, head scores and lens are trace's patterns, the head scores of its values
    and logit_lens of its streams (to float32 rounding: BLAS may round a piece's rows otherwise
    than the whole's)."""
    import picogpt.inside
    import picogpt.web.views
    from picogpt.inside import first_token_score, induction_score, previous_token_score
    from picogpt.web.views import views

    params, ids = long_model(60)
    monkeypatch.setattr(picogpt.web.views, "ATTENTION_ROWS", 7)
    monkeypatch.setattr(picogpt.web.views, "ATTENTION_BYTES", 4 * 2 * 4 * 30**2)  # keep 30
    monkeypatch.setattr(picogpt.inside, "LENS_CHUNK", 5)
    seen = []
    hook = picogpt.web.views.Kept.hook
    monkeypatch.setattr(picogpt.web.views.Kept, "hook", lambda self, name, value, row=0: (
        seen.append((name, value.shape)), hook(self, name, value, row))[1])
    page = views(ids, params, 4, read_encoder(vocab_dir))
    pieces = [shape for name, shape in seen if name == "blocks.1.attn.pattern"]
    assert pieces == [(4, 7, 60)] * 8 + [(4, 4, 60)]  # never the whole pattern at once
    _, values = trace(ids, params, 4)
    first, n = page["attention"]["first"], page["attention"]["n"]
    assert (first, n) == (30, 30)
    attention = np.frombuffer(base64.b64decode(page["attention"]["data"]), "<f4")
    expected = np.stack([values[f"blocks.{i}.attn.pattern"][:, first:, first:] for i in (0, 1)])
    # float32 rounding: OpenBLAS's kernel for 7 rows may round otherwise than for 60 (seen
    # here: 1e-6 of each entry too tight, 1e-5 holds)
    assert np.allclose(attention.reshape(2, 4, n, n), expected, rtol=1e-5, atol=1e-6)
    for kind, scores in {"previous": previous_token_score(values),
                         "first": first_token_score(values),
                         "induction": induction_score(values, ids)}.items():
        assert page["heads"][kind] == scores.round(4).tolist(), kind
    lens_ids, lens_probs = logit_lens(values, params, top=3)
    assert page["lens"]["probs"] == lens_probs[:, :, 0].round(4).tolist()
    encoder = read_encoder(vocab_dir)
    assert page["lens"]["text"] == [[shown(encoder, i) for i in row] for row in lens_ids[:, :, 0]]


def test_trace_pieced_by_rows_equals_the_whole_and_scores_equal_their_old_stacked_form():
    """run_with_hooks with rows gives every stream trace gives; and each head score equals its
    definition written as before, on all the blocks' patterns stacked."""
    from picogpt.inside import (
        first_token_score,
        induction_score,
        previous_token_score,
        run_with_hooks,
    )

    params, ids = long_model(50)
    _, values = trace(ids, params, 4)
    pieced = {}
    run_with_hooks(ids, params, 4, lambda name, value, row=0: pieced.setdefault(
        name, []).append(value), rows=8)
    for name in residual_names(2):  # to float32 rounding: BLAS may round a piece otherwise
        np.testing.assert_allclose(pieced[name][0], values[name], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.concatenate(pieced["blocks.1.attn.pattern"], axis=-2),
                               values["blocks.1.attn.pattern"], rtol=1e-5, atol=1e-9)
    weights = np.stack([values[f"blocks.{i}.attn.pattern"] for i in (0, 1)])
    np.testing.assert_allclose(previous_token_score(values),
                               np.diagonal(weights, -1, -2, -1).mean(-1), rtol=1e-6)
    np.testing.assert_allclose(first_token_score(values), weights[..., 1:, 0].mean(-1),
                               rtol=1e-6)
    n = len(ids)
    same = (np.array(ids)[:, None] == np.array(ids)[None, :]) & np.tri(n, k=-1, dtype=bool)
    after = np.zeros((n, n), bool)
    after[:, 1:] = same[:, :-1]
    np.testing.assert_allclose(induction_score(values, ids),
                               (weights * after).sum(-1)[..., same.any(-1)].mean(-1), rtol=1e-6)
