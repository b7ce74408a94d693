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
