package db

import (
	"context"
	"database/sql"
	"strings"
	"unicode/utf8"

	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/edgemodel"
)

// ErrInvalidText refuses a write of text PostgreSQL's TEXT cannot hold: a NUL byte or invalid UTF-8.
// It is a rule the caller broke (an edgemodel.Error, 400 invalid_request on every surface), never an
// internal error.
var ErrInvalidText error = &edgemodel.Error{Code: edgemodel.CodeInvalidRequest,
	Message: "text must be valid UTF-8 without NUL characters"}

// Storable reports whether PostgreSQL's TEXT can hold s: valid UTF-8 without a NUL byte.
func Storable(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }

// textGuard is the DBTX every PostgreSQL query of the Querier runs on (pgquerier_gen.go), so that a
// value PostgreSQL's TEXT refuses (SQLSTATE 22021) answers what SQLite answers, whatever the query,
// instead of an internal error (and, inside a transaction, an aborted one): nothing stored can equal
// such a value, so a query that reads by it matches no row, without the value being sent; a statement
// that would write it is refused with ErrInvalidText. SQLite stores such text and needs no guard.
type textGuard struct{ db dbsqlc.DBTX }

// noRows is a query that answers no row, for a read whose parameter nothing stored can equal.
const noRows = "SELECT 1 WHERE false"

func (g textGuard) ExecContext(ctx context.Context, query string, args ...interface{}) (sql.Result, error) {
	if !storableArgs(args) {
		return nil, ErrInvalidText
	}
	return g.db.ExecContext(ctx, query, args...)
}

func (g textGuard) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return g.db.PrepareContext(ctx, query)
}

func (g textGuard) QueryContext(ctx context.Context, query string, args ...interface{}) (*sql.Rows, error) {
	if !storableArgs(args) {
		return g.db.QueryContext(ctx, noRows)
	}
	return g.db.QueryContext(ctx, query, args...)
}

func (g textGuard) QueryRowContext(ctx context.Context, query string, args ...interface{}) *sql.Row {
	if !storableArgs(args) {
		return g.db.QueryRowContext(ctx, noRows)
	}
	return g.db.QueryRowContext(ctx, query, args...)
}

// storableArgs reports whether every text among a query's arguments is Storable.
func storableArgs(args []interface{}) bool {
	for _, a := range args {
		switch v := a.(type) {
		case string:
			if !Storable(v) {
				return false
			}
		case sql.NullString:
			if v.Valid && !Storable(v.String) {
				return false
			}
		case *string:
			if v != nil && !Storable(*v) {
				return false
			}
		case []string:
			for _, s := range v {
				if !Storable(s) {
					return false
				}
			}
		}
	}
	return true
}
