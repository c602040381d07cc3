"""Wire formats, pure and I/O-free: the neutral run input (`run_spec`), Timbal frames, the base
every dialect's translation builds on (`translation`), Tambo REST models, JSON Schema output.

Nothing in this package imports anything else of the gateway's; the dialects themselves live in
`gateway/dialects/`.
"""
