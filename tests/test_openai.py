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
from picogpt.cli.generate import main
from picogpt.files.download import FILES
from picogpt.files.openai import load_encoder_hparams_and_params

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
    code = ("import sys; from picogpt.files.openai import load_encoder_hparams_and_params as load; "
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


def test_a_couplet_model_of_several_blocks_loads_and_a_missing_block_is_named(tmp_path):
    """An encoder-decoder's blocks are encoder.h{i} and decoder.h{i}: a model of 2 + 3 blocks
    (the couplet task's recipe has 2 + 2) loads as written, and hparams that ask for a decoder
    block its weights lack name that block."""
    from picogpt.files.loaded_model import load_model
    from picogpt.files.store import save_model
    from picogpt.transformer import init_params

    tokens = [*"春风秋月", "<|unknown|>", "<|start|>"]
    hparams = {"model": "transformer", "n_vocab": 6, "n_ctx": 16, "n_embd": 8, "n_head": 2,
               "n_layer": 2, "n_dec_layer": 3, "norm_first": True}
    save_model(tmp_path / "dui", hparams, init_params(hparams, np.random.default_rng(0)), None,
               {"chars.json": tokens})
    loaded = load_model("dui", str(tmp_path))
    assert [len(loaded.params[stack]["blocks"]) for stack in ("encoder", "decoder")] == [2, 3]
    hparams_json = tmp_path / "dui" / "hparams.json"
    hparams_json.write_text(json.dumps({**hparams, "n_dec_layer": 4}))
    with pytest.raises(PicoGPTError, match=r"decoder.h3.attn.c_proj.b should be \(8,\) but is "
                                           r"no such tensor"):
        load_model("dui", str(tmp_path))


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


def test_a_start_reads_no_weight_of_an_unchanged_store_and_crc_checks_a_copy(tiny, tmp_path,
                                                                            monkeypatch):
    """The fast path: a load of a converted model, its files as written, computes no CRC-32
    (that check of every byte took 2 s of a 1558M start); a copy, whose every file has a new
    stamp (inode, ctime, here mtime too), is read whole once and runs, as it is the same bytes."""
    from picogpt.files import store

    models_dir = tmp_path / "models"
    shutil.copytree(tiny.models_dir, models_dir)
    for file in (models_dir / "124M").rglob("*"):
        os.utime(file, ns=(0, 0))
    checked = []
    real_crc32 = store.crc32
    monkeypatch.setattr(store, "crc32", lambda array: checked.append(array.shape)
                        or real_crc32(array))
    _, _, params = load_encoder_hparams_and_params("124M", str(tiny.models_dir))
    assert checked == [] and params["wte"].shape == (50257, 64)
    _, _, params = load_encoder_hparams_and_params("124M", str(models_dir))
    n_tensors = len(json.loads((models_dir / "124M" / "params" / "manifest.json").read_text())[
        "tensors"])
    assert len(checked) == n_tensors and params["wte"].shape == (50257, 64)


def tree(folder: Path) -> dict[str, tuple]:
    """Every path under folder with its kind, bytes and modification time: what a write moves."""
    return {str(path.relative_to(folder)): (path.is_dir(), path.stat().st_mtime_ns,
                                            None if path.is_dir() else path.read_bytes())
            for path in sorted(folder.rglob("*"))}


# Run in a child without TensorFlow (None in sys.modules makes `import tensorflow` fail), and
# stop at the first attempt to change anything under the folder: a read-only folder refuses
# writes only to a user other than root, and CI runs as root
UNTOUCHED = """
import os, sys
folder = os.path.realpath(sys.argv[1])
WRITES = ("os.rename", "os.remove", "os.rmdir", "os.mkdir", "os.utime", "os.chmod",
          "os.truncate", "shutil.rmtree", "shutil.copyfile", "shutil.move")

def inside(path):
    return isinstance(path, (str, bytes, os.PathLike)) and os.path.realpath(
        os.fsdecode(path)).startswith(folder)

def watch(event, args):
    if event == "open" and inside(args[0]) and (
            any(c in (args[1] or "") for c in "wax+") or (args[2] or 0) & (
                os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC)):
        raise SystemExit(f"opened {args[0]} to write")
    if event in WRITES and any(inside(arg) for arg in args):
        raise SystemExit(f"{event} {args}")

sys.addaudithook(watch)
sys.modules["tensorflow"] = None
from picogpt.cli.generate import main
main(sys.argv[2:])
"""


@pytest.mark.parametrize("kind", ["converted checkpoint", "the docs' demo"])
def test_a_cloned_read_only_folder_runs_without_tensorflow_and_is_not_written(
        kind, tiny, tmp_path):
    """A folder copied as a clone or cp -r leaves it (every file's time new), then made read
    only, runs without TensorFlow: the docs' own command on docs/induction/demo (a model that
    python -m picogpt.train wrote), and a converted 124M whose checkpoint is still there.
    Nothing under it changes, nor is anything opened to write."""
    if kind == "the docs' demo":
        source, size, prompt = Path(__file__).parents[1] / "docs" / "induction", "demo", "t5 t10"
    else:
        source, size, prompt = tiny.models_dir, "124M", "hi"
    models_dir = tmp_path / "models"
    shutil.copytree(source, models_dir, copy_function=shutil.copyfile)  # no times kept
    later = 10**9 + max(path.stat().st_mtime_ns for path in source.rglob("*"))
    for path in models_dir.rglob("*"):
        os.utime(path, ns=(later, later))
    args = [prompt, "--model_size", size, "--n_tokens", "4", "--models_dir", str(models_dir)]
    before = tree(models_dir)
    subprocess.run(["chmod", "-R", "a-w", str(models_dir)], check=True)
    try:
        done = subprocess.run([sys.executable, "-c", UNTOUCHED, str(models_dir), *args],
                              capture_output=True, text=True, timeout=300)
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(models_dir)], check=True)
    assert (done.returncode, done.stderr) == (0, "")
    shutil.copytree(source, tmp_path / "kept")  # times kept: the folder as it was written
    assert done.stdout == picogpt(*args[:-1], str(tmp_path / "kept")).stdout
    assert tree(models_dir) == before


