"""The LLaMA family's block (LLaMA, Qwen2/2.5, Qwen3), beside GPT-2's: model.py is its forward."""
