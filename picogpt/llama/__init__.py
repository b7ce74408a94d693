"""The LLaMA family's block (LLaMA, Qwen2/2.5, Qwen3), beside GPT-2's: model.py is its forward,
engine.py its KV cache and scoring windows.

`llama_kind` is the one place that tells a model of this kind from a GPT-2; the table of model
kinds (issue 58) takes it over as the kind's row. The engine's functions (generate, score) take
a GPT-2's n_head; a model of this kind needs more to run, so they take its hparams in that place
(`head_argument`).
"""

from types import ModuleType

MODEL_TYPES = ("llama", "qwen2", "qwen3")  # config.json's model_type values of this kind


def llama_kind(hparams) -> ModuleType | None:
    """The kind's engine module if hparams (picogpt's, {"model": "llama", ...}, or a
    config.json's, {"model_type": "qwen2", ...}) are of the LLaMA kind; None otherwise."""
    if isinstance(hparams, dict) and (hparams.get("model") == "llama"
                                      or hparams.get("model_type") in MODEL_TYPES):
        from . import engine

        return engine
    return None


def head_argument(hparams: dict):
    """What the engine's functions take as n_head: GPT-2's head count, this kind's hparams."""
    return hparams if llama_kind(hparams) else hparams["n_head"]
