"""Files and downloads: OpenAI's folders and the converted store, Hugging Face folders and the hub,
the params tree and the vocabulary files. Everything here reads or writes disk or the network."""
