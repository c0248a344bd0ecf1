package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/runs"
)

// A run batch is copied in bulk on PostgreSQL (InsertRuns: COPY; when the copy is refused, through a
// temporary table and one INSERT … SELECT … ON CONFLICT (id) DO NOTHING), a round trip or a few per
// batch instead of one per run; the columns are those of dbsqlc.RunCreateParams, found by reflection,
// so that a field added to a run needs nothing here. What a client
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

// pgRow is a run as PostgreSQL stores it: its transcripts (Request, Response) in EncodeBody's form,
// every other text field cleaned (cleanText). The fields are found by their types, so that a field
// added to a run needs nothing here.
func pgRow(p dbsqlc.RunCreateParams) dbsqlc.RunCreateParams {
	v := reflect.ValueOf(&p).Elem()
	for i, f := range runFields {
		switch fv := v.Field(i); {
		case f.transcript:
			fv.SetString(EncodeBody(fv.String()))
		case fv.Kind() == reflect.String:
			fv.SetString(cleanText(fv.String()))
		case fv.Type() == nullString:
			fv.Field(0).SetString(cleanText(fv.Field(0).String()))
		}
	}
	return p
}

// A runField is a column of runs, in dbsqlc.RunCreateParams' field order.
type runField struct {
	column     string // the field's name in snake case (TestRunColumnsAreTheTable)
	transcript bool   // Request or Response: kept byte for byte
}

var (
	nullString = reflect.TypeFor[sql.NullString]()
	nullInt64  = reflect.TypeFor[sql.NullInt64]()
	runFields  = func() []runField {
		t := reflect.TypeFor[dbsqlc.RunCreateParams]()
		out := make([]runField, t.NumField())
		for i := range out {
			name := t.Field(i).Name
			out[i] = runField{column: snake(name), transcript: name == "Request" || name == "Response"}
		}
		return out
	}()
	runColumns = func() []string {
		out := make([]string, len(runFields))
		for i, f := range runFields {
			out[i] = f.column
		}
		return out
	}()
)

