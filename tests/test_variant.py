"""The training-only variant (picogpt/llama/variant.py): with GPT-2's switches it is GPT-2, with
LLaMA's it is llama/model.py, every variant's gradients are the loss's slopes, and its KV cache
gives the full forward's logits."""

import json

import numpy as np
import pytest

from picogpt.llama import variant
from picogpt.llama.fasttrain import side_by_side
from picogpt.llama.model import llama
from picogpt.model import gpt2
from picogpt.tree import flatten, nest, tree_map

SHAPE = {"n_vocab": 23, "n_ctx": 12, "n_embd": 16, "n_head": 4, "n_layer": 2}


def lively(params: dict, rng) -> dict:
    """Weights livelier than the init (zero biases and unit gains would hide their slips)."""
    return tree_map(lambda a: (a + rng.normal(0, 0.3, a.shape)).astype(a.dtype), params)


def model(name: str, seed: int = 0, dtype=np.float32) -> tuple[dict, dict]:
    """hparams and lively weights of --variant name at SHAPE."""
    hp = variant.variant_hparams(name, **SHAPE, line_ends=[0, 1])
    rng = np.random.default_rng(seed)
    params = lively(variant.init_params(hp, rng), rng)
    return hp, tree_map(lambda a: a.astype(dtype), params)


def test_gpt2_switches_are_gpt2():
    hp, p = model("gpt2")
    ids = np.random.default_rng(1).integers(0, SHAPE["n_vocab"], (2, 9))

    def linear(layer):
        return {"w": layer["weight"].T, "b": layer["bias"]}

    def ln(layer):
        return {"g": layer["weight"], "b": layer["bias"]}

    blocks = [{"ln_1": ln(b["input_layernorm"]), "ln_2": ln(b["post_attention_layernorm"]),
               "attn": {"c_attn": linear(side_by_side(*(b["self_attn"][n] for n in (
                   "q_proj", "k_proj", "v_proj")))), "c_proj": linear(b["self_attn"]["o_proj"])},
               "mlp": {"c_fc": linear(b["mlp"]["up_proj"]),
                       "c_proj": linear(b["mlp"]["down_proj"])}} for b in p["blocks"]]
    want = gpt2(ids, p["embed_tokens"]["weight"], p["wpe"]["weight"], blocks, ln(p["norm"]),
                n_head=SHAPE["n_head"])
    got = variant.logits(ids, p, hp)
    assert np.abs(got - want).max() < 1e-4 * np.abs(want).max()


def test_llama_switches_are_llama():
    hp, p = model("llama")
    ids = np.random.default_rng(1).integers(0, SHAPE["n_vocab"], (2, 9))
    want = llama(ids, **p, **{k: hp[k] for k in ("n_head", "n_kv_head", "d_head",
                                                 "rope_theta", "norm_eps")})
    assert np.abs(variant.logits(ids, p, hp) - want).max() < 1e-4 * np.abs(want).max()


@pytest.mark.parametrize("name", list(variant.VARIANTS))
def test_gradients_are_the_slopes(name):
    """Along a random direction of each weight, the loss's slope (central differences, float64)
    is the gradient's dot product with that direction."""
    hp, p = model(name, dtype=np.float64)
    rng = np.random.default_rng(2)
    batch = (rng.integers(0, SHAPE["n_vocab"], (2, 10)),
             rng.integers(0, SHAPE["n_vocab"], (2, 10)))
    _loss, grads = variant.loss_and_grads(batch, p, hp)
    flat, flat_grads = flatten(p), flatten(grads)
    assert set(flat) == set(flat_grads)
    for leaf_name, leaf in flat.items():
        direction = rng.standard_normal(leaf.shape)
        eps = 1e-5

        def loss_at(t, leaf_name=leaf_name, leaf=leaf, direction=direction):
            moved = {**flat, leaf_name: leaf + t * direction}
            return variant.loss_and_grads(batch, nest(moved), hp)[0]

        slope = (loss_at(eps) - loss_at(-eps)) / (2 * eps)
        said = float(np.sum(flat_grads[leaf_name] * direction))
        assert abs(slope - said) <= 1e-6 + 1e-5 * abs(slope), (name, leaf_name, slope, said)


