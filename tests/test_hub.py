"""`--hf MODEL_ID` against a fake hub on 127.0.0.1 (scripts.fixtures.hub): what is fetched, what
a second run sends, and each way a download fails. Every run is the installed `picogpt` in a
child process, since huggingface_hub reads HF_ENDPOINT, HF_HOME and HF_HUB_OFFLINE at import."""

import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest
from test_hf import add_tokenizer, random_hf_model
from test_openai import PICOGPT, assert_one_line_error
from test_openai_faults import default_sigint

WEIGHTS_ELSEWHERE = ("pytorch_model.bin", "tf_model.h5", "flax_model.msgpack", "model.onnx")
HUB_VARIABLES = ("HF_ENDPOINT", "HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_TOKEN",
                 "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "XDG_CACHE_HOME",
                 "HF_HUB_DISABLE_PROGRESS_BARS")


@pytest.fixture(scope="module")
def repo(tmp_path_factory, vocab_dir) -> Path:
    """A hub repo as uer's and gpt2's are: weights in every format, a card, the tokenizer."""
    folder = tmp_path_factory.mktemp("repo")
    random_hf_model(1, 32, 2, 0).save_pretrained(folder)
    add_tokenizer(folder, vocab_dir)
    for name in WEIGHTS_ELSEWHERE:
        (folder / name).write_bytes(b"not for picogpt " * 64)
    (folder / "README.md").write_text("a model card\n")
    return folder


def run(hub, home: Path, *args: str, prompt: str = "Hello", bars: bool = False,
        **env) -> subprocess.CompletedProcess:
    """`picogpt PROMPT --hf ...` in a child whose hub is the fake one and whose cache is home's."""
    clean = {name: value for name, value in os.environ.items() if name not in HUB_VARIABLES}
    env = {"HF_ENDPOINT": hub.url if hub else "", "HF_HOME": str(home), **env}
    if bars:  # huggingface_hub draws its bars on a terminal, or when told to
        env["TQDM_POSITION"] = "-1"
    else:  # a failing download's bar would end in a line of its own
        env["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    return subprocess.run([str(PICOGPT), prompt, "--n_tokens", "4", *args], capture_output=True,
                          text=True, timeout=120, env={**clean, **env})


def fetched(hub) -> list[str]:
    """The files whose bytes the hub sent (GETs of resolve/)."""
    return sorted(path.rsplit("/", 1)[1] for method, path in hub.requests
                  if method == "GET" and "/resolve/" in path)


def snapshot_files(home: Path, model_id: str) -> set[str]:
    snapshots = home / "hub" / f"models--{model_id.replace('/', '--')}" / "snapshots"
    return {p.name for p in snapshots.glob("*/*")}


def test_a_model_id_is_downloaded_once_then_read_from_the_cache(repo, fake_hub, tmp_path):
    """The first run fetches the four files picogpt reads, with huggingface_hub's bar, into
    HF_HOME's cache; the second sends nothing, and so works offline too."""
    hub = fake_hub({"someone/tiny-gpt2": repo, "distilgpt2": repo})
    expected = run(None, tmp_path, "--hf", str(repo))
    assert expected.returncode == 0, expected.stderr
    first = run(hub, tmp_path / "home", "--hf", "someone/tiny-gpt2", bars=True)
    assert first.returncode == 0, first.stderr
    assert first.stdout == expected.stdout
    assert fetched(hub) == ["config.json", "merges.txt", "model.safetensors", "vocab.json"]
    assert "model.safetensors: 100%" in first.stderr  # huggingface_hub's own bar
    assert snapshot_files(tmp_path / "home", "someone/tiny-gpt2") == {
        "config.json", "merges.txt", "model.safetensors", "vocab.json"}
    n_requests = len(hub.requests)
    second = run(hub, tmp_path / "home", "--hf", "someone/tiny-gpt2")
    assert (second.returncode, second.stdout) == (0, expected.stdout), second.stderr
    assert len(hub.requests) == n_requests  # nothing sent
    offline = run(None, tmp_path / "home", "--hf", "someone/tiny-gpt2", HF_HUB_OFFLINE="1")
    assert (offline.returncode, offline.stdout) == (0, expected.stdout), offline.stderr
    english = run(hub, tmp_path / "home", "--hf", "distilgpt2")  # an id without an owner
    assert (english.returncode, english.stdout) == (0, expected.stdout), english.stderr


