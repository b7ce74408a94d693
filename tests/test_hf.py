"""Hugging Face GPT-2 folders (`load_hf`, `--hf`) against transformers on the same weights, and
the platform markers that decide which TensorFlow package pip installs."""

import copy
import json
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import ROOT
from test_openai import assert_one_line_error, picogpt, picogpt_child

from picogpt import PicoGPTError, generate, gpt2, load_hf, score
from scripts.fixtures.checkpoint import random_arrays
from scripts.fixtures.reference import hf_model_of

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the test extra installs tomli
    import tomli as tomllib

PROMPT = "Alan Turing theorized that computers"
# (n_layer, n_embd, n_head, seed): distilgpt2's depth (6 blocks), and a shallow one written in
# the hub's layout. Seeds chosen so greedy decoding has clear top-1/top-2 margins (asserted).
SHAPES = {"distil": (6, 64, 4, 1), "hub": (2, 64, 4, 3)}


def random_hf_model(n_layer: int, n_embd: int, n_head: int, seed: int):
    """transformers' GPT2LMHeadModel holding scripts.fixtures.checkpoint's sharp random weights."""
    hparams = {"n_vocab": 50257, "n_ctx": 128, "n_embd": n_embd, "n_head": n_head,
               "n_layer": n_layer}
    return hf_model_of(hparams, random_arrays(hparams, seed, sharp=True))


def add_tokenizer(folder: Path, vocab_dir: Path) -> None:
    """The genuine GPT-2 vocabulary under Hugging Face's file names."""
    shutil.copy(vocab_dir / "encoder.json", folder / "vocab.json")
    shutil.copy(vocab_dir / "vocab.bpe", folder / "merges.txt")


def as_hub_layout(folder: Path, n_ctx: int) -> None:
    """Rewrite model.safetensors as the hub's openai-community/gpt2 stores it: no
    `transformer.` prefix, the causal-mask buffers `h.{i}.attn.bias`, and lm_head.weight equal
    to wte."""
    from safetensors.numpy import load_file, save_file

    tensors = {key.removeprefix("transformer."): value
               for key, value in load_file(folder / "model.safetensors").items()}
    n_layer = len({key.split(".")[1] for key in tensors if key.startswith("h.")})
    mask = np.tril(np.ones((n_ctx, n_ctx), np.float32))[None, None]
    for i in range(n_layer):
        tensors[f"h.{i}.attn.bias"] = mask
    tensors["lm_head.weight"] = tensors["wte.weight"].copy()
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})


@pytest.fixture(scope="module", params=list(SHAPES))
def hf_folder(request, tmp_path_factory, vocab_dir):
    """(folder, transformers model) for each shape, written by save_pretrained."""
    n_layer, n_embd, n_head, seed = SHAPES[request.param]
    model = random_hf_model(n_layer, n_embd, n_head, seed)
    folder = tmp_path_factory.mktemp(request.param)
    model.save_pretrained(folder)
    add_tokenizer(folder, vocab_dir)
    if request.param == "hub":
        as_hub_layout(folder, 128)
        keys = json.loads((folder / "model.safetensors").read_bytes()[8:][
            : int.from_bytes((folder / "model.safetensors").read_bytes()[:8], "little")])
        assert "h.0.attn.bias" in keys and "lm_head.weight" in keys
        assert not any(key.startswith("transformer.") for key in keys)
    return folder, model


def test_load_hf_gives_transformers_logits(hf_folder):
    folder, model = hf_folder
    encoder, hparams, params = load_hf(str(folder))
    assert hparams == {"n_vocab": 50257, "n_ctx": 128, "n_embd": model.config.n_embd,
                       "n_head": model.config.n_head, "n_layer": model.config.n_layer}
    ids = encoder.encode(PROMPT)
    logits = gpt2(ids, **params, n_head=hparams["n_head"])
    with torch.no_grad():
        expected = model(torch.tensor([ids])).logits[0].numpy()
    assert logits.shape == expected.shape
    np.testing.assert_allclose(logits, expected, atol=1e-4, rtol=0)
    assert params["wte"].dtype == np.float32 and isinstance(params["wte"], np.memmap)


