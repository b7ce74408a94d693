"""`python -m picogpt.train` runs the training command (picogpt/cli/train.py)."""

from ..cli.train import main

main()