// snake turns sqlc's Go name of a column back into the column's name: DeploymentID is deployment_id,
// UpstreamRequestID upstream_request_id.
func snake(name string) string {
	var b strings.Builder
	for i, r := range name {
		upper := r >= 'A' && r <= 'Z'
		if upper && i > 0 {
			prev := rune(name[i-1])
			nextLower := i+1 < len(name) && name[i+1] >= 'a' && name[i+1] <= 'z'
			if prev >= 'a' && prev <= 'z' || prev >= 'A' && prev <= 'Z' && nextLower {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
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

// Every other read of a run's bodies decodes them too: the runs list's request, what an eval replays
// and compares, and the exports' pages (before, a body PostgreSQL's TEXT could not hold came back in
// its encoded form there: an eval replayed it as such, and the export counted it unparseable).

func (p pgRunQueries) RunRequest(ctx context.Context, db dbsqlc.DBTX, arg dbsqlc.RunRequestParams) (string, error) {
	r, err := p.pgQueries.RunRequest(ctx, db, arg)
	return DecodeBody(r), err
}

func (p pgRunQueries) RunResponse(ctx context.Context, db dbsqlc.DBTX, arg dbsqlc.RunResponseParams) (dbsqlc.RunResponseRow, error) {
	r, err := p.pgQueries.RunResponse(ctx, db, arg)
	r.Request, r.Response = DecodeBody(r.Request), DecodeBody(r.Response)
	return r, err
}

func (p pgRunQueries) RunResponsesByIDs(ctx context.Context, db dbsqlc.DBTX, arg dbsqlc.RunResponsesByIDsParams) ([]dbsqlc.RunResponsesByIDsRow, error) {
	rows, err := p.pgQueries.RunResponsesByIDs(ctx, db, arg)
	for i := range rows {
		rows[i].Request, rows[i].Response = DecodeBody(rows[i].Request), DecodeBody(rows[i].Response)
	}
	return rows, err
}

func (p pgRunQueries) RunExportPage(ctx context.Context, db dbsqlc.DBTX, arg dbsqlc.RunExportPageParams) ([]dbsqlc.RunExportPageRow, error) {
	rows, err := p.pgQueries.RunExportPage(ctx, db, arg)
	for i := range rows {
		rows[i].Request, rows[i].Response = DecodeBody(rows[i].Request), DecodeBody(rows[i].Response)
	}
	return rows, err
}

func (p pgRunQueries) RunShadowPairPage(ctx context.Context, db dbsqlc.DBTX, arg dbsqlc.RunShadowPairPageParams) ([]dbsqlc.RunShadowPairPageRow, error) {
	rows, err := p.pgQueries.RunShadowPairPage(ctx, db, arg)
	for i := range rows {
		r := &rows[i]
		r.Request, r.Response = DecodeBody(r.Request), DecodeBody(r.Response)
		r.PrimaryRequest, r.PrimaryResponse = DecodeBody(r.PrimaryRequest), DecodeBody(r.PrimaryResponse)
	}
	return rows, err
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

// InsertRuns writes a batch of runs in w, each at most once (a run whose id is there already is left
// alone), and reports which it inserted: the one writer of runs, on either engine. On SQLite each run
// is one statement, prepared once per transaction, and a run the store refuses is set aside alone. On
// PostgreSQL a batch is first copied in bulk (COPY, pgCopy), which takes about two thirds of the time
// of the statement; when the copy is refused (a run already there, a value the store will not take),
// the batch goes as one statement that skips the runs already there, and a batch the store refuses is
// halved until the runs it refuses are alone: those are returned, the others written. Any other error
// (the store away, the transaction aborted) is returned and nothing should be committed.
func InsertRuns(ctx context.Context, w *WriteTx, rows []dbsqlc.RunCreateParams) (inserted []bool, refused []Refusal, err error) {
	inserted = make([]bool, len(rows))
	if w.engine != Postgres {
		for i, r := range rows {
			n, err := sqliteQueries.RunCreateIfAbsent(ctx, w, dbsqlc.RunCreateIfAbsentParams(r)) // prepared once (WriteTx)
			switch {
			case err == nil:
				inserted[i] = n > 0
			case Refused(err): // a failed statement leaves SQLite's transaction as it was
				refused = append(refused, Refusal{i, refusalReason(err)})
			default:
				return nil, nil, err
			}
			// A batch is milliseconds of CPU. Yielding after each run lets the requests waiting for a
			// processor go first, so that writing runs does not delay answers (time to first token).
			runtime.Gosched()
		}
		return inserted, refused, nil
	}
	enc := make([]dbsqlc.RunCreateParams, len(rows))
	for i, r := range rows {
		enc[i] = pgRow(r)
	}
	refusal, err := pgCopy(ctx, w, "runs", enc, "run_copy")
	if err != nil {
		return nil, nil, err
	}
	if refusal == nil {
		for i := range inserted {
			inserted[i] = true
		}
		return inserted, nil, nil
	}
	err = pgInsertSplit(ctx, w, enc, 0, inserted, &refused)
	return inserted, refused, err
}

// pgCopy copies rows (already encoded by pgRow) into table under a savepoint, in PostgreSQL's binary
// COPY: no statement of megabytes of parameters to build and parse. When the store refuses the copy
// (a run already there, a value it will not take) it returns why as refusal, with the transaction as
// it was: InsertRuns then sorts the batch out (pgInsertSplit). err is any other failure.
func pgCopy(ctx context.Context, w *WriteTx, table string, rows []dbsqlc.RunCreateParams, savepoint string) (refusal, err error) {
	if _, err := w.ExecContext(ctx, "SAVEPOINT "+savepoint); err != nil {
		return nil, err
	}
	err = w.conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("db: a PostgreSQL connection of %T", dc)
		}
		_, err := c.Conn().CopyFrom(ctx, pgx.Identifier{table}, runColumns, pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
			return pgCopyRow(&rows[i]), nil
		}))
		return err
	})
	if err == nil {
		_, err = w.ExecContext(ctx, "RELEASE SAVEPOINT "+savepoint)
		return nil, err
	}
	if !Refused(err) {
		return nil, err
	}
	refusal = err
	if _, err := w.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+savepoint); err != nil {
		return nil, err
	}
	_, err = w.ExecContext(ctx, "RELEASE SAVEPOINT "+savepoint)
	return refusal, err
}