def hf_greedy(model, ids: list[int], n: int) -> list[int]:
    """transformers' greedy continuation, checked to be free of near-ties."""
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False,
                             output_logits=True, return_dict_in_generate=True,
                             pad_token_id=50256)
    top2 = np.sort(torch.cat(out.logits).numpy(), axis=-1)[:, -2:]
    # float32 noise in these 64-wide models is ~1e-6: a margin of 1e-3 is no near-tie
    assert (top2[:, 1] - top2[:, 0]).min() > 1e-3, "pick another seed in SHAPES"
    tokens = out.sequences[0, len(ids):].tolist()
    assert len(tokens) == n and len(set(tokens)) >= 5, "pick another seed in SHAPES"
    return tokens


def test_twenty_greedy_tokens_equal_transformers_through_the_api_and_the_cli(hf_folder):
    folder, model = hf_folder
    encoder, hparams, params = load_hf(str(folder))
    ids = encoder.encode(PROMPT)
    expected = hf_greedy(model, ids, 20)
    assert list(generate(ids, params, hparams["n_head"], 20, stop_at_end=False)) == expected
    done = picogpt(PROMPT, "--hf", str(folder), "--n_tokens", "20", "--ignore_end")
    assert done.returncode == 0, done.stderr
    assert done.stdout == encoder.decode(expected) + "\n"


def test_score_flag_equals_the_models_log_softmax(hf_folder):
    folder, model = hf_folder
    encoder, _, params = load_hf(str(folder))
    text = "The cat sat on the mat. It was a sunny day, and the cat was happy."
    ids = encoder.encode(text)
    with torch.no_grad():  # every token scored after <|endoftext|>, as picogpt scores
        logits = model(torch.tensor([[50256, *ids[:-1]]])).logits[0].double()
    expected = torch.log_softmax(logits, -1)[torch.arange(len(ids)), ids].numpy()
    done = picogpt(text, "--hf", str(folder), "--score", "--json")
    assert done.returncode == 0, done.stderr
    scored = [token["logprob"] for token in json.loads(done.stdout)["tokens"]]
    np.testing.assert_allclose(scored, expected, atol=1e-4, rtol=0)
    np.testing.assert_allclose(score(ids, params, model.config.n_head), expected, atol=1e-4)


def page_json(page: Path) -> dict:
    """The data an --explain page carries."""
    html = page.read_text(encoding="utf-8")
    start = html.index("const DATA = ") + len("const DATA = ")
    return json.JSONDecoder().raw_decode(html[start:].replace("<\\/", "</"))[0]


def test_explain_on_a_hf_folder_shows_transformers_attention(hf_folder, tmp_path):
    """The page of an --hf run carries the prompt's tokens and, for every layer and head, the
    attention transformers computes on the same folder."""
    import base64

    folder, model = hf_folder
    page = tmp_path / "page.html"
    done = picogpt("Hello", "--hf", str(folder), "--n_tokens", "3", "--explain", str(page))
    assert done.returncode == 0, done.stderr
    data = page_json(page)
    encoder, hparams, _ = load_hf(str(folder))
    ids = [token["id"] for token in data["tokens"]]
    assert ids[: data["n_prompt"]] == encoder.encode("Hello") and len(ids) == data["n_prompt"] + 3
    n = data["attention"]["n"]
    attention = np.frombuffer(base64.b64decode(data["attention"]["data"]), "<f4").reshape(
        hparams["n_layer"], hparams["n_head"], n, n)
    eager = copy.deepcopy(model)
    eager.set_attn_implementation("eager")  # sdpa does not return the attention weights
    with torch.no_grad():
        expected = eager(torch.tensor([ids]), output_attentions=True).attentions
    for i in range(hparams["n_layer"]):
        np.testing.assert_allclose(attention[i], expected[i][0, :, -n:, -n:].numpy(), atol=1e-5)


