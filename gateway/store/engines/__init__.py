"""How a store transaction travels on each database, below the one `Transaction` interface
every query is written against (`transaction`): SQLite's one connection, its statements in one
trip each (`sqlite_driver`) and its waiting transactions committed together (`sqlite`);
PostgreSQL's pool and its hot writes fused into one statement each (`postgres`,
`one_statement`); and the fixed statements both run on the driver's cursor (`prepared`)."""
