package db

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/runs"
)

// A run batch is copied in bulk on PostgreSQL (InsertRuns: COPY, or when the copy is refused a
// multi-row INSERT over arrays, ON CONFLICT (id) DO NOTHING), a round trip or two per batch instead of
// one per run. What a client
// sent is stored in a form both engines accept: PostgreSQL's TEXT refuses a NUL byte and invalid UTF-8,
// which SQLite stores, so such a request or response is written as binaryPrefix and its base64 and read
// back as sent (EncodeBody, DecodeBody). A run the store still refuses is set aside alone: the batch is
// split until the runs it can take are written.

// EncodeBody returns a run's request or response in a form PostgreSQL's TEXT accepts: unchanged when
// it is valid UTF-8 without NUL bytes, otherwise base64 behind a marker (runs.EncodeText, the form a
// run batch carries such a body in too).
func EncodeBody(s string) string { return runs.EncodeText(s) }

// DecodeBody undoes EncodeBody.
func DecodeBody(s string) string { return runs.DecodeText(s) }

// cleanText makes a short field (model, request ids, error code) acceptable to PostgreSQL: invalid
// UTF-8 and NUL bytes become U+FFFD. These fields are labels, not transcripts: they are not kept byte
// for byte.
func cleanText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// pgRow is a run as PostgreSQL stores it.
func pgRow(p dbsqlc.RunCreateParams) dbsqlc.RunCreateParams {
	p.Request, p.Response = EncodeBody(p.Request), EncodeBody(p.Response)
	p.Model, p.Status = cleanText(p.Model), cleanText(p.Status)
	p.RequestID, p.UpstreamRequestID = cleanText(p.RequestID), cleanText(p.UpstreamRequestID)
	p.ErrorCode, p.TraceID, p.Replica = cleanText(p.ErrorCode), cleanText(p.TraceID), cleanText(p.Replica)
	p.Arm, p.ArmTarget, p.ShadowOf = cleanText(p.Arm), cleanText(p.ArmTarget), cleanText(p.ShadowOf)
	return p
}

// pgRunQueries are the PostgreSQL queries with the runs' bodies encoded on the way in and decoded on
// the way out.
type pgRunQueries struct{ pgQueries }

func (p pgRunQueries) RunCreate(ctx context.Context, db dbsqlc.DBTX, arg dbsqlc.RunCreateParams) error {
	return p.pgQueries.RunCreate(ctx, db, pgRow(arg))
}

func (p pgRunQueries) RunCreateIfAbsent(ctx context.Context, db dbsqlc.DBTX, arg dbsqlc.RunCreateIfAbsentParams) (int64, error) {
	return p.pgQueries.RunCreateIfAbsent(ctx, db, dbsqlc.RunCreateIfAbsentParams(pgRow(dbsqlc.RunCreateParams(arg))))
}

func (p pgRunQueries) RunGet(ctx context.Context, db dbsqlc.DBTX, arg dbsqlc.RunGetParams) (dbsqlc.Run, error) {
	r, err := p.pgQueries.RunGet(ctx, db, arg)
	r.Request, r.Response = DecodeBody(r.Request), DecodeBody(r.Response)
	return r, err
}

// Refusal is a run of a batch the store refused, by its index in the batch, and the store's reason
// (its words, never the run's content).
type Refusal struct {
	Index  int
	Reason string
}

// Refused reports whether err is the store refusing the data (a value it cannot hold, a constraint),
// which no retry will change, rather than the store being away or the transaction failing.
func Refused(err error) bool {
	var perr *pgconn.PgError
	if errors.As(err, &perr) {
		// 22: data exception (encoding, values out of range); 23: integrity constraint; 54: program
		// limit exceeded (a row too large).
		c := perr.Code
		return strings.HasPrefix(c, "22") || strings.HasPrefix(c, "23") || strings.HasPrefix(c, "54")
	}
	var serr *sqlite.Error
	if errors.As(err, &serr) {
		switch serr.Code() & 0xff {
		case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_MISMATCH:
			return true
		}
	}
	return false
}

// refusalReason is what a refusal says about a run: the store's error code and message.
func refusalReason(err error) string {
	var perr *pgconn.PgError
	if errors.As(err, &perr) {
		return perr.Code + ": " + perr.Message
	}
	return Map(err).Error()
}

