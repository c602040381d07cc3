"""How a transaction travels on each database: SQLite's one connection and group commit
(`sqlite_driver`, `group_commit`), PostgreSQL's statements run without a transaction block
(`one_statement`), statements run on the driver's cursor (`prepared`) and the transaction itself
(`transaction`)."""
