"""Who is calling: the typed `Caller` every request is decided for, resolved once (`caller`),
with whose quotas it counts against (`subjects`); API keys (`keyring`), identity-provider tokens
and the gateway's own access tokens (`identity`), development mode's loopback-only guard
(`development`, `loopback`)."""
