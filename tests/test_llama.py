"""The LLaMA kind's forward (picogpt/llama/model.py) against transformers' LlamaForCausalLM,
Qwen2ForCausalLM and Qwen3ForCausalLM on the same lively random weights."""

import doctest
import json
import re

import numpy as np
import pytest
import torch
from test_openai import assert_one_line_error, picogpt

from picogpt import PicoGPTError, generate, load_hf
from picogpt.files.llama_hf import nest_llama
from picogpt.generate import decode_samples, generate_samples
from picogpt.kinds import KINDS as KIND_ROWS
from picogpt.llama import model as llama_model
from picogpt.llama.engine import LlamaCache, decode_step, prefill
from picogpt.llama.model import HPARAMS, grouped_attention, llama, rms_norm, rope, rope_angles
from picogpt.model import softmax
from picogpt.sampling import Sampling, sample_rngs
from scripts.fixtures.llama import random_llama, save_llama, state_arrays

# (kind, tied): each kind with its head tied and untied
KINDS = [("llama", False), ("llama", True), ("qwen2", True), ("qwen2", False), ("qwen3", True),
         ("qwen3", False)]


def forward_hparams(config) -> dict:
    """The hparams llama() reads, from a transformers config."""
    return {"n_head": config.num_attention_heads, "n_kv_head": config.num_key_value_heads,
            "d_head": getattr(config, "head_dim", None)
            or config.hidden_size // config.num_attention_heads,
            "rope_theta": config.rope_parameters["rope_theta"], "norm_eps": config.rms_norm_eps}


def test_doctests_run():
    failed, tried = doctest.testmod(llama_model)
    assert tried >= 5 and failed == 0


@pytest.mark.parametrize("kind,tied", KINDS)
def test_logits_equal_transformers(kind, tied):
    model = random_llama(kind, tied, seed=1)
    params = nest_llama(state_arrays(model))
    assert ("lm_head" in params) == (not tied)
    ids = np.random.default_rng(2).integers(0, model.config.vocab_size, 100)
    with torch.no_grad():
        theirs = model(torch.from_numpy(ids)[None]).logits[0].numpy()
    ours = llama(ids, **params, **forward_hparams(model.config))
    assert ours.shape == theirs.shape == (100, model.config.vocab_size)
    assert ours.dtype == np.float32
    assert theirs.std() > 1  # lively: logits spread over units, not hundredths
    # float32 sums in another order: the logits (size ~10) agree to a few 1e-6
    assert np.abs(ours - theirs).max() < 1e-4


def test_batch_rows_equal_each_row_alone():
    model = random_llama("qwen3", tied=False, seed=3)
    params, hparams = nest_llama(state_arrays(model)), forward_hparams(model.config)
    ids = np.random.default_rng(4).integers(0, model.config.vocab_size, (3, 20))
    batch = llama(ids, **params, **hparams)
    assert batch.shape == (3, 20, model.config.vocab_size)
    for row, logits in zip(ids, batch):
        np.testing.assert_allclose(logits, llama(row, **params, **hparams), atol=1e-5)


def test_hparams_names_the_forwards_arguments():
    assert set(HPARAMS) <= set(llama.__code__.co_varnames)


def test_rms_norm_against_the_formula():
    x = np.random.default_rng(5).standard_normal((4, 16)).astype(np.float32) * 3
    weight = np.linspace(0.5, 2, 16, dtype=np.float32)
    expected = [w * v / np.sqrt((v ** 2).sum() / 16 + 1e-6) for v in x for w in [weight]]
    np.testing.assert_allclose(rms_norm(x, weight, 1e-6), expected, rtol=1e-6)


def test_rope_keeps_lengths_and_depends_only_on_distance():
    rng = np.random.default_rng(6)
    q, k = rng.standard_normal((2, 8)).astype(np.float32)
    turned = []
    for start in (0, 37):
        cos, sin = rope_angles(start, 3, 8, 10000.0)  # positions start, start + 1, start + 2
        turned.append(rope(q, cos[2], sin[2]) @ rope(k, cos[0], sin[0]))
        np.testing.assert_allclose(np.linalg.norm(rope(q, cos[2], sin[2])), np.linalg.norm(q),
                                   rtol=1e-6)
    assert turned[0] == pytest.approx(turned[1], rel=1e-5)


