"""What a LLaMA-block model picogpt trained holds, in Hugging Face's layout, as data.

A `--model llama` folder is a Hugging Face model, so transformers (and happy-llm's chapter 5,
and minimind's scripts) load it as it is:

- config.json: `model_type` llama, `architectures` LlamaForCausalLM, the shape;
- model.safetensors: the weights under the checkpoint's names ("model.layers.3.mlp.up_proj.weight"),
  `hf_arrays`; no lm_head, the head being tied to the embedding;
- tokenizer.json: the model's characters as a WordLevel tokenizer (each character a word), the
  start token added before every text by a TemplateProcessing post-processor, as training fed
  it before every poem or paragraph: transformers' tokenizer gives the ids picogpt trained on.

This module builds the files' contents; the command layer writes them. No I/O.
"""

import numpy as np


def hf_arrays(params: dict) -> dict[str, np.ndarray]:
    """params under the checkpoint's names: "model." before each, blocks[i] -> layers.{i}."""
    arrays = {}

    def walk(node, name: str) -> None:
        if isinstance(node, dict):
            for key, child in node.items():
                walk(child, f"{name}.{key}")
        elif isinstance(node, list):  # the blocks
            for i, child in enumerate(node):
                walk(child, f"{name.removesuffix('.blocks')}.layers.{i}")
        else:
            arrays[name] = np.ascontiguousarray(node)

    for key, child in params.items():
        walk(child, key if key == "lm_head" else f"model.{key}")
    return arrays


def hf_config(hparams: dict, start: int) -> dict:
    """config.json of the model: LlamaForCausalLM's settings; start begins and ends a text."""
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "vocab_size": hparams["n_vocab"], "hidden_size": hparams["n_embd"],
            "intermediate_size": hparams["n_ffn"], "num_hidden_layers": hparams["n_layer"],
            "num_attention_heads": hparams["n_head"], "num_key_value_heads": hparams["n_kv_head"],
            "head_dim": hparams["d_head"], "max_position_embeddings": hparams["n_ctx"],
            "rms_norm_eps": hparams["norm_eps"], "rope_theta": hparams["rope_theta"],
            "rope_parameters": {"rope_type": "default", "rope_theta": hparams["rope_theta"]},
            "tie_word_embeddings": hparams["tied"], "hidden_act": "silu",
            "attention_bias": False, "mlp_bias": False, "bos_token_id": start,
            "eos_token_id": start, "torch_dtype": "float32"}


def hf_tokenizer(tokens: list[str], start: int, unknown: int) -> dict:
    """tokenizer.json of a character vocabulary (chars.py's: the characters, then the unknown
    and the start token): each character a word of a WordLevel model, the start token added
    before each text, and decoding that joins the characters as they are."""
    specials = [{"id": i, "content": tokens[i], "single_word": False, "lstrip": False,
                 "rstrip": False, "normalized": False, "special": True}
                for i in sorted({unknown, start})]
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": specials,
            "normalizer": None,
            # every character its own word, line breaks and spaces too
            "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "[\\s\\S]"},
                              "behavior": "Isolated", "invert": False},
            "post_processor": {
                "type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": tokens[start], "type_id": 0}},
                           {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": tokens[start], "type_id": 0}},
                         {"Sequence": {"id": "A", "type_id": 0}},
                         {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {tokens[start]: {"id": tokens[start], "ids": [start],
                                                   "tokens": [tokens[start]]}}},
            "decoder": {"type": "Fuse"},
            "model": {"type": "WordLevel", "vocab": {token: i for i, token in enumerate(tokens)},
                      "unk_token": tokens[unknown]}}


def hf_tokenizer_config(tokens: list[str], start: int, unknown: int) -> dict:
    """tokenizer_config.json: tokenizer.json as it is (no class of a model's own), its tokens."""
    return {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": tokens[start],
            "eos_token": tokens[start], "unk_token": tokens[unknown],
            "add_bos_token": False,  # the post-processor adds it
            "model_max_length": None, "clean_up_tokenization_spaces": False}


def hf_files(hparams: dict, tokens: list[str], start: int, unknown: int) -> dict:
    """The folder's JSON files, by name."""
    return {"config.json": hf_config(hparams, start),
            "tokenizer.json": hf_tokenizer(tokens, start, unknown),
            "tokenizer_config.json": hf_tokenizer_config(tokens, start, unknown)}
