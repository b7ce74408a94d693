"""`python -m picogpt.data NAME DIR`: download a corpus that picogpt's training reads, into DIR.
The one corpus so far is chinese-poetry (MIT), which `--task poems --text DIR` reads as it
comes; picogpt never ships it. The command lives in picogpt/cli/data.py."""