def test_an_unknown_model_id_is_one_line(repo, fake_hub, tmp_path):
    hub = fake_hub({"someone/tiny-gpt2": repo})
    done = run(hub, tmp_path, "--hf", "nobody/nothing")
    assert_one_line_error(done, "--hf nobody/nothing: no such folder, and no model "
                                "'nobody/nothing' on the hub at")
    assert not (tmp_path / "hub" / "models--nobody--nothing" / "snapshots").exists()


def test_a_gated_model_needs_a_token(repo, fake_hub, tmp_path):
    hub = fake_hub({"someone/gated": repo}, gated={"someone/gated": "hf_letmein"})
    done = run(hub, tmp_path, "--hf", "someone/gated")
    assert_one_line_error(done, "the model is gated on the hub at")
    assert "set HF_TOKEN" in done.stderr and fetched(hub) == []
    assert snapshot_files(tmp_path, "someone/gated") == set()
    done = run(hub, tmp_path, "--hf", "someone/gated", HF_TOKEN="hf_letmein")
    assert done.returncode == 0, done.stderr


def test_a_repo_with_only_pytorch_weights_is_refused_before_any_download(repo, fake_hub,
                                                                         tmp_path):
    only_bin = tmp_path / "only_bin"
    shutil.copytree(repo, only_bin)
    (only_bin / "model.safetensors").unlink()
    hub = fake_hub({"someone/old": only_bin})
    done = run(hub, tmp_path / "home", "--hf", "someone/old")
    assert_one_line_error(done, "--hf someone/old: the repo has no model.safetensors (it holds "
                                "flax_model.msgpack, model.onnx, pytorch_model.bin, tf_model.h5)")
    assert "model.save_pretrained(folder)" in done.stderr
    assert fetched(hub) == [] and not (tmp_path / "home" / "hub").exists()