def test_another_checkpoint_of_the_same_size_is_converted_again(tiny, tmp_path):
    """The checkpoint params/ was built from is known by its index's CRC-32, not by its files'
    times: an index changed in place, its size and time as they were, makes params/ stale."""
    from picogpt.files.store import read_params

    models_dir = tmp_path / "models"
    shutil.copytree(tiny.models_dir, models_dir)
    model_dir = models_dir / "124M"
    assert read_params(model_dir) is not None
    index = model_dir / "model.ckpt.index"
    times = index.stat()
    data = bytearray(index.read_bytes())
    data[len(data) // 2] ^= 0x01
    index.write_bytes(bytes(data))
    os.utime(index, ns=(times.st_atime_ns, times.st_mtime_ns))
    assert read_params(model_dir) is None


def test_a_folder_converted_by_an_earlier_picogpt_loads_by_its_sizes(tiny, tmp_path):
    """params/ format 3 recorded sizes and times; after a copy its times are wrong, its sizes
    right: it loads, and it is stale once a checkpoint file's size changes."""
    from picogpt.files.store import read_params

    models_dir = tmp_path / "models"
    shutil.copytree(tiny.models_dir, models_dir)
    model_dir = models_dir / "124M"
    manifest_json = model_dir / "params" / "manifest.json"
    manifest = json.loads(manifest_json.read_text())
    manifest_json.write_text(json.dumps({
        "format": 3, "source": {name: [s["size"], 1] for name, s in manifest["source"].items()},
        "tensors": {name: {"shape": meta["shape"], "crc32": meta["crc32"],
                           "stamp": [meta["size"], 1]}
                    for name, meta in manifest["tensors"].items()}}))
    arrays = read_params(model_dir)
    assert arrays is not None and arrays.keys() == manifest["tensors"].keys()
    with open(model_dir / "model.ckpt.index", "ab") as f:
        f.write(b"\0")
    assert read_params(model_dir) is None