@pytest.mark.parametrize("name", ["gpt2", "llama", "rope", "line-end"])
def test_cache_gives_the_forward(name):
    """Prefill then one decode step at a time: each step's logits are the full forward's."""
    hp, p = model(name)
    ids = np.random.default_rng(3).integers(0, SHAPE["n_vocab"], 10)
    want = variant.logits(ids, p, hp)
    cache = variant.KVCache(p, hp, len(ids))
    got = [variant.prefill(ids[:4], p, hp, cache)]
    got += [variant.decode_step(ids[i], p, hp, cache) for i in range(4, len(ids))]
    assert np.abs(np.stack(got) - want[3:]).max() < 1e-4 * np.abs(want).max()


def test_line_distances_count_what_is_left_of_the_line():
    """Against the definition written as a loop: after a whole line of n characters, a line's
    k-th character has n - k still to come (0 from its last on), unknown (LINE_ROOM) before."""
    ends = [0, 1]

    def by_hand(ids):
        out, whole, had, begun = [], None, 0, False
        for i in ids:
            if i in ends:
                whole, had, begun = (had if begun and had else whole), 0, True
            else:
                had += 1
            out.append(variant.LINE_ROOM if whole is None else
                       min(max(whole - had, 0), variant.LINE_ROOM - 1))
        return out

    room = variant.LINE_ROOM
    assert list(variant.line_distances([0, 5, 5, 5, 1, 5, 5, 5, 5, 0, 5], ends)) == [
        room, room, room, room, 3, 2, 1, 0, 0, 4, 3]
    rng = np.random.default_rng(4)
    for n in range(1, 40):
        ids = rng.integers(0, 5, (3, n))
        assert all(list(row) == by_hand(ids_row)
                   for row, ids_row in zip(variant.line_distances(ids, ends), ids))


@pytest.mark.parametrize("name", ["line-end", "rope"])
def test_the_line_end_cache_reads_lines_across_a_shared_prompt(name):
    """Samples after a shared prompt, one dropped on the way: each step's logits are the full
    forward's of that sample's ids (line-end's distances need the prompt's lines; a variant
    without the table keeps no ids)."""
    hp, p = model(name)
    rng = np.random.default_rng(5)
    prompt = np.array([0, 4, 5, 6, 1, 7, 8])
    rows = rng.choice([0, 1, 4, 5, 6], (3, 6))
    shared = variant.KVCache(p, hp, len(prompt))
    variant.prefill(prompt, p, hp, shared)
    cache = variant.KVCache(p, hp, rows.shape[1], batch=(3,), prompt=shared)
    live, worst = [0, 1, 2], 0.0
    for t in range(rows.shape[1]):
        if t == 3:
            live = [0, 2]
            cache.keep(live)
        got = variant.decode_step(rows[live, t], p, hp, cache)
        for j, row in enumerate(live):
            want = variant.logits(np.concatenate([prompt, rows[row, : t + 1]]), p, hp)[-1]
            worst = max(worst, np.abs(got[j] - want).max() / np.abs(want).max())
    assert worst < 1e-4


def test_groups_leave_tables_to_adamw():
    """Muon moves only the hidden matrices: the tables are embeddings, biases and gains apart."""
    hp, p = model("untied")
    found = variant.groups(p)
    assert {"embed_tokens.weight", "lm_head.weight"} <= set(found["embeddings"])
    assert all(name.endswith("_proj.weight") for name in found["matrices"])
    hp, p = model("gpt2")
    found = variant.groups(p)
    assert "wpe.weight" in found["embeddings"] and "norm.bias" in found["biases"]
    assert "wle.weight" in variant.groups(model("line-end")[1])["embeddings"]


