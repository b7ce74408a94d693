"""The table of model kinds (kinds.py): each row's shapes, first weights, forward pass, loss,
trace and decoding step agree with one another and with the kind's own modules; hparams are
saved as the kind declares them; an unknown kind is one line that names the kinds."""

import json

import numpy as np
import pytest
from test_openai import assert_one_line_error, picogpt

from picogpt.backward import cross_entropy
from picogpt.errors import PicoGPTError
from picogpt.files.loaded_model import load_model
from picogpt.files.params import check_hparams
from picogpt.files.store import save_model
from picogpt.kinds import KINDS, kind_of
from picogpt.kvcache import KVCache, prefill
from picogpt.model import gpt2
from picogpt.transformer import encode
from picogpt.tree import flatten

HPARAMS = {"gpt2": {"n_vocab": 11, "n_ctx": 8, "n_embd": 8, "n_head": 2, "n_layer": 2},
           "transformer": {"model": "transformer", "n_vocab": 11, "n_ctx": 8, "n_embd": 8,
                           "n_head": 2, "n_layer": 1, "n_dec_layer": 2, "norm_first": True},
           "llama": {"model": "llama", "n_vocab": 11, "n_ctx": 8, "n_embd": 8, "n_head": 2,
                     "n_kv_head": 1, "d_head": 4, "n_ffn": 12, "n_layer": 2, "rope_theta": 1e4,
                     "norm_eps": 1e-6, "tied": True, "qkv_bias": False, "qk_norm": False},
           # the training-only variant with GPT-2's switches: a table, LayerNorm's biases
           "variant": {"model": "variant", "n_vocab": 11, "n_ctx": 8, "n_embd": 8, "n_head": 2,
                       "n_kv_head": 2, "d_head": 4, "n_ffn": 32, "n_layer": 2,
                       "rope_theta": 1e4, "norm_eps": 1e-5, "norm": "layer",
                       "positions": "learned", "mlp": "gelu", "bias": True, "qk_norm": False,
                       "tied": True, "zero_proj": False}}


def inputs(name: str, rng) -> tuple:
    """A batch of two rows for the kind, and the ids each position should predict."""
    if name == "transformer":
        src, tgt = rng.integers(0, 11, (2, 5)), rng.integers(0, 11, (2, 7))
        return (src, tgt[:, :-1]), (src, tgt[:, :-1], tgt[:, 1:]), tgt[:, 1:]
    ids = rng.integers(0, 11, (2, 7))
    return ids[:, :-1], (ids[:, :-1], ids[:, 1:]), ids[:, 1:]


@pytest.mark.parametrize("name", list(KINDS))
def test_each_rows_init_shapes_forward_loss_and_trace_agree(name):
    kind, hparams = KINDS[name], HPARAMS[name]
    assert kind_of(hparams) is kind
    params = kind.init(hparams, np.random.default_rng(0))
    assert {k: a.shape for k, a in flatten(params).items()} == kind.shapes(hparams)
    assert all(a.dtype == np.float32 for a in flatten(params).values())
    x, batch, targets = inputs(name, np.random.default_rng(1))
    logits = kind.forward(x, params, hparams)
    assert logits.shape == (*targets.shape, hparams["n_vocab"]) == (2, 6, 11)
    loss, grads = kind.loss_and_grads(batch, params, hparams)
    assert loss == pytest.approx(cross_entropy(logits, targets)[0], rel=1e-5)
    assert {k: g.shape for k, g in flatten(grads).items()} == kind.shapes(hparams)
    traced, values = kind.trace(tuple(part[0] for part in x) if name == "transformer" else x[0],
                                params, hparams)
    np.testing.assert_allclose(traced, logits[0], rtol=1e-5, atol=1e-5)
    assert values  # the named values a page draws
    assert kind.n_vocab(params) == hparams["n_vocab"]
    assert kind.n_ctx(hparams, params) == hparams["n_ctx"]


def test_gpt2s_forward_is_model_py_and_its_decode_step_the_caches():
    """GPT-2's row points at model.py's gpt2 and kvcache's step: one position through the cache
    gives the last row of the whole forward pass."""
    kind, hparams = KINDS["gpt2"], HPARAMS["gpt2"]
    params = kind.init(hparams, np.random.default_rng(2))
    ids = np.array([3, 1, 4, 1, 5])
    np.testing.assert_array_equal(kind.forward(ids, params, hparams),
                                  gpt2(ids, **params, n_head=2))
    cache = KVCache(params, 2, 8)
    prefill(ids[:4], params, 2, cache)  # the first four, as a prompt
    step = kind.decode_step(np.array(ids[4]), params, hparams, cache)
    np.testing.assert_allclose(step, kind.forward(ids, params, hparams)[-1], atol=1e-5)


