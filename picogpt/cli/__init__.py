"""The command line: `picogpt` (generate, score, explore), `python -m picogpt.train`, what they
print, and which model a command names. The only place that prints and sets exit codes."""

from .generate import main

__all__ = ["main"]
