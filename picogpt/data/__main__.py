"""`python -m picogpt.data` runs the data command of picogpt/cli/data.py."""

from ..cli.data import main

main()
