"""The Tambo dialect of AG-UI: `/v1/threads/.../runs`, for `@tambo-ai/client` and `@tambo-ai/react`."""
