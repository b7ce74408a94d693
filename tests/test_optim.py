"""The optimizer as a value (optim.py): AdamW over named parameter groups equals
torch.optim.AdamW given the same groups, decay follows the groups chosen (not a weight's number of
dimensions), and clipping equals torch.nn.utils.clip_grad_norm_."""

import numpy as np
import pytest
import torch

from picogpt.kinds import KINDS
from picogpt.optim import AdamW, clipped, optimizer_from
from picogpt.tree import flatten, nest

HPARAMS = {"n_vocab": 13, "n_ctx": 8, "n_embd": 8, "n_head": 2, "n_layer": 1}


def small_tree(seed: int = 0) -> dict:
    """A GPT-2's params in float64 (torch and NumPy then agree to rounding), gains and biases
    moved off 1 and 0 so that decaying them would show."""
    params = KINDS["gpt2"].init(HPARAMS, np.random.default_rng(seed))
    rng = np.random.default_rng(seed + 1)
    return nest({name: a.astype(np.float64) + rng.normal(0, 0.1, a.shape)
                 for name, a in flatten(params).items()})


def torch_run(params: dict, steps: list[dict], decayed: set[str], clip: float | None,
              settings: dict) -> dict:
    """torch.optim.AdamW over the same steps, the decayed names as one group, the rest another;
    clip_grad_norm_ before each step when clip is set."""
    tensors = {name: torch.tensor(a, requires_grad=True) for name, a in flatten(params).items()}
    optimiser = torch.optim.AdamW(
        [{"params": [t for n, t in tensors.items() if n in decayed],
          "weight_decay": settings["weight_decay"]},
         {"params": [t for n, t in tensors.items() if n not in decayed], "weight_decay": 0.0}],
        lr=0.01, betas=settings["betas"], eps=settings["eps"])
    for grads in steps:
        for name, tensor in tensors.items():
            tensor.grad = torch.from_numpy(grads[name].copy())
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(list(tensors.values()), clip)
        optimiser.step()
    return {name: t.detach().numpy() for name, t in tensors.items()}


@pytest.mark.parametrize("decay, clip", [(("matrices", "embeddings"), None),
                                         (("matrices",), None), (("gains", "biases"), 0.5)])
def test_adamw_by_groups_equals_torchs_adamw_over_three_steps(decay, clip):
    """Three steps on a GPT-2's tree in float64: the groups decay chooses are torch's decayed
    group, whatever their dimensions (decay=("matrices",) leaves wte and wpe alone); with clip
    each step's gradients are first clipped as clip_grad_norm_ clips them."""
    params = small_tree()
    rng = np.random.default_rng(7)
    steps = [{name: rng.normal(0, 1, a.shape) for name, a in flatten(params).items()}
             for _ in range(3)]
    optimizer = AdamW(betas=(0.8, 0.9), eps=1e-7, weight_decay=0.3, decay=decay, clip=clip)
    groups = KINDS["gpt2"].param_groups(params)
    decayed = {name for group in decay for name in groups[group]}
    theirs = torch_run(params, steps, decayed, clip,
                       {"betas": (0.8, 0.9), "eps": 1e-7, "weight_decay": 0.3})
    state = optimizer.init(params)
    for grads in steps:
        params, state = optimizer.step(params, nest(grads), state, 0.01, groups)
    assert state["step"] == 3
    for name, array in flatten(params).items():
        np.testing.assert_allclose(array, theirs[name], rtol=0, atol=1e-12, err_msg=name)


def test_the_default_decays_wte_and_wpe_and_never_a_gain_or_bias():
    """One step with zero gradients moves only decayed weights: by lr * weight_decay * w."""
    params = small_tree()
    zeros = nest({name: np.zeros_like(a) for name, a in flatten(params).items()})
    new, _ = AdamW().step(params, zeros, {"step": 0}, 0.5, KINDS["gpt2"].param_groups(params))
    moved = {name for name, a in flatten(new).items()
             if not np.array_equal(a, flatten(params)[name])}
    assert moved == {name for name, a in flatten(params).items() if a.ndim == 2}
    np.testing.assert_allclose(new["wte"], params["wte"] * (1 - 0.5 * 0.1), rtol=1e-12)


@pytest.mark.parametrize("max_norm", [0.3, 1e6])
def test_clipping_equals_torchs_clip_grad_norm(max_norm):
    """Above max_norm every gradient is scaled by one number; below it nothing changes."""
    rng = np.random.default_rng(3)
    grads = {"a": rng.normal(0, 1, (4, 3)).astype(np.float32),
             "blocks": [{"b": rng.normal(0, 1, 5).astype(np.float32)}]}
    tensors = [torch.tensor(g) for g in flatten(grads).values()]
    for t in tensors:
        t.grad = t.clone()
    torch.nn.utils.clip_grad_norm_(tensors, max_norm)
    ours = flatten(clipped(grads, max_norm))
    for got, t in zip(ours.values(), tensors):
        np.testing.assert_allclose(got, t.grad.numpy(), rtol=1e-6)
    assert (max_norm > 1e3) == all(np.array_equal(ours[k], g) for k, g in flatten(grads).items())


