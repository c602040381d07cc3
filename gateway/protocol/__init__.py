"""Wire formats, pure and I/O-free: Tambo REST models, Timbal frames, AG-UI encoders, SSE framing.

Nothing in this package imports anything else of the gateway's.
"""