def test_grouped_attention_against_a_loop():
    rng = np.random.default_rng(7)
    q = rng.standard_normal((6, 5, 4)).astype(np.float32)  # 6 query heads
    k, v = rng.standard_normal((2, 2, 5, 4)).astype(np.float32)  # 2 key/value heads
    out = grouped_attention(q, k, v)
    assert out.shape == (6, 5, 4)
    for head in range(6):
        kv = head // 3  # heads 0-2 share key/value head 0, heads 3-5 head 1
        for i in range(5):
            weights = softmax(k[kv, : i + 1] @ q[head, i] / 2.0)
            np.testing.assert_allclose(out[head, i], weights @ v[kv, : i + 1], atol=1e-6)


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    """The user's cache directory, where converted stores go: a fresh one per test."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def logits_of(model, ids) -> np.ndarray:
    with torch.no_grad():
        return model(torch.from_numpy(np.asarray(ids))[None]).logits[0].numpy()


@pytest.mark.parametrize("kind,tied,dtype,shard", [
    ("llama", False, "float32", False), ("qwen2", True, "bfloat16", False),
    ("qwen3", False, "float16", True), ("qwen3", True, "bfloat16", True)])
def test_load_hf_folder_gives_transformers_logits(kind, tied, dtype, shard, tmp_path,
                                                  cache_home):
    folder = tmp_path / "model"
    reference = save_llama(random_llama(kind, tied, seed=5), folder, dtype, shard)
    assert (folder / "model.safetensors.index.json").is_file() == shard
    encoder, hparams, params = load_hf(str(folder))
    assert hparams["model"] == "llama" and hparams["tied"] == tied
    assert hparams["qkv_bias"] == (kind == "qwen2") and hparams["qk_norm"] == (kind == "qwen3")
    n_vocab = encoder.n_vocab  # 257: the rows past the tokenizer's are cut
    assert params["embed_tokens"]["weight"].shape == (n_vocab, 64) and hparams["n_vocab"] == 257
    ids = np.random.default_rng(6).integers(0, n_vocab, 60)
    ours = llama(ids, **params, **{name: hparams[name] for name in HPARAMS})
    theirs = logits_of(reference, ids)[:, :n_vocab]
    assert ours.shape == theirs.shape == (60, n_vocab)
    assert np.abs(ours - theirs).max() < 1e-4
    assert not any(p.name != "model" for p in folder.parent.iterdir() if p != cache_home)
    assert len(list(cache_home.glob("picogpt/converted/*/params/*.npy"))) == len(
        [n for n in state_arrays(reference) if "rotary" not in n])


@pytest.fixture(scope="module")
def saved_qwen2(tmp_path_factory):
    """A tied Qwen2 folder in bfloat16, written once for the tests that only read it."""
    folder = tmp_path_factory.mktemp("qwen2") / "model"
    return folder, save_llama(random_llama("qwen2", True, seed=8), folder, "bfloat16")


def test_a_warm_start_maps_the_store_without_converting(saved_qwen2, cache_home, capsys):
    folder, _ = saved_qwen2
    load_hf(str(folder))
    assert "converting" in capsys.readouterr().err
    _, _, params = load_hf(str(folder))
    assert "converting" not in capsys.readouterr().err
    assert isinstance(params["blocks"][1]["mlp"]["up_proj"]["weight"].base, np.memmap)


def test_changed_weights_are_converted_again(tmp_path, cache_home):
    folder = tmp_path / "model"
    save_llama(random_llama("qwen3", True, seed=1), folder)
    load_hf(str(folder))
    reference = save_llama(random_llama("qwen3", True, seed=2), folder)  # the same shapes
    _, hparams, params = load_hf(str(folder))
    ids = [1, 2, 3]
    np.testing.assert_allclose(llama(ids, **params, **{n: hparams[n] for n in HPARAMS}),
                               logits_of(reference, ids)[:, :257], atol=1e-4)


def edited_config(folder, **changes) -> None:
    import json

    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))


@pytest.mark.parametrize("changes,said", [
    ({"model_type": "mistral"}, "describes a 'mistral' model"),
    ({"hidden_size": 96}, "disagree: embed_tokens.weight should be (320, 96) but is (320, 64)"),
    ({"tie_word_embeddings": False}, "lm_head.weight should be (320, 64) but is no such tensor"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "sets rope_type='yarn'"),
    ({"rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5, "factor": 8.0}},
     "sets rope_type='llama3'"),  # Llama 3.1's, as transformers 5 writes it
    ({"hidden_act": "gelu"}, "sets hidden_act='gelu'")])
def test_a_config_picogpt_does_not_compute_is_refused(saved_qwen2, tmp_path, cache_home,
                                                      changes, said):
    import shutil

    folder = tmp_path / "model"
    shutil.copytree(saved_qwen2[0], folder)
    edited_config(folder, **changes)
    with pytest.raises(PicoGPTError, match=re.escape(said)):
        load_hf(str(folder))
    assert not cache_home.exists()  # refused before any conversion


@pytest.mark.parametrize("shard", ["../outside.safetensors", "/etc/passwd", "sub/x.safetensors"])
def test_an_index_naming_a_file_outside_the_folder_is_refused(tmp_path, cache_home, shard):
    import json

    folder = tmp_path / "model"
    save_llama(random_llama("llama", False, seed=1), folder, shard=True)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    first = next(iter(index["weight_map"]))
    index["weight_map"][first] = shard
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(PicoGPTError, match="not a file inside the folder"):
        load_hf(str(folder))


def engine_model(kind: str, tied: bool, seed: int):
    """(transformers model, params, hparams as load_hf gives them, with their kind's engine: what
    generate takes in n_head's place) for a random model."""
    model = random_llama(kind, tied, seed=seed)
    config = model.config
    hparams = {"model": "llama", "n_ctx": config.max_position_embeddings,
               **forward_hparams(config)}
    return model, nest_llama(state_arrays(model)), KIND_ROWS["llama"].runs_with(hparams)


@pytest.mark.parametrize("kind,tied", [("llama", False), ("qwen2", True), ("qwen3", False)])
def test_greedy_tokens_equal_transformers_generate(kind, tied):
    model, params, hparams = engine_model(kind, tied, seed=11)
    prompt = [5, 77, 190, 3, 42]
    with torch.no_grad():
        theirs = model.generate(torch.tensor([prompt]), max_new_tokens=30, do_sample=False,
                                min_new_tokens=30, pad_token_id=0)[0, len(prompt):].tolist()
    ours = list(generate(prompt, params, hparams, 30, stop_at_end=False))
    assert ours == theirs and len(set(ours)) >= 3  # not one token over and over


def test_cached_steps_equal_one_full_forward():
    _, params, hparams = engine_model("qwen3", False, seed=12)
    ids = list(np.random.default_rng(13).integers(0, 320, 40))
    full = llama(ids, **params, **{name: hparams[name] for name in HPARAMS})  # [40, n_vocab]
    cache = LlamaCache(params, hparams, 40, batch=(1,))
    steps = [prefill([ids[:7]], params, hparams, cache, chunk=3)[0]]  # three passes
    steps += [decode_step([token], params, hparams, cache)[0] for token in ids[7:]]
    assert cache.n_past == 40 and cache.layers[0].k.shape == (1, 2, 40, 32)  # 2 kv heads only
    np.testing.assert_allclose(np.array(steps), full[6:], atol=2e-5)


def test_samples_sharing_a_prompt_equal_each_sample_alone():
    _, params, hparams = engine_model("qwen2", True, seed=14)
    prompt, settings = [9, 8, 7, 6], {"top_k": 20, "seed": 3, "stop_at_end": False}
    together = {}
    for i, token in generate_samples(prompt, params, hparams, 12, n_samples=3, **settings):
        together.setdefault(i, []).append(token)
    rngs = sample_rngs(3, 3)
    for i in range(3):
        alone = decode_samples(prompt, params, hparams, 12, Sampling(20, None, 1.0, 1.0),
                               [rngs[i]], None)
        assert [token for _, token in alone] == together[i]
    assert together[0] != together[1]


@pytest.fixture(scope="module")
def cli_folder(tmp_path_factory):
    """An untied Llama folder in float32 and its transformers model, for the command line."""
    folder = tmp_path_factory.mktemp("llama") / "model"
    return folder, save_llama(random_llama("llama", False, seed=21, vocab_size=257), folder)


def test_cli_prints_transformers_greedy_tokens(cli_folder, cache_home):
    folder, model = cli_folder
    encoder, _, _ = load_hf(str(folder))
    prompt = encoder.encode("Tom and")
    with torch.no_grad():
        theirs = model.generate(torch.tensor([prompt]), max_new_tokens=12, do_sample=False,
                                min_new_tokens=12, pad_token_id=0)[0, len(prompt):].tolist()
    done = picogpt("Tom and", "--hf", str(folder), "--n_tokens", "12")
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip("\n") == encoder.decode(theirs)


def test_cli_samples_stop_and_candidates_run(cli_folder, cache_home):
    folder, _ = cli_folder
    done = picogpt("Tom", "--hf", str(folder), "--n_tokens", "6", "--n_samples", "2",
                   "--top_k", "5", "--seed", "1")
    assert done.returncode == 0 and done.stdout.count("sample") == 2, done.stderr
    done = picogpt("Tom", "--hf", str(folder), "--n_tokens", "6", "--candidates", "3")
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 8, done.stderr


def test_cli_score_leaves_the_first_token_unscored_and_equals_transformers(cli_folder,
                                                                           cache_home):
    folder, model = cli_folder
    done = picogpt("Tom and Ann", "--hf", str(folder), "--score", "--json")
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    ids = load_hf(str(folder))[0].encode("Tom and Ann")
    logprobs = torch.log_softmax(torch.from_numpy(logits_of(model, ids)), -1).numpy()
    expected = logprobs[np.arange(len(ids) - 1), ids[1:]]  # position j predicts ids[j + 1]
    assert [token["id"] for token in said["tokens"]] == ids[1:]
    np.testing.assert_allclose([token["logprob"] for token in said["tokens"]], expected,
                               atol=1e-4)


def test_cli_refusals_are_one_line(cli_folder, tmp_path, cache_home):
    import shutil

    folder = tmp_path / "model"
    shutil.copytree(cli_folder[0], folder)
    edited_config(folder, num_key_value_heads=4)  # 4 kv heads where the weights hold 2
    assert_one_line_error(picogpt("Tom", "--hf", str(folder)), "disagree: h0.self_attn.k_proj")
    edited_config(folder, model_type="gemma3")
    assert_one_line_error(picogpt("Tom", "--hf", str(folder)), "describes a 'gemma3' model")


def test_a_hub_id_fetches_the_shards_index_and_configs_and_runs(fake_hub, tmp_path):
    from test_hub import fetched, run

    repo = tmp_path / "repo"
    model = random_llama("qwen3", True, seed=31, vocab_size=257)
    save_llama(model, repo, "bfloat16", shard=True)
    (repo / "tokenizer_config.json").write_text("{}")
    (repo / "pytorch_model.bin").write_bytes(b"not for picogpt")
    shards = sorted(p.name for p in repo.glob("model-*.safetensors"))
    assert len(shards) > 1
    expected = picogpt("Hello", "--n_tokens", "4", "--hf", str(repo),
                       env={"XDG_CACHE_HOME": str(tmp_path / "c1")})
    assert expected.returncode == 0, expected.stderr
    hub = fake_hub({"Qwen/Tiny-Qwen3": repo})
    first = run(hub, tmp_path / "home", "--hf", "Qwen/Tiny-Qwen3",
                XDG_CACHE_HOME=str(tmp_path / "c2"))
    assert (first.returncode, first.stdout) == (0, expected.stdout), first.stderr
    assert fetched(hub) == sorted(["config.json", "generation_config.json", "merges.txt",
                                   "model.safetensors.index.json", "tokenizer_config.json",
                                   "vocab.json", *shards])
    weights = sum((repo / name).stat().st_size for name in shards)
    lines = first.stderr.splitlines()
    said = [i for i, line in enumerate(lines) if "converting its weights to float32 takes" in line]
    converting = [i for i, line in enumerate(lines) if line.startswith("converting the weights")]
    assert said and converting and said[0] < converting[0]  # said before either starts
    assert "downloading Qwen/Tiny-Qwen3:" in lines[said[0] - 1]
    assert f"about {2 * weights / 1e3:.0f} kB" in lines[said[0]]  # bfloat16: twice in float32


@pytest.mark.parametrize("shape", [(1, 1), (3, 1), (1, 5), (12,)])
def test_the_engines_block_equals_the_books(shape):
    from picogpt.llama import fast
    from picogpt.llama.model import llama_block

    _, params, hparams = engine_model("qwen2", True, seed=15)  # q/k/v biases
    x = np.random.default_rng(16).standard_normal((*shape, 64)).astype(np.float32)
    cos, sin = rope_angles(3, shape[-1], hparams["d_head"], hparams["rope_theta"])
    settings = {"cos": cos, "sin": sin, "n_head": 4, "n_kv_head": 2, "norm_eps": 1e-6}
    book = llama_block(x, **params["blocks"][1], **settings)
    engine = fast.llama_block(x, **params["blocks"][1], **settings)
    assert engine.shape == book.shape == x.shape
    np.testing.assert_allclose(engine, book, atol=1e-5)
