"""The checks a loader makes of what it read: hparams as their kind wants them, each tensor's
shape as the kind gives it (picogpt/kinds.py), and weights that are numbers.

The flat names and their nesting ("h3.attn.c_attn.w" <-> params["blocks"][3]["attn"]["c_attn"]
["w"]) are the book's tree.py, imported here for the loaders. Every loader and training use it.
"""

from typing import Any

import numpy as np

from ..errors import PicoGPTError, _
from ..kinds import kind_of
from ..tree import block_order, flatten, nest  # noqa: F401 (the loaders' names for them)


def expected_shapes(hparams: dict) -> dict[str, tuple[int, ...]]:
    """The flat name and shape of every tensor a model of these hparams has, as its kind says
    (GPT-2's, or with "model": "transformer" the 2017 encoder-decoder's)."""
    return kind_of(hparams).shapes(hparams)


def fit_vocabulary(hparams: dict, params: dict, n_vocab: int) -> tuple[dict, dict]:
    """hparams and params cut to a vocabulary of n_vocab tokens, where the kind's table may be
    padded past its tokenizer (GPT-2's wte: kinds.gpt2_fit_vocabulary)."""
    fit = kind_of(hparams).fit_vocabulary
    return (hparams, params) if fit is None else fit(hparams, params, n_vocab)


def check_hparams(hparams: Any, source: str, fix: str,
                  names: tuple[str, ...] | None = None) -> dict:
    """hparams, checked as the kind they name wants them (kinds.py: GPT-2's five sizes as positive
    whole numbers that fit together, and an encoder-decoder's besides): the kind's own keys.
    The error names source, the keys as source calls them (names) and the fix."""
    kind = kind_of(hparams, source, fix + ".")
    return kind.checked(hparams if isinstance(hparams, dict) else {}, source, fix, names)


def check_shapes(arrays: dict[str, np.ndarray], hparams: dict, source: str,
                 weights: str, fix: str) -> None:
    """Raise if the hparams read from source do not describe the tensors in weights."""
    # Blocks past the first one weights lack are not listed: an n_layer of 10**9 would list
    # 12 * 10**9 names (memory runs out) where the first missing block already says it. Each
    # stack of the kind's blocks (GPT-2's h0 ...; an encoder-decoder's encoder.h0 ... and
    # decoder.h0 ...) is counted.
    def held(stack: str) -> int:  # the blocks h0, h1, ... of stack ("" for GPT-2's) in arrays
        return len({name[len(stack):].split(".")[0] for name in arrays
                    if name.startswith(f"{stack}h")})

    kind = kind_of(hparams)
    capped = {key: min(hparams[key], held(stack) + 1) for key, stack in kind.stacks.items()}
    expected = kind.shapes({**hparams, **capped})
    for name in sorted(expected.keys() | arrays.keys()):
        want, have = expected.get(name), arrays[name].shape if name in arrays else None
        if want != have:
            said = ", ".join(f"{key}={hparams[key]}" for key in kind.hparams)
            none = _("no such tensor")
            raise PicoGPTError(_("{source} ({said}) does not match {weights}: {name} should be "
                                 "{want} but is {have}. {fix}").format(
                                     source=source, said=said, weights=weights, name=name,
                                     want=none if want is None else want,
                                     have=none if have is None else have, fix=fix))


def finite(array: np.ndarray) -> bool:
    """Whether every number of array is finite: no NaN, no infinity. One pass over it."""
    # float32's own sum is the fast pass (SIMD, no copy); it is not finite when a number is
    # not, or when finite numbers overflow it, so then each number is looked at. Overflow and
    # inf - inf are expected here, not warned about
    with np.errstate(over="ignore", invalid="ignore"):
        return bool(np.isfinite(array.sum())) or bool(np.isfinite(array).all())


def check_finite(name: str | None, weights: str, fix: str) -> None:
    """Refuse weights whose tensor name (the first not finite, None if none) holds NaN or
    infinity: every number the model gives would be NaN, and no page or sampler can use it."""
    if name is not None:
        raise PicoGPTError(_("{weights} holds NaN or infinity in {name}: a model with such "
                             "weights gives no numbers to sample from. {fix}").format(
                                 weights=weights, name=name, fix=fix))
