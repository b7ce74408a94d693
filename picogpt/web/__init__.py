"""The pages: the offline --explain page, the --explore page with its session and its server on
127.0.0.1, the views both pages draw, and how a token's text is shown honestly."""
