"""`python -m picogpt` runs the same command as `picogpt`."""

from .cli import main

main()