def test_the_encoder_decoders_decode_step_is_its_forwards_last_row():
    kind, hparams = KINDS["transformer"], HPARAMS["transformer"]
    params = kind.init(hparams, np.random.default_rng(3))
    src, tgt = np.array([[1, 2, 3]]), np.array([[10, 4, 5]])
    memory = encode(src, params, 2, -1, True)
    np.testing.assert_allclose(kind.decode_step(tgt, params, hparams, memory),
                               kind.forward((src, tgt), params, hparams)[:, -1], atol=1e-6)


@pytest.mark.parametrize("name", list(KINDS))
def test_param_groups_hold_every_weight_once_and_decay_today_what_ndim_did(name):
    """matrices, embeddings, gains and biases: every flat name in one group; the default decay
    (matrices and embeddings) is every 2-D array, which AdamW decayed before groups, wte and wpe
    (or the encoder-decoder's table) included."""
    kind = KINDS[name]
    params = kind.init(HPARAMS[name], np.random.default_rng(0))
    groups = kind.param_groups(params)
    assert set(groups) == {"matrices", "embeddings", "gains", "biases"}
    names = [n for group in groups.values() for n in group]
    assert sorted(names) == sorted(flatten(params))
    assert set(groups["matrices"] + groups["embeddings"]) == {
        n for n, a in flatten(params).items() if a.ndim == 2}
    assert set(groups["embeddings"]) == {"gpt2": {"wte", "wpe"}, "transformer": {"embed"},
                                         "llama": {"embed_tokens.weight"},
                                         "variant": {"embed_tokens.weight", "wpe.weight"}}[name]


@pytest.mark.parametrize("name", list(KINDS))
def test_hparams_are_saved_as_the_kind_declares_them(tmp_path, name):
    """Every key of the kind, "model" for all but GPT-2 (a folder written before the table has
    none); a key of no kind is left out; the folder loads as that kind."""
    kind, hparams = KINDS[name], HPARAMS[name]
    params = kind.init(hparams, np.random.default_rng(0))
    save_model(tmp_path / "m", {**hparams, "stray": 1}, params, None,
               {"chars.json": [*"abcdefghi", "<|unknown|>", "<|start|>"]})
    saved = json.loads((tmp_path / "m" / "hparams.json").read_text())
    assert saved == hparams and ("model" in saved) == (name != "gpt2")
    loaded = load_model("m", str(tmp_path))
    assert loaded.kind is kind and loaded.about()["kind"] == "trained"


def test_a_kind_that_declares_more_keys_keeps_them(monkeypatch):
    """A third kind's keys (n_kv_head, rope_theta) are saved, not filtered to GPT-2's."""
    from dataclasses import replace

    from picogpt import kinds
    from picogpt.kinds import positive, whole

    third = replace(kinds.GPT2, name="third", hparams={**kinds.GPT2.hparams,
                                                       "n_kv_head": whole, "rope_theta": positive})
    monkeypatch.setitem(kinds.KINDS, "third", third)
    hparams = {**HPARAMS["gpt2"], "model": "third", "n_kv_head": 1, "rope_theta": 1e4}
    assert check_hparams(hparams, "h.json", "fix it") == hparams
    with pytest.raises(PicoGPTError, match=r"h.json is not GPT-2 hparams \(it needs positive "
                                           r"integers n_vocab, n_ctx, n_embd, n_head, n_layer, "
                                           r"n_kv_head; positive numbers rope_theta\); fix it"):
        check_hparams({**hparams, "rope_theta": 0}, "h.json", "fix it")