def hub_cache_layout(folder: Path, cache: Path, model_id: str) -> Path:
    """folder laid out as the hub's client writes its cache: blobs, snapshot symlinks, refs."""
    repo = cache / f"models--{model_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / "0123456789abcdef0123456789abcdef01234567"
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for i, file in enumerate(sorted(folder.iterdir())):
        blob = repo / "blobs" / f"{i:040x}"
        shutil.copy(file, blob)
        (snapshot / file.name).symlink_to(Path("../..") / "blobs" / blob.name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(snapshot.name)
    return snapshot


def test_a_model_id_is_found_in_the_local_hugging_face_cache(hf_folder, tmp_path, monkeypatch):
    folder, model = hf_folder
    cache = tmp_path / "hub"
    snapshot = hub_cache_layout(folder, cache, "someone/tiny-gpt2")
    assert (snapshot / "model.safetensors").is_symlink()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    encoder, hparams, params = load_hf("someone/tiny-gpt2")
    _, _, direct = load_hf(str(folder))
    np.testing.assert_array_equal(params["wte"], direct["wte"])
    done = picogpt("Hello", "--hf", "someone/tiny-gpt2", "--n_tokens", "4",
                   env={"HF_HUB_CACHE": str(cache)})
    assert done.returncode == 0, done.stderr
    ids = list(generate(encoder.encode("Hello"), params, hparams["n_head"], 4))
    assert done.stdout == encoder.decode(ids) + "\n"
    # HF_HOME works too: the cache is its hub/ folder
    monkeypatch.delenv("HF_HUB_CACHE")
    shutil.move(cache, tmp_path / "home" / "hub")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert load_hf("someone/tiny-gpt2")[1] == hparams
    with pytest.raises(PicoGPTError, match="no such folder. Give a folder saved with"):
        load_hf("./someone/not-there")  # a path, not a model id: the hub is not asked


@pytest.fixture(scope="module")
def good_folder(tmp_path_factory, vocab_dir) -> Path:
    folder = tmp_path_factory.mktemp("good")
    random_hf_model(1, 32, 2, 0).save_pretrained(folder)
    add_tokenizer(folder, vocab_dir)
    return folder


def broken(good_folder: Path, tmp_path: Path, change) -> Path:
    folder = tmp_path / "broken"
    shutil.copytree(good_folder, folder)
    change(folder)
    return folder


def pytorch_only(folder: Path) -> None:
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")


def edit_config(**changes):
    def change(folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, **changes}))
    return change


@pytest.mark.parametrize("change, message", [
    (pytorch_only, "has no model.safetensors; it holds pytorch_model.bin: load it with "
                   "transformers and re-save it"),
    (edit_config(model_type="mistral"), "describes a 'mistral' model; picogpt runs GPT-2's "
                                        "architecture (model_type"),
    (lambda folder: (folder / "merges.txt").unlink(), "holds no whole vocabulary "
                                                      "(vocab.json without merges.txt)"),
    (edit_config(n_embd=64), "does not match"),
    (edit_config(activation_function="relu"), "sets activation_function='relu'"),
    (edit_config(vocab_size=50000), "vocabulary holds 50257 tokens, but config.json gives the "
                                    "model 50000 (vocab_size): ids past 49999 have no row in wte"),
    (lambda folder: (folder / "merges.txt").write_bytes(b"#version: 0.2\n\xff\xfe"),
     "cannot read"),
    (lambda folder: (folder / "config.json").write_text("[" * 100_000),
     "config.json: its JSON is nested too deeply."),
    (lambda folder: (folder / "vocab.json").write_text("[" * 100_000), "vocab.json is not a BPE "
                                                                       "token table"),
], ids=["pytorch_bin_only", "not_gpt2", "no_merges", "wrong_shape", "other_activation",
        "vocabulary_past_wte", "merges_not_utf8", "config_nested_deeply",
        "vocab_nested_deeply"])
def test_a_bad_folder_gets_one_line_and_exit_code_1(good_folder, tmp_path, change, message):
    folder = broken(good_folder, tmp_path, change)
    done = picogpt("Hello", "--hf", str(folder), "--n_tokens", "2")
    assert_one_line_error(done, message)
    with pytest.raises(PicoGPTError, match=re.escape(message)):
        load_hf(str(folder))


