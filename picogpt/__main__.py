"""`python -m picogpt` runs the same command as `picogpt`."""

from .cli.generate import main

main()
