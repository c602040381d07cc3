"""The API described: the OpenAPI document (`document`), the API resources' operations (`spec`)
and examples, the `/docs` page, and the files `gateway openapi` generates (`schema_gen`,
`settings_report`, `problems_report`). It sits above the dialects, whose operations it reads from
their registry."""
