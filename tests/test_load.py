"""The loader: download over HTTP, checkpoint -> nested params, the .npy cache."""

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from picogpt import PicoGPTError
from picogpt.cli.run import main
from picogpt.files.download import FILES
from picogpt.files.load import load_encoder_hparams_and_params

PICOGPT = Path(sys.executable).parent / "picogpt"  # the console script pip installed


def published(checkpoint, root: Path) -> Path:
    """A folder laid out like OpenAI's server: <root>/124M/ with only the seven files."""
    (root / "124M").mkdir(parents=True)
    for name in FILES:
        shutil.copy(checkpoint.model_dir / name, root / "124M" / name)
    return root


def picogpt_child(*args, env=None, **kwargs) -> subprocess.CompletedProcess:
    """The installed `picogpt` command in a process of its own: for what only a process shows
    (a first load that imports TensorFlow, signals, pipes, exit at start-up)."""
    return subprocess.run([str(PICOGPT), *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})}, **kwargs)


def picogpt(*args, env=None, input=None, entry=main) -> subprocess.CompletedProcess:
    """The `picogpt` command run here: cli.main(args) (or another entry point's main), with
    its stdin, stdout, stderr, exit code and environment as a child would have them, without a
    child's ~0.6 s start-up.

    A run that would convert a checkpoint must use picogpt_child: TensorFlow is never imported
    beside PyTorch in the test process, so here it is blocked and the run would say it needs it.
    """
    stdin = io.TextIOWrapper(io.BytesIO((input or "").encode("utf-8")), encoding="utf-8")
    stdout, stderr, code = io.StringIO(), io.StringIO(), 0
    saved_env, saved_stdin = dict(os.environ), sys.stdin
    os.environ.update(env or {})
    sys.stdin, sys.modules["tensorflow"] = stdin, None  # None: `import tensorflow` fails
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            entry(list(args))
    except SystemExit as e:  # sys.exit(n), and fire's own exits (help, usage errors)
        code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
    finally:
        sys.stdin = saved_stdin
        del sys.modules["tensorflow"]
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["picogpt", *args], code, stdout.getvalue(),
                                       stderr.getvalue())


def assert_one_line_error(done, message: str) -> None:
    """The command failed as a user should see it: one line on stderr, exit 1, no traceback."""
    assert done.returncode == 1
    assert done.stderr.startswith("picogpt: ") and done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr and message in done.stderr


def child_load(models_dir: Path) -> str:
    """Load in a child process (a first load imports TensorFlow); report what it imported."""
    code = ("import sys; from picogpt.files.load import load_encoder_hparams_and_params as load; "
            "_, _, p = load('124M', sys.argv[1]); "
            "print('tensorflow' in sys.modules, float(p['wte'][0, 0]), len(p['wpe']))")
    done = subprocess.run([sys.executable, "-c", code, str(models_dir)], capture_output=True,
                          text=True, check=True)
    return done.stdout.strip()


def test_cli_downloads_loads_prints_and_then_reuses_the_files(tiny, serve, tmp_path):
    server = serve(published(tiny, tmp_path / "site"))
    models_dir = tmp_path / "empty"
    first = picogpt_child("Alan Turing theorized that", "--n_tokens", "12", "--models_dir",
                          str(models_dir), env={"PICOGPT_BASE_URL": server.url})
    assert first.returncode == 0, first.stderr
    assert sorted(r.split()[1] for r in server.requests) == sorted(f"/124M/{n}" for n in FILES)
    assert all((models_dir / "124M" / name).read_bytes()
               == (tiny.model_dir / name).read_bytes() for name in FILES)
    # what it printed is the library's greedy continuation, decoded
    encoder, hparams, params = load_encoder_hparams_and_params("124M", str(models_dir))
    from picogpt import generate
    ids = list(generate(encoder.encode("Alan Turing theorized that"), params,
                        hparams["n_head"], 12))
    assert first.stdout == encoder.decode(ids) + "\n"

    server.requests.clear()
    second = picogpt("Alan Turing theorized that", "--n_tokens", "12", "--models_dir",
                     str(models_dir), env={"PICOGPT_BASE_URL": server.url})
    assert second.returncode == 0 and second.stdout == first.stdout
    assert server.requests == []


