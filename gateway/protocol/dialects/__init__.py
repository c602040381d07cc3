"""Wire dialects: each a deterministic translation of a run's Timbal frame log into events.

`base` holds what every dialect shares (open items, event positions, the `RUN_LOST` rule); each
other module is one dialect's handlers. An endpoint picks the dialect it speaks; nothing below
the API knows which one a reader uses.
"""
