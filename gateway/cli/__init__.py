"""The command line: `gateway serve | migrate | config | openapi | keys | agents | usage | prune |
chorus` (`main.py`), one module per command group that is more than a few lines."""