def limited_memory() -> None:
    """A child's address space capped at 4 GB: a loader that allocates for an absurd size
    fails in seconds instead of taking the machine's memory."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def test_a_huge_n_layer_is_refused_before_anything_is_allocated(good_folder, tmp_path):
    """n_layer = 10**9 in config.json: one line naming the first block the weights lack, in a
    process that could not hold 12 * 10**9 tensor names."""
    folder = broken(good_folder, tmp_path, edit_config(n_layer=10**9))
    done = picogpt_child("Hello", "--hf", str(folder), "--n_tokens", "2",
                         preexec_fn=limited_memory)
    assert_one_line_error(done, "n_layer=1000000000) does not match")
    assert "h1.attn.c_attn.b should be (96,) but is no such tensor" in done.stderr


@pytest.mark.parametrize("where, value", [
    ("transformer.ln_f.weight", np.nan), ("transformer.h.0.mlp.c_fc.weight", np.inf),
    ("transformer.wte.weight", -np.inf)])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_weights_that_hold_nan_or_infinity_are_refused_when_they_load(good_folder, tmp_path,
                                                                      monkeypatch, where, value,
                                                                      dtype):
    """A number that is not finite, anywhere (an infinity comes with its opposite, which makes
    a sum NaN): one line naming the tensor, before anything runs, on the command line (in a
    process of its own, whose stderr shows any warning too) and with --explore (which loads
    the same way; a server that started anyway stops at once here, as at Ctrl-C)."""
    from safetensors.numpy import load_file, save_file

    from picogpt.web.server import ExploreServer

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ExploreServer, "serve_forever", interrupted)

    def spoil(folder: Path) -> None:
        tensors = {key: array.astype(dtype) for key, array in
                   load_file(folder / "model.safetensors").items()}
        tensors[where].flat[tensors[where].size // 2] = value
        if np.isinf(value):
            tensors[where].flat[tensors[where].size // 3] = -value
        save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})

    folder = broken(good_folder, tmp_path, spoil)
    name = {"transformer.ln_f.weight": "ln_f.g", "transformer.h.0.mlp.c_fc.weight":
            "h0.mlp.c_fc.w", "transformer.wte.weight": "wte"}[where]
    for done in (picogpt_child("Hello", "--hf", str(folder), "--n_tokens", "2"),
                 picogpt("Hello", "--hf", str(folder), "--explore", "--no_browser")):
        assert_one_line_error(done, f"model.safetensors holds NaN or infinity in {name}: ")
        assert done.stdout == ""


def test_hf_refuses_openai_download_flags(good_folder):
    done = picogpt("Hello", "--hf", str(good_folder), "--model_size", "355M")
    assert_one_line_error(done, "--hf names the model to run")


def test_an_lm_head_that_is_not_wte_is_refused(good_folder, tmp_path):
    from safetensors.numpy import load_file, save_file

    def untie(folder: Path) -> None:
        tensors = load_file(folder / "model.safetensors")
        tensors["lm_head.weight"] = tensors["transformer.wte.weight"] + 1
        save_file(tensors, folder / "model.safetensors")

    with pytest.raises(PicoGPTError, match="lm_head.weight that differs from wte"):
        load_hf(str(broken(good_folder, tmp_path, untie)))


# ---- which TensorFlow each platform installs -----------------------------------------------

PLATFORMS = {  # the marker environment pip sees, and the package with wheels there (2026-11)
    "macOS arm64": ({"sys_platform": "darwin", "platform_machine": "arm64",
                     "platform_system": "Darwin", "os_name": "posix"}, "tensorflow"),
    "Linux aarch64": ({"sys_platform": "linux", "platform_machine": "aarch64",
                       "platform_system": "Linux", "os_name": "posix"}, "tensorflow"),
    "Linux x86-64": ({"sys_platform": "linux", "platform_machine": "x86_64",
                      "platform_system": "Linux", "os_name": "posix"}, "tensorflow-cpu"),
    "Windows x86-64": ({"sys_platform": "win32", "platform_machine": "AMD64",
                        "platform_system": "Windows", "os_name": "nt"}, "tensorflow-cpu"),
}


def tensorflow_packages(environment: dict) -> list[str]:
    """The TensorFlow packages pyproject.toml's dependencies select in that environment."""
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    chosen = [Requirement(line) for line in project["dependencies"]]
    chosen = [r for r in chosen if r.marker is None or r.marker.evaluate(environment)]
    return [r.name for r in chosen if r.name.startswith("tensorflow")]


@pytest.mark.parametrize("platform", list(PLATFORMS))
@pytest.mark.parametrize("python", ["3.10", "3.13", "3.14"])
def test_each_platform_gets_the_tensorflow_that_has_wheels_for_it(platform, python):
    environment, package = PLATFORMS[platform]
    environment = {**environment, "python_version": python, "python_full_version": f"{python}.0",
                   "implementation_name": "cpython", "platform_python_implementation": "CPython"}
    expected = [] if python == "3.14" else [package]  # no TensorFlow wheel for 3.14 yet
    assert tensorflow_packages(environment) == expected