def test_the_base_url_argument_beats_the_environment(tiny, serve, tmp_path):
    server = serve(published(tiny, tmp_path / "site"))
    done = picogpt_child("", "--n_tokens", "3", "--models_dir", str(tmp_path / "m"),
                         "--base_url", server.url,
                         env={"PICOGPT_BASE_URL": "http://127.0.0.1:9/nothing"})
    assert done.returncode == 0, done.stderr
    assert len(server.requests) == len(FILES)


def test_params_are_the_checkpoints_tensors_nested_and_float32(tiny):
    encoder, hparams, params = load_encoder_hparams_and_params("124M", str(tiny.models_dir))
    reference = np.load(tiny.reference)
    n_embd = hparams["n_embd"]
    assert set(params) == {"wte", "wpe", "blocks", "ln_f"}
    assert len(params["blocks"]) == hparams["n_layer"]
    block = params["blocks"][1]
    assert set(block) == {"ln_1", "ln_2", "attn", "mlp"}
    assert block["attn"]["c_attn"]["w"].shape == (n_embd, 3 * n_embd)
    assert block["mlp"]["c_proj"]["w"].shape == (4 * n_embd, n_embd)
    np.testing.assert_array_equal(block["mlp"]["c_fc"]["w"], reference["model/h1/mlp/c_fc/w"][0])
    np.testing.assert_array_equal(params["ln_f"]["g"], reference["model/ln_f/g"])
    np.testing.assert_array_equal(params["wpe"], reference["model/wpe"])
    for array in [params["wte"], params["wpe"], block["ln_1"]["b"], block["attn"]["c_proj"]["b"]]:
        assert array.dtype == np.float32 and not array.flags.writeable  # params are read-only
    # linear weights are kept column-major for speed (load.PARAMS_FORMAT); shape is unchanged
    assert block["mlp"]["c_fc"]["w"].flags.f_contiguous and params["wte"].flags.c_contiguous
    assert encoder.encode("Hello world") == [15496, 995]


def test_later_loads_never_import_tensorflow_and_a_new_checkpoint_is_converted_again(
        tiny, tiny_end, tmp_path):
    models_dir = tmp_path / "models"
    shutil.copytree(tiny.models_dir, models_dir)
    shutil.rmtree(models_dir / "124M" / "params")
    first = child_load(models_dir)
    assert first.startswith("True")  # converting needs TensorFlow
    assert child_load(models_dir) == first.replace("True", "False")
    # the checkpoint changes (another model, the session's tiny_end with its hparams): params/
    # is stale and is rebuilt from it
    for name in ("model.ckpt.data-00000-of-00001", "model.ckpt.index", "hparams.json"):
        shutil.copy(tiny_end.model_dir / name, models_dir / "124M" / name)
    rebuilt = child_load(models_dir)
    assert rebuilt.startswith("True")
    assert float(rebuilt.split()[1]) == float(np.load(tiny_end.reference)["model/wte"][0, 0])
    assert (first.split()[2], rebuilt.split()[2]) == ("128", "4096")  # its n_ctx, not tiny's


def test_unknown_model_size_is_refused(tmp_path):
    with pytest.raises(PicoGPTError, match="unknown model size '125M'; choose one of 124M"):
        load_encoder_hparams_and_params("125M", str(tmp_path))


def test_hparams_that_do_not_fit_the_tensors_are_named(tiny, tmp_path):
    models_dir = tmp_path / "models"
    shutil.copytree(tiny.models_dir, models_dir)
    hparams_json = models_dir / "124M" / "hparams.json"
    hparams = json.loads(hparams_json.read_text())
    hparams_json.write_text(json.dumps({**hparams, "n_embd": 128, "n_head": 4}))
    with pytest.raises(PicoGPTError, match=r"n_embd=128.* does not match the checkpoint: "
                                           r"h0.attn.c_attn.b should be \(384,\) but is \(192,\)"):
        load_encoder_hparams_and_params("124M", str(models_dir))


