"""The params tree: nested dicts and lists of arrays (params, their gradients, an optimizer's
running means), and the flat names a checkpoint stores them under.

It holds the one rename between a flat name and the nested dict the model splats:
"h3.attn.c_attn.w" <-> params["blocks"][3]["attn"]["c_attn"]["w"], for every kind
(an encoder-decoder's "encoder.h0.attn.q.w" is params["encoder"]["blocks"][0]["attn"]["q"]["w"]),
and `tree_map`, which applies a function to the arrays of trees of one structure.
Nothing here reads a file.
"""

import re
from typing import Any

import numpy as np

BLOCK = re.compile(r"h\d+")  # a block's part of a flat name


def tree_map(f, *trees):
    """f applied to the arrays of nested dicts and lists of the same structure (params, grads)."""
    first = trees[0]
    if isinstance(first, dict):
        return {key: tree_map(f, *(tree[key] for tree in trees)) for key in first}
    if isinstance(first, list):
        return [tree_map(f, *parts) for parts in zip(*trees)]
    return f(*trees)


def flatten(params: dict) -> dict[str, np.ndarray]:
    """params["blocks"][3]["attn"]["c_attn"]["w"] -> {"h3.attn.c_attn.w": array}, in params'
    order."""
    flat = {}

    def walk(node, name: str) -> None:
        if isinstance(node, dict):
            for key, child in node.items():
                if key == "blocks":
                    for i, block in enumerate(child):
                        walk(block, f"{name}.h{i}" if name else f"h{i}")
                else:
                    walk(child, f"{name}.{key}" if name else key)
        else:
            flat[name] = node

    walk(params, "")
    return flat


def named(params: dict) -> dict:
    """params with each array replaced by its flat name: the same structure, for tree_map."""
    names = iter(flatten(params))
    return tree_map(lambda _array: next(names), params)


def nest(arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """The inverse of flatten: flat names like "h3.attn.c_attn.w" ->
    params["blocks"][3]["attn"]["c_attn"]["w"]; an h{i} anywhere in a name is block i of the
    "blocks" beside it."""
    params: dict[str, Any] = {}
    for name, array in sorted(arrays.items(), key=lambda item: block_order(item[0])):
        *path, leaf = name.split(".")
        node = params
        for key in path:
            if BLOCK.fullmatch(key):  # the one rename: h{i} -> blocks[i]
                blocks = node.setdefault("blocks", [])
                blocks.extend({} for _ in range(int(key[1:]) + 1 - len(blocks)))
                node = blocks[int(key[1:])]
            else:
                node = node.setdefault(key, {})
        node[leaf] = array
    return params


def block_order(name: str) -> list:
    """A name's sort key in which h2 comes before h10."""
    return [(0, int(part[1:]), "") if BLOCK.fullmatch(part) else (1, 0, part)
            for part in name.split(".")]