// pgCopyRow is a run's values for COPY, in runColumns' order: an optional field that is not set (a
// run without a key or an expiry) is NULL, as RunCreate writes it, and so is an empty optional text.
func pgCopyRow(r *dbsqlc.RunCreateParams) []any {
	v := reflect.ValueOf(r).Elem()
	out := make([]any, v.NumField())
	for i := range out {
		switch fv := v.Field(i); fv.Type() {
		case nullString:
			if s := fv.Interface().(sql.NullString); s.Valid && s.String != "" {
				out[i] = s.String
			}
		case nullInt64:
			if n := fv.Interface().(sql.NullInt64); n.Valid {
				out[i] = n.Int64
			}
		default:
			out[i] = fv.Interface()
		}
	}
	return out
}

// pgInsertSplit writes rows (the batch's from off on) that the store refused to copy whole, under a
// savepoint (a failed statement aborts a PostgreSQL transaction): copied into a table of the
// transaction's own, then inserted from it skipping the runs already there (pgStage). When the store
// refuses them, it halves them until the one it refuses is alone.
func pgInsertSplit(ctx context.Context, w *WriteTx, rows []dbsqlc.RunCreateParams, off int, inserted []bool, refused *[]Refusal) error {
	if _, err := w.ExecContext(ctx, "SAVEPOINT run_batch"); err != nil {
		return err
	}
	err := pgStage(ctx, w, rows, inserted[off:off+len(rows)])
	if err == nil {
		_, err = w.ExecContext(ctx, "RELEASE SAVEPOINT run_batch")
		return err
	}
	if !Refused(err) {
		return err
	}
	if _, rerr := w.ExecContext(ctx, "ROLLBACK TO SAVEPOINT run_batch"); rerr != nil {
		return rerr
	}
	if _, rerr := w.ExecContext(ctx, "RELEASE SAVEPOINT run_batch"); rerr != nil {
		return rerr
	}
	if len(rows) == 1 {
		*refused = append(*refused, Refusal{off, refusalReason(err)})
		return nil
	}
	h := len(rows) / 2
	if err := pgInsertSplit(ctx, w, rows[:h], off, inserted, refused); err != nil {
		return err
	}
	return pgInsertSplit(ctx, w, rows[h:], off+h, inserted, refused)
}

// pgStage writes rows through runs_in, a temporary table shaped like runs (its defaults included, for
// the columns a run does not write): copied in, then inserted
// into runs in one statement that skips the ids already there and returns those it inserted, which
// it marks. A refused value fails the copy or the statement, as it would fail the copy into runs.
func pgStage(ctx context.Context, w *WriteTx, rows []dbsqlc.RunCreateParams, inserted []bool) error {
	if _, err := w.ExecContext(ctx, `CREATE TEMPORARY TABLE IF NOT EXISTS runs_in (LIKE runs INCLUDING DEFAULTS) ON COMMIT DELETE ROWS`); err != nil {
		return err
	}
	if _, err := w.ExecContext(ctx, `TRUNCATE runs_in`); err != nil {
		return err
	}
	if refusal, err := pgCopy(ctx, w, "runs_in", rows, "run_stage"); err != nil || refusal != nil {
		return errors.Join(err, refusal)
	}
	cols := strings.Join(runColumns, ", ")
	res, err := w.QueryContext(ctx, `INSERT INTO runs (`+cols+`) SELECT `+cols+` FROM runs_in ON CONFLICT (id) DO NOTHING RETURNING id`)
	if err != nil {
		return err
	}
	defer res.Close()
	index := make(map[string]int, len(rows))
	for i, r := range rows {
		index[r.ID] = i
	}
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

// LatencyBoundsMs are the upper bounds, in milliseconds, of the latency histogram that usage_hourly
// keeps in its lat_* columns (lat_25 counts requests of at most 25 ms, lat_50 those over 25 and at most
// 50 ms, ..., lat_inf those over the last bound). The columns and these bounds change together.
var LatencyBoundsMs = [...]int64{25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000}

// LatencyBucket returns the histogram bucket (the lat_* column, in order) of a latency.
func LatencyBucket(ms int64) int {
	for i, b := range LatencyBoundsMs {
		if ms <= b {
			return i
		}
	}
	return len(LatencyBoundsMs)
}
