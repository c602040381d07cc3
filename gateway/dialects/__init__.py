"""Wire dialects: one folder each (request parsing, translation of the log, event types, routes)
and the registry that lists them (`registry.py`).

Within a folder, only `routes.py` and `dialect.py` import the API and the run manager; the rest
imports only `protocol/`. Nothing in `runs/` or `engine/` imports a dialect: they read the
neutral `protocol.run_spec.RunSpec` each dialect's input becomes.
"""