def damage(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize("name, content, message", [
    ("hparams.json", '{"n_vocab": 50257, "n_ctx": 128, "n_embd": 64, "n_head": "4", '
                     '"n_layer": 2}', "is not GPT-2 hparams (it needs positive integers n_vocab, "
                                      "n_ctx, n_embd, n_head, n_layer); delete it"),
    ("hparams.json", '{"n_vocab": 50257, "n_ctx": 128, "n_embd": 64, "n_head": 5, '
                     '"n_layer": 2}', "n_embd=64 is not a multiple of n_head=5"),
    ("encoder.json", '{"a": 0, "<|endoftext|>": 50256}', "is not GPT-2's token table (50257 "
                                                          "tokens, <|endoftext|> = 50256)"),
    ("vocab.bpe", "#version: 0.2\na b\nc d\n", "is not GPT-2's merge list (50000 pairs)"),
])
def test_damaged_hparams_or_vocabulary_is_one_line(tiny, tmp_path, name, content, message):
    models_dir = tmp_path / "models"
    shutil.copytree(tiny.models_dir, models_dir)
    damage(models_dir / "124M" / name, content)
    with pytest.raises(PicoGPTError, match=re.escape(message)):
        load_encoder_hparams_and_params("124M", str(models_dir))
    assert_one_line_error(picogpt("hi", "--models_dir", str(models_dir)), message)


def test_a_start_compares_stamps_and_reads_no_weight_to_check_it(tiny, tmp_path, monkeypatch):
    """The fast path is taken: a load of a converted model computes no CRC-32 (that check of
    every byte took 2 s of a 1558M start); a file whose time changed is checked, alone."""
    from picogpt.files import store

    models_dir = tmp_path / "models"
    shutil.copytree(tiny.models_dir, models_dir)  # copy2: sizes and modification times kept
    checked = []
    real_crc32 = store.crc32
    monkeypatch.setattr(store, "crc32", lambda array: checked.append(array.shape)
                        or real_crc32(array))
    _, _, params = load_encoder_hparams_and_params("124M", str(models_dir))
    assert checked == []
    touched = models_dir / "124M" / "params" / "wpe.npy"
    os.utime(touched, ns=(touched.stat().st_atime_ns, touched.stat().st_mtime_ns + 10**9))
    _, _, again = load_encoder_hparams_and_params("124M", str(models_dir))
    assert checked == [params["wpe"].shape]  # that file only, and it still matches
    np.testing.assert_array_equal(again["wpe"], params["wpe"])


def test_a_copied_folder_is_checked_in_full_once_then_by_its_stamps(tiny, tmp_path,
                                                                   monkeypatch):
    """A copy that changed every file's time (cp -r) is read whole at its first start only:
    that check records the new stamps in the manifest, and the tensors' files are untouched."""
    from picogpt.files import store

    models_dir = tmp_path / "models"
    shutil.copytree(tiny.models_dir, models_dir)  # copy2; the checkpoint's stamps are kept
    params_dir = models_dir / "124M" / "params"
    files = sorted(params_dir.glob("*.npy"))
    later = 10**9 + max(file.stat().st_mtime_ns for file in files)
    for file in files:  # as cp -r leaves them: a second later, whatever the clock did
        os.utime(file, ns=(later, later))
    before = {file: (file.read_bytes(), file.stat().st_mtime_ns) for file in files}
    checked = []
    real_crc32 = store.crc32
    monkeypatch.setattr(store, "crc32", lambda array: checked.append(array.shape)
                        or real_crc32(array))
    _, _, params = load_encoder_hparams_and_params("124M", str(models_dir))
    assert len(checked) == len(files)  # the first start reads every byte
    checked.clear()
    _, _, again = load_encoder_hparams_and_params("124M", str(models_dir))
    assert checked == []  # and the next compares stamps only
    np.testing.assert_array_equal(again["wte"], params["wte"])
    assert {file: (file.read_bytes(), file.stat().st_mtime_ns) for file in files} == before
    manifest = json.loads((params_dir / "manifest.json").read_text())
    assert {name: meta["stamp"] for name, meta in manifest["tensors"].items()} == {
        file.stem: [file.stat().st_size, file.stat().st_mtime_ns] for file in files}


def test_a_copy_picogpt_cannot_write_still_loads(tiny, tmp_path, monkeypatch):
    """A read-only copy keeps its manifest (and its full check at every start) and loads."""
    from picogpt.files import store

    models_dir = tmp_path / "models"
    shutil.copytree(tiny.models_dir, models_dir)
    manifest = models_dir / "124M" / "params" / "manifest.json"
    text = manifest.read_text()
    for file in manifest.parent.glob("*.npy"):
        os.utime(file, ns=(0, 0))

    def refused(path, value):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(store, "write_json_atomic", refused)
    _, _, params = load_encoder_hparams_and_params("124M", str(models_dir))
    assert params["wte"].shape == (50257, 64) and manifest.read_text() == text
