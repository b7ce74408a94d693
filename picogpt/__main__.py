"""`python -m picogpt` runs the same command as `picogpt`."""

from .cli.run import main

main()
