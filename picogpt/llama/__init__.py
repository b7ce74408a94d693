"""The LLaMA family's block (LLaMA, Qwen2/2.5, Qwen3), beside GPT-2's: model.py is its forward,
fast.py its decode step's blocks, engine.py its KV cache and scoring windows, backward.py and
fasttrain.py its gradients, train.py what a training run needs, folder.py the Hugging Face
folder a run writes, inside.py the forward with its values named for the pages' views and the
trace.

The kind is the row "llama" of the table of model kinds (kinds.py), which points at these
modules; nothing here decides a model's kind. A model folder's hparams.json says
{"model": "llama", ...}; a Hugging Face config.json of model_type llama, qwen2 or qwen3 is read
into those hparams by the Hugging Face loader (files/llama_hf.py).
"""
