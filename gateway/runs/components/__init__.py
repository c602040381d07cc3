"""Component state: the one write path for every writer (`state`) and the client's JSON Schemas
checked without holding the event loop (`schema`)."""
