package db

import (
	"database/sql"

	"github.com/svcdev/svc/db/dbpg"
	"github.com/svcdev/svc/db/dbsqlc"
)

//go:generate go run ./internal/querygen

// Querier is the one set of queries the rest of svc calls, whatever the engine: sqlc generates it from
// queries/sqlite (dbsqlc) and the same names, parameters and rows from queries/postgres (dbpg, served
// through pgQueries). Each method takes the DB or transaction to run on.
type Querier = dbsqlc.Querier

// DBTX is what a query runs on: a *sql.DB or a *sql.Tx.
type DBTX = dbsqlc.DBTX

var (
	sqliteQueries Querier = dbsqlc.New()
	pgQueriesOne  Querier = pgRunQueries{pgQueries{q: dbpg.New()}} // runs' bodies encoded (runbatch.go)
)

// For returns the queries of the database's engine.
func For(sqldb *sql.DB) Querier {
	if EngineOf(sqldb) == Postgres {
		return pgQueriesOne
	}
	return sqliteQueries
}
