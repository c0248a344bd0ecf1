// Package runs holds the record of a served request (a run) that the edge makes, the recorder writes
// and the shipper of svc edge sends to its control plane: plain types, so that an edge without a
// database links none of the writer.
package runs

import (
	"iter"
	mrand "math/rand/v2"
	"time"
)

// Run is one served request, as the edge hands it over. It never carries credentials: the request is
// the body as sent (keys travel in headers, which are not recorded). Every request counts in the usage
// aggregates; its transcript is stored as a run only when the retention keeps runs.
type Run struct {
	// ID is the run's id when the edge chose it (a Responses call, whose response id is its run's);
	// "" gets a fresh one (NewID).
	ID           string
	DeploymentID string
	KeyID        string // "" in auth mode none
	Model        string
	Status       string // "ok" or "error"
	// StatusCode is the HTTP status the request was answered with (429 for a refused one, 499 when the
	// client went away); ErrorCode says why a failed one failed (rate_limit_exceeded, model_not_found,
	// …), "" for an answer.
	StatusCode       int
	ErrorCode        string
	Latency          time.Duration
	PromptTokens     int
	CompletionTokens int
	CreatedAt        time.Time
	Request          []byte
	Response         []byte
	// RequestID is svc's id of the request (X-Request-Id); UpstreamRequestID the upstream's own.
	RequestID         string
	UpstreamRequestID string
	// TraceID is the request's trace (32 hex digits) when tracing is on, else "".
	TraceID string

	// ExpiresAt is when the run may be deleted, as the deployment's retention decided when the request
	// was served (core.Retention.RunExpiresAt); the zero time keeps it until deleted.
	ExpiresAt time.Time
	// UsageOnly counts the run in the usage aggregates and stores no transcript: the deployment's
	// retention is "none".
	UsageOnly bool
}

// Shipped is a run with the id its edge gave it.
type Shipped struct {
	ID string
	Run
}

// Batch is what an edge ships at once: runs and the last use of keys (docs/DEPLOY.md, "Runs and
// lastUsedAt"). Runs yields the runs one at a time (decoded from the request body as they are
// written), so that a batch of many megabytes is never held whole in memory; ID and Touches are read
// once Runs is exhausted, so that a decoder may fill them in as it meets them. An error from Runs
// aborts the batch: nothing of it is written.
type Batch struct {
	ID      string
	Runs    iter.Seq2[Shipped, error]
	Touches map[string]time.Time // key id → last use
}

// RunsOf yields runs, for a batch whose runs are already in memory.
func RunsOf(runs []Shipped) iter.Seq2[Shipped, error] {
	return func(yield func(Shipped, error) bool) {
		for _, r := range runs {
			if !yield(r, nil) {
				return
			}
		}
	}
}

// IngestResult says what a shipped batch changed.
type IngestResult struct {
	Inserted   int  // runs written
	UsageOnly  int  // runs of deployments whose retention is none: counted in usage, not stored
	Duplicates int  // runs already there (sent before)
	Rejected   int  // runs of deployments that no longer exist (deleted, or being drained)
	Replayed   bool // the whole batch was applied before: nothing was written
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// NewID returns a fresh run id, in the form of the service's other ids: a time prefix keeps them
// roughly sortable by creation, the random tail keeps them unique. Edge processes give their runs ids
// before shipping them, so that every retry names the same run.
func NewID(at time.Time) string {
	ms := at.UnixMilli()
	// Unique, not secret: the runtime's generator (math/rand/v2, seeded from the system) costs no
	// system call, and 10 base62 characters after the millisecond make a collision negligible.
	b := make([]byte, 0, 25)
	b = append(b, "run_"...)
	const hexDigits = "0123456789abcdef"
	for shift := 40; shift >= 0; shift -= 4 { // 11 hex digits of the time
		b = append(b, hexDigits[(ms>>uint(shift))&0xf])
	}
	for i := 0; i < 10; i++ {
		b = append(b, base62[mrand.IntN(62)])
	}
	return string(b)
}
