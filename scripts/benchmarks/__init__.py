"""Timing programs: picogpt against transformers, against itself, by size."""
