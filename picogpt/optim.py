"""The optimizer as a value: how a training step turns gradients into new weights.

An optimizer is a frozen record of its settings with two functions: `init(params)` gives its
state (a dict: "step", and trees shaped like params, such as AdamW's running means "m" and "v"),
and `step(params, grads, state, lr, groups)` gives new params and a new state. Nothing is
changed in place, so a step stopped by Ctrl-C leaves the last whole one. groups are the kind's
parameter groups (kinds.py: "matrices", "embeddings", "gains", "biases", lists of flat names):
an optimizer treats a group as its settings say, so which weights decay is a choice of groups,
not of a weight's number of dimensions (which cannot tell wte from c_fc).

OPTIMIZERS is the table of them, by the name --optimizer takes; AdamW is the first. Gradient-norm
clipping, an option of each, scales every gradient by one number when their norm together
passes clip, as torch.nn.utils.clip_grad_norm_ does. Nothing here reads a file or prints.
"""

from dataclasses import asdict, dataclass

import numpy as np

from .tree import flatten, named, nest, tree_map

GROUPS = ("matrices", "embeddings", "gains", "biases")  # every kind's param_groups


def leaf_groups(params: dict) -> dict[str, list[str]]:
    """The parameter groups of a tree whose leaves are named as GPT-2's (and the 2017
    encoder-decoder's): w a matrix, g a gain, b a bias, any other array a table of embeddings
    (wte, wpe; embed, src_embed, tgt_embed)."""
    groups = {group: [] for group in GROUPS}
    leaf_group = {"w": "matrices", "g": "gains", "b": "biases"}
    for name in flatten(params):
        groups[leaf_group.get(name.rsplit(".", 1)[-1], "embeddings")].append(name)
    return groups


def clipped(grads: dict, clip: float | None) -> dict:
    """grads, each scaled by clip / their norm together when that norm passes clip (torch's
    clip_grad_norm_: the norm of every number at once, with 1e-6 beside it); None: as they are."""
    if clip is None:
        return grads
    leaves = []
    tree_map(leaves.append, grads)
    norm = float(np.sqrt(sum(np.sum(np.square(g, dtype=np.float64)) for g in leaves)))
    scale = min(1.0, clip / (norm + 1e-6))
    return grads if scale == 1 else tree_map(lambda g: g * g.dtype.type(scale), grads)


@dataclass(frozen=True)
class AdamW:
    """AdamW (Loshchilov and Hutter, 2019): Adam moves each weight by its gradient's running mean
    over the running root mean square, so every weight takes steps of about lr; weight decay
    pulls the weights of the groups in decay towards 0, apart from the gradient. The defaults
    are GPT-2-style training's (betas as nanoGPT's), decaying the matrices and the embedding
    tables, never a gain or a bias."""

    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    weight_decay: float = 0.1
    decay: tuple[str, ...] = ("matrices", "embeddings")
    clip: float | None = None  # the largest gradient norm; None: no clipping
    name = "adamw"  # not a field: the table's name for it

    def init(self, params: dict) -> dict:
        """The state before the first step: the running means at 0."""
        zeros = tree_map(np.zeros_like, params)
        return {"step": 0, "m": zeros, "v": zeros}

    def step(self, params: dict, grads: dict, state: dict, lr: float,
             groups: dict[str, list[str]]) -> tuple[dict, dict]:
        """One step: new params and state. groups: the kind's parameter groups (flat names)."""
        b1, b2 = self.betas
        step = state["step"] + 1
        if "m" not in state:  # a state from before any step (an old checkpoint of step 0)
            state = {**self.init(params), **state}
        grads = clipped(grads, self.clip)
        m = tree_map(lambda m, g: b1 * m + (1 - b1) * g, state["m"], grads)
        v = tree_map(lambda v, g: b2 * v + (1 - b2) * (g * g), state["v"], grads)
        decayed = {name for group in self.decay for name in groups[group]}
        rates = tree_map(lambda name: self.weight_decay if name in decayed else 0.0,
                         named(params))

        def update(p, m, v, decay):  # the 1 - b**step terms undo the running means' start at 0
            return p - lr * ((m / (1 - b1**step)) / (np.sqrt(v / (1 - b2**step)) + self.eps)
                             + decay * p)

        return tree_map(update, params, m, v, rates), {"step": step, "m": m, "v": v}

    def settings(self) -> dict:
        """The settings as run.json keeps them, with the optimizer's name."""
        return {"name": self.name, **asdict(self)}