def test_hf_needs_no_package_beyond_numpy(good_folder, monkeypatch):
    """--hf runs on every platform NumPy runs on: it reads safetensors without the library."""
    monkeypatch.setitem(sys.modules, "safetensors", None)  # None: `import safetensors` fails
    encoder, hparams, params = load_hf(str(good_folder))
    assert params["wte"].shape == (hparams["n_vocab"], hparams["n_embd"])


def test_intel_macs_get_tensorflow_up_to_the_last_python_it_built_for():
    environment = {"sys_platform": "darwin", "platform_machine": "x86_64",
                   "platform_system": "Darwin", "os_name": "posix"}
    assert tensorflow_packages({**environment, "python_version": "3.12"}) == ["tensorflow"]
    assert tensorflow_packages({**environment, "python_version": "3.13"}) == []


# ---- what a user's folder may really hold -----------------------------------------------


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_folders_load_as_float32_and_give_transformers_logits(dtype, tmp_path,
                                                                             vocab_dir):
    """A fine-tune saved in float16 or bfloat16 (safetensors written by save_pretrained): each
    weight is read as the float32 of its stored value, and the logits are those transformers
    gives when it loads the same folder in float32."""
    from transformers import GPT2LMHeadModel

    folder = tmp_path / dtype
    random_hf_model(2, 64, 4, 3).to(getattr(torch, dtype)).save_pretrained(folder)
    add_tokenizer(folder, vocab_dir)
    header = safetensors_header_of(folder / "model.safetensors")
    assert {meta["dtype"] for key, meta in header.items() if key != "__metadata__"} == {
        {"float16": "F16", "bfloat16": "BF16"}[dtype]}
    encoder, hparams, params = load_hf(str(folder))
    reference = GPT2LMHeadModel.from_pretrained(folder, dtype=torch.float32).eval()
    np.testing.assert_array_equal(params["wte"], reference.transformer.wte.weight.detach().numpy())
    assert {a.dtype for a in (params["wte"], params["blocks"][1]["mlp"]["c_fc"]["w"])} == {
        np.dtype(np.float32)}
    ids = encoder.encode(PROMPT)
    with torch.no_grad():
        expected = reference(torch.tensor([ids])).logits[0].numpy()
    np.testing.assert_allclose(gpt2(ids, **params, n_head=hparams["n_head"]), expected, atol=1e-4)
    done = picogpt(PROMPT, "--hf", str(folder), "--n_tokens", "5", "--ignore_end")
    assert done.returncode == 0, done.stderr


def safetensors_header_of(file: Path) -> dict:
    data = file.read_bytes()
    return json.loads(data[8 : 8 + int.from_bytes(data[:8], "little")])


LFS_POINTER = ("version https://git-lfs.github.com/spec/v1\n"
               "oid sha256:248dfc3911869ec493c76e65bf2fcf7f615828b0254c12b473182f0f81d3a707\n"
               "size 548105171\n")


def write_safetensors(header: dict, data: bytes, file: Path) -> None:
    """A safetensors file with this header and these bytes after it, as it stands."""
    raw = json.dumps(header).encode()
    file.write_bytes(len(raw).to_bytes(8, "little") + raw + data)


