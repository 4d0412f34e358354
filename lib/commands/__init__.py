"""One module per `ash` command area; each exposes `register(cli)`."""
