"""How a token's text is shown, in a terminal and on a page: honestly, byte by byte if need be.

It holds `visible` (invisible characters escaped, part of a UTF-8 character shown as its bytes
rather than U+FFFD), `shown` (a token id's visible text), `piece` (a token as a page shows it)
and `characters` (the characters that runs of such byte pieces form). GPT-2's tokens are byte
sequences: one Chinese character is often two or three tokens, and each of those alone is not
text. No I/O.
"""

from .encoder import Encoder


def visible(data: bytes) -> str:
    """Bytes as text for a terminal: invisible characters escaped, part of a UTF-8 character
    shown as its bytes (<e6><88>), never as U+FFFD."""
    text = data.decode("utf-8", errors="surrogateescape")  # a stray byte b -> U+DC00 + b
    return "".join(f"<{ord(c) - 0xDC00:02x}>" if "\udc80" <= c <= "\udcff" else
                   c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in text)


def shown(encoder: Encoder, token_id: int) -> str:
    """A token's visible text."""
    return visible(encoder.decode_bytes([int(token_id)]))


def piece(encoder: Encoder, token_id: int) -> dict:
    """A token as a page shows it: its id and text, and its bytes where it holds part of a
    character."""
    data = encoder.decode_bytes([int(token_id)])
    try:
        data.decode("utf-8")
        return {"id": int(token_id), "text": visible(data)}
    except UnicodeDecodeError:
        return {"id": int(token_id), "text": visible(data), "bytes": data.hex(" ")}


def characters(pieces: list[bytes]) -> list[dict]:
    """Runs of tokens that each hold part of a UTF-8 character, and the text the run forms:
    [{"start": i, "end": j, "text": ...}] for tokens i..j (b"\\xe8\\xaf" + b"\\xad" is 语)."""
    runs, start, held = [], None, b""
    for i, data in enumerate(pieces):
        if start is None:
            try:
                data.decode("utf-8")
                continue  # whole characters only: no run
            except UnicodeDecodeError:
                start, held = i, b""
        held += data
        try:
            text = held.decode("utf-8")
        except UnicodeDecodeError:
            continue  # still inside a character
        runs.append({"start": start, "end": i, "text": visible(text.encode("utf-8"))})
        start = None
    if start is not None:  # the text ends inside a character: show what there is
        runs.append({"start": start, "end": len(pieces) - 1, "text": visible(held)})
    return runs
