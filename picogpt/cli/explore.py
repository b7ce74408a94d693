"""The `picogpt --explore` mode: the model served on 127.0.0.1 as a page to explore it.

It checks the port, loads the model the flags name, starts the server (web/server.py) on a session
(web/session.py), prints the page's address, opens the browser unless told not to, and stops on
Ctrl-C.
"""

import sys

from ..errors import _, whole_number
from ..files.loaded_model import kind_first, load_model, refuse_views
from .command import read_prompt
from .couplet import refuse_explore


def explore_model(prompt: str = "", port: int | None = None, no_browser: bool = False,
                  prompt_file: str | None = None, model_size: str = "124M",
                  models_dir: str = "models", base_url: str | None = None,
                  hf: str | None = None) -> None:
    """picogpt [PROMPT] --explore: a page on 127.0.0.1 to explore the model by playing.

    Edit the prompt and watch its tokens and the next token's distribution; move the
    temperature, top-k, top-p and repetition penalty and see the distribution change at once;
    take a token (the greedy one, one drawn with a seed, or any candidate), go back a step,
    generate several; ask a Chinese model for a poem's form (line length, acrostic) and see it
    as a mask on the logits; look inside: attention, head scores, logit lens, wpe. It prints the
    page's address, with a secret every request must carry, and opens it in a browser. Ctrl-C
    stops it.

    Args:
        prompt: The text the page starts with, exactly as typed.
        port: Serve on this port of 127.0.0.1; unset picks a free one.
        no_browser: Print the address without opening a browser.
        prompt_file: Read the starting text from this UTF-8 file ('-' for standard input).
    """
    if port is not None:
        whole_number("port", port, 1, 65535, _("or leave it unset for a free one"))
    from contextlib import nullcontext  # here, not at the top: generating never needs them

    from ..web.browser import browser_opened
    from ..web.server import ExploreServer
    from ..web.session import Session

    text = read_prompt(prompt, prompt_file)
    refuse_views(kind_first(model_size, models_dir, hf), "explore", hf or model_size)
    loaded = load_model(model_size, models_dir, base_url, hf)
    refuse_explore(loaded)
    session = Session(loaded.encoder, loaded.hparams, loaded.params, loaded.about())
    model = loaded.about()
    server = ExploreServer(session, port or 0, text)
    print(_("picogpt: exploring {model} at {url}").format(model=model["where"], url=server.url),
          file=sys.stderr)
    print(server.url, flush=True)
    try:
        with nullcontext() if no_browser else browser_opened(server.url):
            server.serve_forever(0.2)
    except KeyboardInterrupt:
        raise KeyboardInterrupt(_("the explore server stopped.")) from None

    finally:
        server.server_close()
