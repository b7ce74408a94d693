"""A Hugging Face folder of the LLaMA kind (model_type llama, qwen2 or qwen3) as picogpt's params.

Names stay Hugging Face's, with "model." dropped and `layers.{i}` -> params["blocks"][i]
(picogpt/llama/model.py reads them so).
"""

import numpy as np


def nest_llama(arrays: dict[str, np.ndarray]) -> dict:
    """Flat checkpoint names -> nested params: `model.layers.3.mlp.up_proj.weight` ->
    params["blocks"][3]["mlp"]["up_proj"]["weight"]."""
    params: dict = {"blocks": []}
    for name, array in arrays.items():
        path = name.removeprefix("model.").split(".")
        node = params
        if path[0] == "layers":
            index = int(path[1])
            while len(params["blocks"]) <= index:
                params["blocks"].append({})
            node, path = params["blocks"][index], path[2:]
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = array
    return params