def test_an_unknown_kind_in_a_folder_is_one_line_naming_the_kinds(tmp_path):
    kind, hparams = KINDS["gpt2"], HPARAMS["gpt2"]
    save_model(tmp_path / "m", hparams, kind.init(hparams, np.random.default_rng(0)), None,
               {"chars.json": [*"abcdefghi", "<|unknown|>", "<|start|>"]})
    (tmp_path / "m" / "hparams.json").write_text(json.dumps({**hparams, "model": "mamba"}))
    message = (f"{tmp_path / 'm' / 'hparams.json'} names a kind of model picogpt does not know "
               "(model 'mamba'); picogpt knows gpt2, transformer, llama, variant.")
    with pytest.raises(PicoGPTError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_model("m", str(tmp_path))
    assert_one_line_error(picogpt("ab", "--model_size", "m", "--models_dir", str(tmp_path)),
                          message)


def test_an_encoder_decoder_folder_written_before_the_table_loads_unchanged(tmp_path):
    """hparams.json as the couplet task wrote it before the table (its keys in that order)."""
    hparams = HPARAMS["transformer"]
    params = KINDS["transformer"].init(hparams, np.random.default_rng(0))
    save_model(tmp_path / "dui", hparams, params, None,
               {"chars.json": [*"abcdefghi", "<|unknown|>", "<|start|>"]})
    old = {"n_vocab": 11, "n_ctx": 8, "n_embd": 8, "n_head": 2, "n_layer": 1,
           "model": "transformer", "n_dec_layer": 2, "norm_first": True}
    (tmp_path / "dui" / "hparams.json").write_text(json.dumps(old))
    loaded = load_model("dui", str(tmp_path))
    assert loaded.kind is KINDS["transformer"] and loaded.hparams == hparams
    for key, array in flatten(params).items():
        np.testing.assert_array_equal(flatten(loaded.params)[key], array)


def test_the_llama_row_is_the_third_and_points_at_the_llama_package():
    """The LLaMA kind is one row of the table, its functions the book package's own."""
    from picogpt.llama import engine, train

    row = KINDS["llama"]
    assert list(KINDS)[:3] == ["gpt2", "transformer", "llama"] and row.name == "llama"
    assert kind_of({"model": "llama"}) is row and not row.seq2seq
    assert (row.init, row.forward, row.loss_and_grads, row.trace, row.decode_step,
            row.engine) == (train.init_params, train.logits, train.loss_and_grads, train.trace,
                            engine.decode_step, engine)


def llama_hf_folder(folder, rng) -> dict:
    """A Hugging Face folder of the LLaMA kind, as python -m picogpt.train --model llama writes
    one (config.json, model.safetensors, a character tokenizer.json), and picogpt's hparams.json
    beside it; its params."""
    import safetensors.numpy

    from picogpt.chars import Chars
    from picogpt.llama.folder import hf_arrays, hf_files

    chars = Chars([*"abcdefghi", "<|unknown|>", "<|start|>"])
    hparams = {**HPARAMS["llama"], "n_vocab": chars.n_vocab}
    params = KINDS["llama"].init(hparams, rng)
    folder.mkdir()
    for name, value in hf_files(hparams, chars.tokens, chars.start, chars.unknown).items():
        (folder / name).write_text(json.dumps(value))
    safetensors.numpy.save_file(hf_arrays(params), folder / "model.safetensors")
    (folder / "hparams.json").write_text(json.dumps(hparams))
    return params


@pytest.mark.parametrize("name", ["gpt2", "transformer", "llama", "llama-hf"])
def test_a_folder_of_each_kind_loads_as_the_row_kind_of_gives(tmp_path, monkeypatch, name):
    """Loading a model folder decides its kind in one place, kinds.kind_of, from its hparams (a
    Hugging Face folder's config.json read into them): with each row swapped for a marked copy
    in the table, the folder loads as the marked copy, and runs through it."""
    from dataclasses import replace

    from picogpt import kinds
    from picogpt.generate import generate

    kind = KINDS[name.removesuffix("-hf")]
    rng = np.random.default_rng(0)
    if name == "llama-hf":
        params = llama_hf_folder(tmp_path / "m", rng)
    else:
        params = kind.init(HPARAMS[name], rng)
        save_model(tmp_path / "m", HPARAMS[name], params, None,
                   {"chars.json": [*"abcdefghi", "<|unknown|>", "<|start|>"]})
    marked = {key: replace(row, title=f"marked {row.title}") for key, row in KINDS.items()}
    monkeypatch.setattr(kinds, "KINDS", marked)
    loaded = load_model("m", str(tmp_path))
    assert loaded.kind is marked[kind.name] and loaded.source == "trained"
    for key, array in flatten(params).items():
        np.testing.assert_array_equal(flatten(loaded.params)[key], array)
    if not kind.seq2seq:  # generate runs it with the row's forward: greedy is its argmax
        heads = loaded.kind.runs_with(loaded.hparams)
        first = next(generate([1, 2], loaded.params, heads, 3, encoder=loaded.encoder))
        forward = loaded.kind.forward(np.array([1, 2]), loaded.params, loaded.hparams)
        assert first == int(np.argmax(forward[-1]))
