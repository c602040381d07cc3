"""Who is calling: API keys (`keyring`), identity-provider tokens and the gateway's own access
tokens (`identity`), development mode's loopback-only guard (`development`, `loopback`)."""
