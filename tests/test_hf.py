"""Hugging Face GPT-2 folders (`load_hf`, `--hf`) against transformers on the same weights, and
the platform markers that decide which TensorFlow package pip installs."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import ROOT
from test_load import assert_one_line_error, picogpt

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


def test_explain_and_candidates_run_on_a_hf_folder(hf_folder, tmp_path):
    folder, _ = hf_folder
    page = tmp_path / "page.html"
    done = picogpt("Hello", "--hf", str(folder), "--n_tokens", "3", "--explain", str(page))
    assert done.returncode == 0, done.stderr
    assert page.stat().st_size > 10_000 and "Hello" in page.read_text(encoding="utf-8")


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
    with pytest.raises(PicoGPTError, match="downloads nothing from the hub"):
        load_hf("someone/not-there")


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
    (edit_config(model_type="llama"), "describes a 'llama' model; picogpt runs GPT-2's "
                                      "architecture only"),
    (lambda folder: (folder / "merges.txt").unlink(), "has no merges.txt: picogpt needs "
                                                      "GPT-2's tokenizer files"),
    (edit_config(n_embd=64), "does not match"),
    (edit_config(activation_function="relu"), "sets activation_function='relu'"),
    (lambda folder: (folder / "merges.txt").write_bytes(b"#version: 0.2\n\xff\xfe"),
     "cannot read"),
], ids=["pytorch_bin_only", "not_gpt2", "no_merges", "wrong_shape", "other_activation",
        "merges_not_utf8"])
def test_a_bad_folder_gets_one_line_and_exit_code_1(good_folder, tmp_path, change, message):
    folder = broken(good_folder, tmp_path, change)
    done = picogpt("Hello", "--hf", str(folder), "--n_tokens", "2")
    assert_one_line_error(done, message)
    with pytest.raises(PicoGPTError, match="."):
        load_hf(str(folder))


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
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "safetensors" in project["dependencies"]  # --hf on every platform


def test_intel_macs_get_tensorflow_up_to_the_last_python_it_built_for():
    environment = {"sys_platform": "darwin", "platform_machine": "x86_64",
                   "platform_system": "Darwin", "os_name": "posix"}
    assert tensorflow_packages({**environment, "python_version": "3.12"}) == ["tensorflow"]
    assert tensorflow_packages({**environment, "python_version": "3.13"}) == []
