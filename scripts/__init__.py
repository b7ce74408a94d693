"""Programs picogpt never imports, run from the repository's root as `python -m scripts....`."""