// InsertRuns writes a batch of runs in tx, each at most once (a run whose id is there already is left
// alone), and reports which it inserted. On PostgreSQL, in a WriteTx, a batch is first copied in bulk
// (COPY, pgCopy), which takes about two thirds of the time of the statement; when the copy is refused
// (a run already there, a value the store will not take), the batch goes as one statement that skips
// the runs already there, and a batch the store refuses is halved until the runs it refuses are
// alone: those are returned, the others written. Any other error (the store away, the transaction
// aborted) is returned and nothing should be committed.
func InsertRuns(ctx context.Context, e Engine, tx DBTX, rows []dbsqlc.RunCreateParams) (inserted []bool, refused []Refusal, err error) {
	inserted = make([]bool, len(rows))
	if e != Postgres {
		for i, r := range rows {
			n, err := sqliteQueries.RunCreateIfAbsent(ctx, tx, dbsqlc.RunCreateIfAbsentParams(r))
			switch {
			case err == nil:
				inserted[i] = n > 0
			case Refused(err): // a failed statement leaves SQLite's transaction as it was
				refused = append(refused, Refusal{i, refusalReason(err)})
			default:
				return nil, nil, err
			}
		}
		return inserted, refused, nil
	}
	enc := make([]dbsqlc.RunCreateParams, len(rows))
	for i, r := range rows {
		enc[i] = pgRow(r)
	}
	if w, ok := tx.(*WriteTx); ok && len(enc) >= copyMin {
		copied, err := pgCopy(ctx, w, enc)
		if err != nil {
			return nil, nil, err
		}
		if copied {
			for i := range inserted {
				inserted[i] = true
			}
			return inserted, nil, nil
		}
	}
	err = pgInsertSplit(ctx, tx, enc, 0, inserted, &refused)
	return inserted, refused, err
}

// copyMin is the smallest batch worth a COPY, which costs a round trip more than the statement.
const copyMin = 16

// runColumns are the columns pgCopy fills, in the order of pgCopyRow's values.
var runColumns = []string{"id", "deployment_id", "key_id", "model", "status", "latency_ms", "prompt_tokens", "completion_tokens",
	"created_at", "expires_at", "request", "response", "request_id", "upstream_request_id", "status_code", "error_code", "trace_id",
	"replica", "cached_tokens", "arm", "arm_target", "shadow_of", "ttft_ms"}

// pgCopy copies rows (already encoded by pgRow) into runs under a savepoint, in PostgreSQL's binary
// COPY: no statement of megabytes of parameters to build and parse. It reports false, with the
// transaction as it was, when the store refused the copy (a run already there, a value it will not
// take): InsertRuns then sorts the batch out one statement at a time.
func pgCopy(ctx context.Context, w *WriteTx, rows []dbsqlc.RunCreateParams) (bool, error) {
	if _, err := w.ExecContext(ctx, "SAVEPOINT run_copy"); err != nil {
		return false, err
	}
	err := w.conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("db: a PostgreSQL connection of %T", dc)
		}
		_, err := c.Conn().CopyFrom(ctx, pgx.Identifier{"runs"}, runColumns, pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
			return pgCopyRow(&rows[i]), nil
		}))
		return err
	})
	if err == nil {
		_, err = w.ExecContext(ctx, "RELEASE SAVEPOINT run_copy")
		return err == nil, err
	}
	if !Refused(err) {
		return false, err
	}
	if _, err := w.ExecContext(ctx, "ROLLBACK TO SAVEPOINT run_copy"); err != nil {
		return false, err
	}
	_, err = w.ExecContext(ctx, "RELEASE SAVEPOINT run_copy")
	return false, err
}

// pgCopyRow is a run's values for COPY, in runColumns' order; a run without a key or an expiry has
// NULL there, as RunCreate writes it.
func pgCopyRow(r *dbsqlc.RunCreateParams) []any {
	var key, exp any
	if r.KeyID.Valid && r.KeyID.String != "" {
		key = r.KeyID.String
	}
	if r.ExpiresAt.Valid {
		exp = r.ExpiresAt.Int64
	}
	return []any{r.ID, r.DeploymentID, key, r.Model, r.Status, r.LatencyMs, r.PromptTokens, r.CompletionTokens, r.CreatedAt, exp,
		r.Request, r.Response, r.RequestID, r.UpstreamRequestID, r.StatusCode, r.ErrorCode, r.TraceID, r.Replica, r.CachedTokens,
		r.Arm, r.ArmTarget, r.ShadowOf, r.TtftMs}
}