def test_a_stopped_variant_run_with_muon_and_wsd_resumes_bit_for_bit(tmp_path, monkeypatch):
    """Ctrl-C inside step 6's Muon step of a --variant rope --optimizer muon --schedule wsd run,
    then --resume: the same weights, bit for bit, as the run that never stopped (the block,
    Muon's running means and the schedule all come back from the checkpoint); --judge_each
    judged the rhyme at every measurement."""
    from test_openai import picogpt
    from test_poems import regulated_poems

    from picogpt import optim
    from picogpt.cli.train import main

    text = tmp_path / "verse.txt"
    text.write_text("\n\n".join(regulated_poems(80)), encoding="utf-8")
    flags = ["--task", "poems", "--text", str(text), "--variant", "rope", "--optimizer", "muon",
             "--schedule", "wsd", "--n_layer", "1", "--n_head", "2", "--n_embd", "16",
             "--n_ctx", "48", "--n_batch", "4", "--steps", "10", "--curve_every", "5",
             "--n_held_out", "10", "--judge_each"]
    whole = picogpt(*flags, "--name", "whole", "--models_dir", str(tmp_path), entry=main)
    assert whole.returncode == 0, whole.stderr
    real, calls = optim.orthogonalized, []
    per_step = 6  # q, k, v, o, up and down: GPT-2's MLP has no gate

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 5 * per_step + 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(optim, "orthogonalized", interrupted)
    assert picogpt(*flags, "--name", "cut", "--models_dir", str(tmp_path),
                   entry=main).returncode == 130
    monkeypatch.undo()
    done = picogpt("--resume", "--name", "cut", "--models_dir", str(tmp_path), entry=main)
    assert done.returncode == 0, done.stderr
    hparams = json.loads((tmp_path / "cut" / "hparams.json").read_text(encoding="utf-8"))
    assert hparams["model"] == "variant" and hparams["positions"] == "rope"
    ours, theirs = (sorted((tmp_path / name / "params").rglob("*.npy")) for name in ("cut",
                                                                                    "whole"))
    assert [p.name for p in ours] == [p.name for p in theirs] and ours
    for mine, other in zip(ours, theirs):
        np.testing.assert_array_equal(np.load(mine), np.load(other), err_msg=mine.name)
    curve = json.loads((tmp_path / "whole" / "curve.json").read_text(encoding="utf-8"))
    assert all("rhyme" in m and "judged" in m for m in curve["measured"])


@pytest.mark.parametrize("flags, says", [
    (["--variant", "alibi"], "is not a variant picogpt trains"),
    (["--variant", "rope", "--model", "llama"], "--variant sets the whole block"),
    (["--schedule", "linear"], "is not a schedule picogpt knows"),
    (["--optimizer", "muon"], "--optimizer muon moves matrices stored [n_out, n_in]"),
    (["--judge_each=3"], "is not true or false"),
])
def test_a_setting_that_cannot_train_is_one_line(tmp_path, flags, says):
    from test_openai import assert_one_line_error, picogpt

    from picogpt.cli.train import main

    done = picogpt("--task", "poems", *flags, "--steps", "2", "--models_dir", str(tmp_path),
                   entry=main)
    assert_one_line_error(done, says)
    assert not any(tmp_path.iterdir())  # refused before any work


def test_a_variant_folder_runs_and_its_insides_are_refused_in_one_line(tmp_path):
    """A --variant run's folder generates and scores as any trained model; --explain and
    --explore, which it has no views for, are one line each before any work."""
    from test_openai import assert_one_line_error, picogpt
    from test_poems import verse_text

    from picogpt.cli.train import main as train_main

    text = tmp_path / "verse.txt"
    text.write_text(verse_text(40), encoding="utf-8")
    done = picogpt("--task", "poems", "--text", str(text), "--variant", "line-end", "--n_layer",
                   "1", "--n_head", "2", "--n_embd", "16", "--n_ctx", "16", "--n_batch", "4",
                   "--steps", "3", "--n_held_out", "5", "--name", "v", "--models_dir",
                   str(tmp_path), entry=train_main)
    assert done.returncode == 0, done.stderr
    model = ["--model_size", "v", "--models_dir", str(tmp_path)]
    written = picogpt("甲乙", *model, "--n_tokens", "4", "--seed", "1")
    assert written.returncode == 0 and written.stdout.strip(), written.stderr
    assert picogpt("甲乙丙", *model, "--score").returncode == 0
    page = tmp_path / "page.html"
    assert_one_line_error(picogpt("甲乙", *model, "--explain", str(page)),
                          "a model of the training variant kind (v) trains for measuring only")
    assert_one_line_error(picogpt("甲乙", *model, "--explore"), "--explore shows the insides")
    assert not page.exists()
    folder = json.loads((tmp_path / "v" / "hparams.json").read_text())
    assert folder["line_ends"] and folder["line_end"]  # the poems' line ends, kept with it
    (tmp_path / "v" / "hparams.json").write_text(json.dumps({**folder, "line_ends": [999]}))
    assert_one_line_error(picogpt("甲乙", *model), "line_end needs line_ends")
    text_run = picogpt("--task", "text", "--text", str(text), "--variant", "line-end",
                       "--steps", "2", "--models_dir", str(tmp_path / "t"), entry=train_main)
    assert_one_line_error(text_run, "--variant line-end reads where the poems' lines end")