def orthogonalized(g: np.ndarray, steps: int = 5) -> np.ndarray:
    """The nearest matrix to g with every singular value about 1, by Newton-Schulz iteration
    (Muon's quintic, whose coefficients trade exactness for speed: the values land in about
    0.7-1.2): g's directions, each moved by the same amount. g [n_out, n_in] -> same."""
    a, b, c = 3.4445, -4.7750, 2.0315
    x = g / (np.linalg.norm(g) + 1e-7)  # every singular value now at most 1
    wide = x.shape[0] <= x.shape[1]
    x = x if wide else x.T  # x @ x.T is then the smaller square
    for _ in range(steps):
        square = x @ x.T
        x = a * x + (b * square + c * square @ square) @ x
    return x if wide else x.T


@dataclass(frozen=True)
class Muon(AdamW):
    """Muon (Jordan et al., 2024) for the hidden matrices, AdamW (its settings above) for every
    other weight: a matrix moves by its gradient's running mean (Nesterov momentum) made
    orthogonal, so each of its directions moves alike, at lr * scale (as wide as tall: more for
    a tall matrix, max(1, n_out / n_in) ** 0.5). The embedding tables, the gains and biases are
    left to AdamW, as Muon's authors do. Decay pulls a matrix as AdamW's would."""

    momentum: float = 0.95
    scale: float = 10.0  # a matrix's step over AdamW's lr: Muon's own rates are ~0.02-0.05
    name = "muon"

    def init(self, params: dict) -> dict:
        """The state before the first step: AdamW's running means and the matrices' momentum
        ("mu"), each a tree shaped like params (a weight's unused entries stay 0)."""
        return {**AdamW.init(self, params), "mu": tree_map(np.zeros_like, params)}

    def step(self, params: dict, grads: dict, state: dict, lr: float,
             groups: dict[str, list[str]]) -> tuple[dict, dict]:
        """One step: new params and state."""
        if "mu" not in state:  # a state from before any step
            state = {**self.init(params), **state}
        flat_p, flat_g = flatten(params), flatten(clipped(grads, self.clip))
        hidden = set(groups["matrices"])
        rest = [name for name in flat_p if name not in hidden]
        kept = {key: flatten(state[key]) for key in ("m", "v", "mu")}
        moved, adam = without_clip(self).step(
            *(nest({n: tree[n] for n in rest}) for tree in (flat_p, flat_g)),
            {"step": state["step"], **{key: nest({n: kept[key][n] for n in rest})
                                       for key in ("m", "v")}}, lr, groups)
        new = flatten(moved)
        for key in ("m", "v"):
            kept[key] |= flatten(adam[key])
        decayed = {name for group in self.decay for name in groups[group]}
        for name in (name for name in flat_p if name in hidden):
            g, w = flat_g[name], flat_p[name]
            kept["mu"][name] = mu = self.momentum * kept["mu"][name] + g
            turned = orthogonalized(g + self.momentum * mu).astype(w.dtype)  # Nesterov
            rate = lr * self.scale * max(1.0, w.shape[0] / w.shape[1]) ** 0.5
            new[name] = w - rate * turned - (lr * self.weight_decay * w if name in decayed
                                             else 0)
        return (nest({name: new[name] for name in flat_p}),
                {"step": adam["step"], **{key: nest(kept[key]) for key in kept}})


def without_clip(optimizer: AdamW) -> AdamW:
    """optimizer's AdamW part, its gradients already clipped (so not clipped twice)."""
    return AdamW(optimizer.betas, optimizer.eps, optimizer.weight_decay, optimizer.decay, None)


# The table of optimizers: --optimizer's name -> the record's class
OPTIMIZERS = {"adamw": AdamW, "muon": Muon}


def optimizer_from(settings: dict | None):
    """The optimizer run.json's settings describe; None (a run.json written before optimizers
    were values) is AdamW's defaults, which every such run trained with."""
    settings = dict(settings or {"name": "adamw"})
    kind = OPTIMIZERS[settings.pop("name")]
    if "betas" in settings:
        settings["betas"] = tuple(settings["betas"])
    if "decay" in settings:
        settings["decay"] = tuple(settings["decay"])
    return kind(**settings)


def adamw(params: dict, grads: dict, state: dict, lr: float, betas=(0.9, 0.95),
          eps: float = 1e-8, weight_decay: float = 0.1) -> tuple[dict, dict]:
    """One step of AdamW with its default groups, for a tree named as GPT-2's: new params and
    state. Start from state = {"step": 0}."""
    return AdamW(tuple(betas), eps, weight_decay).step(params, grads, state, lr,
                                                       leaf_groups(params))
