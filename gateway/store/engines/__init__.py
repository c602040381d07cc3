"""How a store transaction travels on each database, below the one `Transaction` interface
every query is written against (`transaction`): SQLite's one connection, its statements in one
trip each (`sqlite_driver`) and its waiting transactions committed together (`sqlite`);
PostgreSQL's pool (`postgres`); the hot writes, each a chain of statements written once and
taken step by step on SQLite, fused into one statement on PostgreSQL (`chain`); and the fixed
statements both run on the driver's cursor (`prepared`)."""