def test_settings_round_trip_and_an_old_run_is_adamws_defaults():
    """run.json keeps the optimizer's settings; a run.json from before optimizers were values has
    none, and its run trained with AdamW's defaults."""
    optimizer = AdamW(betas=(0.8, 0.99), weight_decay=0.0, decay=("matrices",), clip=1.0)
    assert optimizer_from(optimizer.settings()) == optimizer
    assert optimizer_from(None) == AdamW()
    assert AdamW().settings() == {"name": "adamw", "betas": (0.9, 0.95), "eps": 1e-8,
                                  "weight_decay": 0.1, "decay": ("matrices", "embeddings"),
                                  "clip": None}


def test_orthogonalized_is_the_polar_factor_to_muons_precision():
    """Newton-Schulz lands every singular value in about 0.7-1.2 and keeps g's directions: it is
    near U V^T (g's polar factor), tall or wide."""
    from picogpt.optim import orthogonalized

    for shape in ((24, 40), (40, 24)):
        g = np.random.default_rng(0).standard_normal(shape)
        u, _s, vt = np.linalg.svd(g, full_matrices=False)
        turned = orthogonalized(g)
        values = np.linalg.svd(turned, compute_uv=False)
        assert turned.shape == shape and 0.6 < values.min() and values.max() < 1.25
        polar = u @ vt
        assert np.sum(turned * polar) / (np.linalg.norm(turned) * np.linalg.norm(polar)) > 0.95


def test_muon_turns_the_matrices_and_leaves_the_rest_to_adamw():
    """Two steps of Muon on a LLaMA-kind tree: each hidden matrix moves by lr * scale * its
    Nesterov momentum made orthogonal (times sqrt(n_out / n_in) when tall) plus AdamW's decay,
    and every other weight exactly as AdamW's step moves it."""
    from picogpt.optim import Muon, orthogonalized

    hparams = {"n_vocab": 11, "n_ctx": 8, "n_embd": 8, "n_head": 2, "n_kv_head": 1,
               "d_head": 4, "n_ffn": 16, "n_layer": 1, "rope_theta": 1e4, "norm_eps": 1e-6,
               "tied": False, "qkv_bias": False, "qk_norm": False}
    kind = KINDS["llama"]
    params = kind.init(hparams, np.random.default_rng(0))
    groups = kind.param_groups(params)
    rng = np.random.default_rng(1)
    steps = [tree_like(params, rng) for _ in range(2)]
    muon, adamw = Muon(), AdamW()
    p, state, q, adam_state = params, {"step": 0}, params, {"step": 0}
    for grads in steps:
        p, state = muon.step(p, grads, state, 0.01, groups)
        q, adam_state = adamw.step(q, grads, adam_state, 0.01, groups)
    flat_p, flat_q, flat_0 = flatten(p), flatten(q), flatten(params)
    g1, g2 = (flatten(g) for g in steps)
    for name in flat_0:
        if name not in groups["matrices"]:
            np.testing.assert_array_equal(flat_p[name], flat_q[name], err_msg=name)
            continue
        w, (n_out, n_in) = flat_0[name], flat_0[name].shape
        rate = 0.01 * muon.scale * max(1.0, n_out / n_in) ** 0.5
        for g, mu in ((g1[name], g1[name]), (g2[name], muon.momentum * g1[name] + g2[name])):
            w = w - rate * orthogonalized(g + muon.momentum * mu) - 0.01 * muon.weight_decay * w
        np.testing.assert_allclose(flat_p[name], w, rtol=1e-5, atol=1e-6, err_msg=name)


def tree_like(params: dict, rng) -> dict:
    """Random gradients shaped as params."""
    return nest({name: rng.standard_normal(a.shape).astype(a.dtype)
                 for name, a in flatten(params).items()})


def test_muon_settings_round_trip():
    from picogpt.optim import Muon

    muon = Muon(momentum=0.9, scale=5.0, clip=1.0)
    assert optimizer_from(muon.settings()) == muon and muon.settings()["name"] == "muon"


def test_wsd_stays_at_lr_then_comes_down_in_a_line_to_a_tenth():
    from picogpt.train import COOLDOWN, learning_rate

    steps, warmup = 100, 10
    rates = [learning_rate(s, steps, 1.0, warmup, "wsd") for s in range(steps)]
    cooldown = round(COOLDOWN * steps)
    assert rates[:warmup] == [(s + 1) / warmup for s in range(warmup)]
    assert set(rates[warmup : steps - cooldown]) == {1.0}
    tail = np.array(rates[steps - cooldown - 1 :])
    np.testing.assert_allclose(np.diff(tail), -0.9 / cooldown)
    assert rates[-1] == pytest.approx(0.1)