// pgInsertSplit inserts rows (the batch's from off on) in one statement under a savepoint (a failed
// statement aborts a PostgreSQL transaction); when the store refuses them, it halves them until the
// one it refuses is alone.
func pgInsertSplit(ctx context.Context, tx DBTX, rows []dbsqlc.RunCreateParams, off int, inserted []bool, refused *[]Refusal) error {
	if _, err := tx.ExecContext(ctx, "SAVEPOINT run_batch"); err != nil {
		return err
	}
	err := pgInsert(ctx, tx, rows, inserted[off:off+len(rows)])
	if err == nil {
		_, err = tx.ExecContext(ctx, "RELEASE SAVEPOINT run_batch")
		return err
	}
	if !Refused(err) {
		return err
	}
	if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT run_batch"); rerr != nil {
		return rerr
	}
	if _, rerr := tx.ExecContext(ctx, "RELEASE SAVEPOINT run_batch"); rerr != nil {
		return rerr
	}
	if len(rows) == 1 {
		*refused = append(*refused, Refusal{off, refusalReason(err)})
		return nil
	}
	h := len(rows) / 2
	if err := pgInsertSplit(ctx, tx, rows[:h], off, inserted, refused); err != nil {
		return err
	}
	return pgInsertSplit(ctx, tx, rows[h:], off+h, inserted, refused)
}

// pgRunInsertBatch is RunCreateIfAbsent over arrays: one statement for a whole batch. The ids it
// returns are the runs it inserted.
const pgRunInsertBatch = `INSERT INTO runs (
    id, deployment_id, key_id, model, status, latency_ms, prompt_tokens, completion_tokens,
    created_at, expires_at, request, response, request_id, upstream_request_id, status_code, error_code, trace_id, replica, cached_tokens,
    arm, arm_target, shadow_of, ttft_ms
) SELECT id, deployment_id, NULLIF(key_id, ''), model, status, latency_ms, prompt_tokens, completion_tokens,
    created_at, NULLIF(expires_at, -1), request, response, request_id, upstream_request_id, status_code, error_code, trace_id, replica, cached_tokens,
    arm, arm_target, shadow_of, ttft_ms
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[], $8::bigint[],
    $9::bigint[], $10::bigint[], $11::text[], $12::text[], $13::text[], $14::text[], $15::bigint[], $16::text[], $17::text[], $18::text[], $19::bigint[],
    $20::text[], $21::text[], $22::text[], $23::bigint[])
    AS t(id, deployment_id, key_id, model, status, latency_ms, prompt_tokens, completion_tokens,
    created_at, expires_at, request, response, request_id, upstream_request_id, status_code, error_code, trace_id, replica, cached_tokens,
    arm, arm_target, shadow_of, ttft_ms)
ON CONFLICT (id) DO NOTHING
RETURNING id`

// pgInsert writes rows (already encoded by pgRow) in one statement and marks the ones it inserted.
func pgInsert(ctx context.Context, tx DBTX, rows []dbsqlc.RunCreateParams, inserted []bool) error {
	n := len(rows)
	var (
		id, dep, key, model, status, req, resp, reqID, upID, errCode, trace, replica = make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		lat, pt, ct, at, exp, code, cached = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n),
			make([]int64, n), make([]int64, n), make([]int64, n)
		arm, armTarget, shadowOf, ttft = make([]string, n), make([]string, n), make([]string, n), make([]int64, n)
	)
	index := make(map[string]int, n)
	for i, r := range rows {
		id[i], dep[i], key[i], model[i], status[i] = r.ID, r.DeploymentID, r.KeyID.String, r.Model, r.Status
		lat[i], pt[i], ct[i], at[i] = r.LatencyMs, r.PromptTokens, r.CompletionTokens, r.CreatedAt
		exp[i] = -1
		if r.ExpiresAt.Valid {
			exp[i] = r.ExpiresAt.Int64
		}
		req[i], resp[i], reqID[i], upID[i] = r.Request, r.Response, r.RequestID, r.UpstreamRequestID
		code[i], errCode[i], trace[i], replica[i], cached[i] = r.StatusCode, r.ErrorCode, r.TraceID, r.Replica, r.CachedTokens
		arm[i], armTarget[i], shadowOf[i], ttft[i] = r.Arm, r.ArmTarget, r.ShadowOf, r.TtftMs
		index[r.ID] = i
	}
	res, err := tx.QueryContext(ctx, pgRunInsertBatch, id, dep, key, model, status, lat, pt, ct, at, exp,
		req, resp, reqID, upID, code, errCode, trace, replica, cached,
		arm, armTarget, shadowOf, ttft)
	if err != nil {
		return err
	}
	defer res.Close()
	for res.Next() {
		var got string
		if err := res.Scan(&got); err != nil {
			return err
		}
		if i, ok := index[got]; ok {
			inserted[i] = true
		}
	}
	return res.Err()
}