def damage_weights(how: str):
    """A change to a good folder's model.safetensors: what a user's copy can hold."""
    def change(folder: Path) -> None:
        file = folder / "model.safetensors"
        data = file.read_bytes()
        n_header = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + n_header])
        first = next(key for key in header if key != "__metadata__")
        if how == "lfs_pointer":
            file.write_text(LFS_POINTER)
        elif how == "random_bytes":
            file.write_bytes(np.random.default_rng(0).bytes(4096))
        elif how == "empty":
            file.write_bytes(b"")
        elif how == "truncated":
            file.write_bytes(data[: len(data) // 2])
        elif how == "header_not_json":
            file.write_bytes(data[:8] + b"{" * n_header + data[8 + n_header :])
        elif how == "offsets_past_the_end":
            header[first]["data_offsets"][1] += 10**9
            write_safetensors(header, data[8 + n_header :], file)
        elif how == "oversized_header":
            file.write_bytes((2**62).to_bytes(8, "little") + data[8:])
        elif how == "shape_that_does_not_fit_its_bytes":
            header[first]["shape"] = [header[first]["shape"][0] * 2, *header[first]["shape"][1:]]
            write_safetensors(header, data[8 + n_header :], file)
        elif how == "integer_weights":
            header[first]["dtype"] = "I32"
            write_safetensors(header, data[8 + n_header :], file)
        elif how == "empty_tensor_of_absurd_shape":  # no bytes, as its shape says: numpy
            header["transformer.h.0.ln_1.extra"] = {  # cannot make an array of that shape
                "dtype": "F32", "shape": [0, 10**30], "data_offsets": [0, 0]}
            write_safetensors(header, data[8 + n_header :], file)
        elif how == "header_nested_deeply":
            raw = b"[" * 100_000
            file.write_bytes(len(raw).to_bytes(8, "little") + raw + data[8 + n_header :])
    return change


@pytest.mark.parametrize("how, message", [
    ("lfs_pointer", f"is a Git LFS pointer ({len(LFS_POINTER)} bytes), not the weights: the "
                    f"folder was cloned without git-lfs. Run 'git lfs install' and 'git lfs pull'"),
    ("random_bytes", "is not a safetensors file (4096 bytes"),
    ("empty", "is not a safetensors file (0 bytes"),
    ("truncated", "is truncated or damaged: tensor"),
    ("header_not_json", "is not a safetensors file"),
    ("offsets_past_the_end", "is truncated or damaged: tensor"),
    ("oversized_header", "is not a safetensors file"),
    ("shape_that_does_not_fit_its_bytes", "is truncated or damaged: tensor"),
    ("integer_weights", "picogpt reads F32, F16, BF16 and F64 weights"),
    ("empty_tensor_of_absurd_shape", "is truncated or damaged: tensor transformer.h.0.ln_1.extra"),
    ("header_nested_deeply", "is not a safetensors file"),
])
def test_a_weights_file_that_is_not_what_it_claims_is_named_in_one_line(good_folder, tmp_path,
                                                                         how, message):
    folder = broken(good_folder, tmp_path, damage_weights(how))
    before = tree_bytes(folder)
    done = picogpt("Hello", "--hf", str(folder), "--n_tokens", "2")
    assert_one_line_error(done, message)
    assert tree_bytes(folder) == before  # read, never written


def tree_bytes(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize("key, value", [
    ("activation_function", "relu"), ("layer_norm_epsilon", 1e-6), ("scale_attn_weights", False),
    ("scale_attn_by_inverse_layer_idx", True), ("reorder_and_upcast_attn", True),
    ("add_cross_attention", True), ("n_inner", 100),
])
def test_every_config_field_that_changes_the_math_is_refused(good_folder, tmp_path, key, value):
    """Each of these would give other logits than GPT-2's math (transformers honours them)."""
    folder = broken(good_folder, tmp_path, edit_config(**{key: value}))
    done = picogpt("Hello", "--hf", str(folder), "--n_tokens", "2")
    assert_one_line_error(done, f"sets {key}={value!r}")


# ---- the Hugging Face cache, laid out by the hub client's rules ---------------------------


def hub_client(code: str, env: dict) -> str:
    """What huggingface_hub itself says, in a child with exactly this environment (it reads
    the cache's location once, at import)."""
    import subprocess
    import sys

    keep = {name: os.environ[name] for name in ("PATH", "SYSTEMROOT") if name in os.environ}
    done = subprocess.run([sys.executable, "-c", "import huggingface_hub, sys; " + code],
                          capture_output=True, text=True, env={**keep, "HF_HUB_OFFLINE": "1",
                                                               **env}, check=True)
    return done.stdout.strip()


CACHE_VARIABLES = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME")


@pytest.mark.parametrize("setting", ["default", "XDG_CACHE_HOME", "HF_HOME",
                                     "HUGGINGFACE_HUB_CACHE", "HF_HUB_CACHE"])
def test_the_cache_is_where_the_hub_client_puts_it(setting, tmp_path, monkeypatch):
    """Each way of placing the cache, the default (~/.cache/huggingface/hub) included, against
    huggingface_hub's own constant."""
    env = {"HOME": str(tmp_path / "home")}
    if setting != "default":
        env[setting] = str(tmp_path / setting.lower())
    for name in CACHE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    from picogpt.files.hf import hub_cache

    expected = hub_client("import huggingface_hub.constants as c; print(c.HF_HUB_CACHE)", env)
    assert hub_cache() == Path(expected)


def test_refs_main_names_the_snapshot_even_when_a_newer_one_is_there(hf_folder, good_folder,
                                                                     tmp_path, monkeypatch):
    """Two snapshots of one model, refs/main naming the older: picogpt runs the one the hub
    client resolves, here from the default cache location (no variable set)."""
    folder, _ = hf_folder
    home = tmp_path / "home"
    cache = home / ".cache" / "huggingface" / "hub"
    main = hub_cache_layout(folder, cache, "someone/tiny-gpt2")
    newer = main.parent / ("f" * 40)  # another revision, made later: not what main names
    shutil.copytree(good_folder, newer)
    os.utime(newer, (main.stat().st_mtime + 100,) * 2)
    for name in CACHE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    resolved = hub_client("print(huggingface_hub.snapshot_download('someone/tiny-gpt2', "
                          "local_files_only=True))", {"HOME": str(home)})
    assert Path(resolved) == main
    _, hparams, params = load_hf("someone/tiny-gpt2")
    np.testing.assert_array_equal(params["wte"], load_hf(str(folder))[2]["wte"])
    done = picogpt("Hello", "--hf", "someone/tiny-gpt2", "--n_tokens", "3",
                   env={"HOME": str(home)})
    assert done.returncode == 0, done.stderr
    assert done.stdout == picogpt("Hello", "--hf", str(main), "--n_tokens", "3").stdout


ODD_VALUES = [0, -1, 2.5, "12", None, [64], {"a": 1}, True, 10**12]


def fuzz_change(rng: np.random.Generator):
    """One random change to one file of a good folder, and a name for it."""
    file = rng.choice(["config.json", "vocab.json", "merges.txt", "model.safetensors"])
    kind = rng.choice(["missing", "truncated", "random", "flipped", "pointer", "values"])
    cut, odd = int(rng.integers(0, 400)), ODD_VALUES[int(rng.integers(len(ODD_VALUES)))]
    seed = int(rng.integers(1 << 30))

    def change(folder: Path) -> None:
        path = folder / file
        data = path.read_bytes()
        if kind == "missing":
            path.unlink()
        elif kind == "truncated":
            path.write_bytes(data[: cut if file != "vocab.json" else cut * 1000])
        elif kind == "random":
            path.write_bytes(np.random.default_rng(seed).bytes(cut * 10))
        elif kind == "flipped":  # a few bytes of the start, where the headers are, changed
            flipped = bytearray(data)
            for at in np.random.default_rng(seed).integers(0, min(len(data), 600), 5):
                flipped[at] ^= 1 << int(at % 8)
            path.write_bytes(bytes(flipped))
        elif kind == "pointer":
            path.write_text(LFS_POINTER)
        elif file == "config.json":  # a value of GPT-2's shape made odd
            key = ["vocab_size", "n_positions", "n_embd", "n_head", "n_layer", "n_inner"][cut % 6]
            edit_config(**{key: odd})(folder)
        elif file == "model.safetensors":  # one tensor's header entry made odd
            n_header = int.from_bytes(data[:8], "little")
            header = json.loads(data[8 : 8 + n_header])
            key = sorted(k for k in header if k != "__metadata__")[cut % (len(header) - 1)]
            field = ["dtype", "shape", "data_offsets"][cut % 3]
            header[key][field] = odd if field != "dtype" else ["I64", "F8", "BOOL", "x"][cut % 4]
            write_safetensors(header, data[8 + n_header :], path)
        else:
            path.write_text(json.dumps(odd) if file == "vocab.json" else str(odd))
    return f"{file}:{kind}:{cut}:{odd!r}", change


def test_fuzzed_hf_folders_end_in_text_or_one_line(good_folder, tmp_path):
    """60 random damages to a good folder's files: each run prints text (exit 0) or one line
    (exit 1), never a traceback, and the folder keeps every byte."""
    rng = np.random.default_rng(2026)
    endings = {0: 0, 1: 0}
    for i in range(60):
        name, change = fuzz_change(rng)
        folder = tmp_path / f"case{i}"
        shutil.copytree(good_folder, folder)
        change(folder)
        before = tree_bytes(folder)
        done = picogpt("Hello", "--hf", str(folder), "--n_tokens", "2")
        assert "Traceback" not in done.stderr, (name, done.stderr)
        if done.returncode:
            assert_one_line_error(done, "")
        endings[done.returncode] += 1
        assert tree_bytes(folder) == before, name
        shutil.rmtree(folder)
    assert endings[1] >= 30  # most damages are refused, not run