def test_a_connection_cut_once_is_resumed_in_the_same_run(repo, fake_hub, tmp_path):
    """huggingface_hub resumes a cut file with a Range request; the run goes on."""
    hub = fake_hub({"someone/tiny-gpt2": repo})
    size = (repo / "model.safetensors").stat().st_size
    hub.cuts["model.safetensors"] = [size // 2]
    done = run(hub, tmp_path, "--hf", "someone/tiny-gpt2")
    assert done.returncode == 0, done.stderr
    assert fetched(hub).count("model.safetensors") == 2
    cached = next((tmp_path / "hub").glob("models--someone--tiny-gpt2/snapshots/*"))
    assert (cached / "model.safetensors").read_bytes() == (repo / "model.safetensors").read_bytes()


def test_a_hub_that_goes_away_mid_file_leaves_nothing_trusted_and_the_next_run_completes(
        repo, fake_hub, tmp_path):
    hub = fake_hub({"someone/tiny-gpt2": repo})
    size = (repo / "model.safetensors").stat().st_size
    hub.cuts["model.safetensors"] = [size // 2] + [0] * 10  # then every retry is cut at once
    done = run(hub, tmp_path, "--hf", "someone/tiny-gpt2")
    assert_one_line_error(done, "--hf someone/tiny-gpt2: cannot download from the hub at")
    assert "model.safetensors" not in snapshot_files(tmp_path, "someone/tiny-gpt2")
    assert not list(tmp_path.rglob("*.incomplete"))
    hub.cuts.clear()
    again = run(hub, tmp_path, "--hf", "someone/tiny-gpt2")
    assert again.returncode == 0, again.stderr
    assert again.stdout == run(None, tmp_path, "--hf", str(repo)).stdout


def test_offline_with_nothing_cached_is_one_line(repo, fake_hub, tmp_path):
    hub = fake_hub({"someone/tiny-gpt2": repo})
    done = run(hub, tmp_path, "--hf", "someone/tiny-gpt2", HF_HUB_OFFLINE="1")
    assert_one_line_error(done, "HF_HUB_OFFLINE is set and the Hugging Face cache")
    assert hub.requests == []
    with socket.socket() as closed:  # a port nothing listens on: the hub is unreachable
        closed.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{closed.getsockname()[1]}"
        done = run(None, tmp_path, "--hf", "someone/tiny-gpt2", HF_ENDPOINT=endpoint)
    assert_one_line_error(done, f"cannot download from the hub at {endpoint} (Connection refused)")


def test_ctrl_c_during_the_download_exits_130_and_the_next_run_completes(repo, fake_hub,
                                                                         tmp_path):
    hub = fake_hub({"someone/tiny-gpt2": repo})
    hub.stall = "model.safetensors"
    env = {name: value for name, value in os.environ.items() if name not in HUB_VARIABLES}
    child = subprocess.Popen(
        [str(PICOGPT), "Hello", "--n_tokens", "4", "--hf", "someone/tiny-gpt2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint,
        env={**env, "HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path)})
    try:
        assert hub.stalled.wait(60), "the download never started"
        child.send_signal(signal.SIGINT)
        stdout, stderr = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 130 and "Traceback" not in stderr, stderr
    assert stderr.rstrip("\n").endswith("picogpt: stopped downloading someone/tiny-gpt2; nothing "
                                        "half-downloaded is kept, and the next run downloads it "
                                        "again.")
    assert "model.safetensors" not in snapshot_files(tmp_path, "someone/tiny-gpt2")
    assert not list(tmp_path.rglob("*.incomplete"))
    hub.stall = None
    done = run(hub, tmp_path, "--hf", "someone/tiny-gpt2")
    assert done.returncode == 0, done.stderr


def test_a_chinese_model_id_fetches_bert_s_vocabulary_files(fake_hub, tmp_path):
    """uer's repos: the weights in every format, vocab.txt and the two tokenizer JSON files
    (and tokenizer.json, which picogpt fetches only for a repo without vocab.txt).
    `picogpt "床前明月光，" --hf uer/gpt2-chinese-poem` fetches the five files picogpt reads
    and writes what the folder itself gives."""
    from test_hf_chinese import save_uer_folder, uer_arrays

    from scripts.fixtures.reference import hf_model_of

    folder = save_uer_folder(tmp_path / "repo", hf_model_of(*uer_arrays("small")))
    for name in WEIGHTS_ELSEWHERE:
        (folder / name).write_bytes(b"not for picogpt " * 64)
    hub = fake_hub({"uer/gpt2-chinese-poem": folder})
    poem = {"prompt": "床前明月光，"}
    expected = run(None, tmp_path, "--hf", str(folder), "--ignore_end", **poem)
    assert expected.returncode == 0, expected.stderr
    done = run(hub, tmp_path / "home", "--hf", "uer/gpt2-chinese-poem", "--ignore_end", **poem)
    assert (done.returncode, done.stdout) == (0, expected.stdout), done.stderr
    assert fetched(hub) == ["config.json", "model.safetensors", "special_tokens_map.json",
                            "tokenizer_config.json", "vocab.txt"]
    n_requests = len(hub.requests)
    again = run(hub, tmp_path / "home", "--hf", "uer/gpt2-chinese-poem", "--ignore_end", **poem)
    assert (again.returncode, again.stdout) == (0, expected.stdout), again.stderr
    assert len(hub.requests) == n_requests


def test_a_repo_saved_by_transformers_5_fetches_tokenizer_json(fake_hub, tmp_path, vocab_dir):
    """A model saved today holds tokenizer.json and tokenizer_config.json as its vocabulary:
    those two are fetched, and the text is the folder's own."""
    from test_tokenizer_json import save_gpt2_tokenizer

    folder = tmp_path / "repo"
    random_hf_model(1, 32, 2, 0).save_pretrained(folder)
    save_gpt2_tokenizer(folder, vocab_dir)
    hub = fake_hub({"someone/saved-today": folder})
    expected = run(None, tmp_path, "--hf", str(folder))
    assert expected.returncode == 0, expected.stderr
    done = run(hub, tmp_path / "home", "--hf", "someone/saved-today")
    assert (done.returncode, done.stdout) == (0, expected.stdout), done.stderr
    assert fetched(hub) == ["config.json", "model.safetensors", "tokenizer.json",
                            "tokenizer_config.json"]
