// Package runs holds the record of a served request (a run) that the edge makes, the recorder writes
// and the shipper of svc edge sends to its control plane: plain types, so that an edge without a
// database links none of the writer.
package runs

import (
	"iter"
	mrand "math/rand/v2"
	"strings"
	"sync/atomic"
	"time"
)

// The error codes of the calls admission refuses (docs/OPERATIONS.md, "Admission"), which usage counts
// apart from the other 429s: the model stayed busy past the call's queue timeout, or a budget was spent.
const (
	CodeModelBusy       = "model_busy"
	CodeBudgetExhausted = "budget_exhausted"
)

// Run is one served request, as the edge hands it over, and the one shape a run has between the edge
// and the store: the recorder writes it, an svc edge ships it as a line of a run batch (wire.go,
// docs/API.md, "Internal API for edge processes"), and both spools keep it in that form. It never
// carries credentials: the request is the body as sent (keys travel in headers, which are not
// recorded). Every request counts in the usage aggregates; its transcript is stored as a run only when
// the retention keeps runs.
type Run struct {
	// ID is the run's id when the edge chose it (a Responses call, whose response id is its run's);
	// "" gets a fresh one (NewID). A shipped run always has one.
	ID           string `json:"id"`
	DeploymentID string `json:"deploymentId"`
	KeyID        string `json:"keyId,omitempty"` // "" in auth mode none
	Model        string `json:"model"`
	Status       string `json:"status"` // "ok" or "error"
	// StatusCode is the HTTP status the request was answered with (429 for a refused one, 499 when the
	// client went away); ErrorCode says why a failed one failed (rate_limit_exceeded, model_not_found,
	// …), "" for an answer.
	StatusCode       int           `json:"statusCode,omitempty"`
	ErrorCode        string        `json:"errorCode,omitempty"`
	Latency          time.Duration `json:"latencyNs"`
	PromptTokens     int           `json:"promptTokens"`
	CompletionTokens int           `json:"completionTokens"`
	// CachedTokens are the prompt tokens the upstream read from its prefix cache, where it said.
	CachedTokens int       `json:"cachedTokens,omitempty"`
	CreatedAt    time.Time `json:"createdAt"`
	// Request and Response are the transcript, byte for byte as sent and as answered.
	Request  Transcript `json:"request,omitempty"`
	Response Transcript `json:"response,omitempty"`
	// RequestID is svc's id of the request (X-Request-Id); UpstreamRequestID the upstream's own.
	RequestID         string `json:"requestId,omitempty"`
	UpstreamRequestID string `json:"upstreamRequestId,omitempty"`
	// TraceID is the request's trace (32 hex digits) when tracing is on, else "".
	TraceID string `json:"traceId,omitempty"`
	// Replica is the replica (host:port) that answered, when the model has replicas (fleet).
	Replica string `json:"replica,omitempty"`
	// RetriedFrom is the replica that failed before any byte of its answer when the call was retried
	// on Replica (a fleet retries once); "" when it was not.
	RetriedFrom string `json:"retriedFrom,omitempty"`
	// Surface is the route the call came in by: SurfaceChat, SurfaceMessages, SurfaceResponses,
	// SurfaceEmbeddings or SurfaceCompletions ("" for a run recorded before svc said).
	Surface string `json:"surface,omitempty"`
	// TTFT is the time to the first byte of the answer: the first event of a stream, the whole answer
	// of a call answered at once.
	TTFT time.Duration `json:"ttftNs,omitempty"`
	// Queue is the call's wait for its model's turn in admission (docs/OPERATIONS.md, "Admission"): 0
	// when it did not wait; a call refused model_busy records the wait it gave up after.
	Queue time.Duration `json:"queueNs,omitempty"`

	// Canary (docs/API.md, "Canary"): Arm is the arm that answered, "primary" or "canary" ("" when the
	// deployment had no canary), ArmTarget the served model name of that arm's target, and ShadowOf the
	// primary run a shadow copy was made of ("" for a call a client made). CanaryID is the canary the
	// arm belongs to, so that a canary's compare counts its own calls only.
	Arm       string `json:"arm,omitempty"`
	ArmTarget string `json:"armTarget,omitempty"`
	ShadowOf  string `json:"shadowOf,omitempty"`
	CanaryID  string `json:"canaryId,omitempty"`

	// Evals (docs/API.md, "Evals"): EvalID is the replay eval a run answered for (its Arm is "eval"),
	// EvalOf the stored run it replays; "" for every other run.
	EvalID string `json:"evalId,omitempty"`
	EvalOf string `json:"evalOf,omitempty"`

	// UpstreamResponseID is the upstream's id of a passed-through Responses answer, which the caller got
	// (and may give feedback on, or continue with previous_response_id); "" for every other run, whose
	// answer carries an id made of the run's.
	UpstreamResponseID string `json:"upstreamResponseId,omitempty"`

	// ExpiresAt is when the run may be deleted, as the deployment's retention decided when the request
	// was served (core.Retention.RunExpiresAt); the zero time keeps it until deleted.
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	// UsageOnly counts the run in the usage aggregates and stores no transcript: the deployment's
	// retention is "none".
	UsageOnly bool `json:"usageOnly,omitempty"`
}

// The surfaces a run may have come in by (Run.Surface), as the runs listing's surface filter names them:
// a Messages or Responses token count is a run of its surface.
const (
	SurfaceChat        = "chat"        // POST /v1/chat/completions
	SurfaceMessages    = "messages"    // POST /v1/messages, /v1/messages/count_tokens
	SurfaceResponses   = "responses"   // POST /v1/responses, /v1/responses/input_tokens
	SurfaceEmbeddings  = "embeddings"  // POST /v1/embeddings
	SurfaceCompletions = "completions" // POST /v1/completions
)

// Surfaces are the surfaces, in the order a listing's filter offers them.
var Surfaces = []string{SurfaceChat, SurfaceMessages, SurfaceResponses, SurfaceEmbeddings, SurfaceCompletions}

// CopiesKey is the key of the usage rows that count the calls svc made itself from a caller's call (a
// shadow copy, an eval's replay): they are the deployment's usage, shown apart, never a key's
// (docs/API.md, "Usage"). No key id looks like it (keys are key_…).
const CopiesKey = "~copies"

// Copy reports whether the run is a call svc made itself rather than one a client made: a shadow copy
// of a primary's call, or an eval's replay of a stored run.
func (r *Run) Copy() bool { return r.ShadowOf != "" || r.EvalOf != "" }

// UsageKey is the key a run counts under in the usage aggregates: its key's, or CopiesKey for a copy.
func (r *Run) UsageKey() string {
	if r.Copy() {
		return CopiesKey
	}
	return r.KeyID
}

// Shipped is a run with the id its edge gave it.
type Shipped struct {
	ID string
	Run
}

// Batch is what an edge ships at once: runs and the last use of keys (docs/DEPLOY.md, "Runs and
// lastUsedAt"). Runs yields the runs one at a time (decoded from the request body as they are
// written, or from a small body decoded whole), so that a batch of many megabytes is never held whole
// in memory; ID and Touches are read once Runs is exhausted, so that a decoder may fill them in as it
// meets them. An error from Runs aborts the batch: nothing of it is written.
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
	// Refused are the runs the store could not take (set aside, counted and logged by their id): the
	// rest of the batch is written, and an edge never sends a refused run again.
	Refused []Refused
}

// Refused is a run the store refused, and why (the store's words, never the run's content).
type Refused struct {
	ID     string
	Reason string
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// NewID returns a fresh run id, in the form of the service's other ids: a time prefix keeps them
// sortable by creation (and ids that one process makes in one millisecond in the order it made them,
// so that runs listed newest first keep the order of their requests), the random tail keeps them
// unique. Edge processes give their runs ids before shipping them, so that every retry names the same
// run.
func NewID(at time.Time) string {
	ms := at.UnixMilli()
	seq := sequence(ms)
	// Unique, not secret: the runtime's generator (math/rand/v2, seeded from the system) costs no
	// system call, and 8 base62 characters after the millisecond and its sequence make a collision
	// negligible (one in 2·10¹⁴ for two ids of one millisecond and sequence, across processes).
	b := make([]byte, 0, 25)
	b = append(b, "run_"...)
	const hexDigits = "0123456789abcdef"
	for shift := 40; shift >= 0; shift -= 4 { // 11 hex digits of the time
		b = append(b, hexDigits[(ms>>uint(shift))&0xf])
	}
	b = append(b, base62[seq/62], base62[seq%62])
	for i := 0; i < 8; i++ {
		b = append(b, base62[mrand.IntN(62)])
	}
	return string(b)
}

// latest is the millisecond of the newest id this process made and its sequence in it, as
// ms<<12 | sequence.
var latest atomic.Int64

// maxSequence is the last sequence two base62 characters hold: past it (3,844 ids in one
// millisecond), ids of that millisecond are unique but no longer ordered.
const maxSequence = 62*62 - 1

// sequence returns the place of a new id in millisecond ms among this process's ids of that
// millisecond: 0 for its first, then 1, 2, ... An id of an earlier millisecond than the newest (a
// request that began before another ended) takes 0: it sorts before the newer ones anyway.
func sequence(ms int64) int {
	for {
		old := latest.Load()
		oldMS, oldSeq := old>>12, int(old&0xfff)
		switch {
		case ms < oldMS:
			return 0
		case ms > oldMS:
			if latest.CompareAndSwap(old, ms<<12) {
				return 0
			}
		case oldSeq >= maxSequence:
			return maxSequence
		default:
			if latest.CompareAndSwap(old, old+1) {
				return oldSeq + 1
			}
		}
	}
}

// The ids a caller gets are its run's id (docs/API.md, "Ids are run ids"): a chat completion's id is
// chatcmpl- and the run id's tail, an Anthropic message's msg- and the tail (translated from that
// completion), a translated response's resp_ and the tail. Feedback names a run by any of them.

// Tail is a run id without its run_ prefix.
func Tail(runID string) string { return strings.TrimPrefix(runID, "run_") }

// CompletionID is the id of the chat completion a run answered.
func CompletionID(runID string) string { return "chatcmpl-" + Tail(runID) }

// MessageID is the id of the Anthropic message a run answered (a translated one is named after its
// chat completion, which gives the same).
func MessageID(runID string) string { return "msg_" + Tail(runID) }

// ResponseID is the id of the translated response a run answered.
func ResponseID(runID string) string { return "resp_" + Tail(runID) }

// idPrefixes are the prefixes of the ids made of a run id, the run's own first.
var idPrefixes = []string{"run_", "chatcmpl-", "msg_", "resp_"}

// IDOf is the run id an id a caller got names (a run id, or a completion, message or response id made
// of one), and whether it has that form: a known prefix and a tail of 1-64 letters and digits.
func IDOf(id string) (string, bool) {
	for _, p := range idPrefixes {
		tail, ok := strings.CutPrefix(id, p)
		if !ok {
			continue
		}
		if tail == "" || len(tail) > 64 {
			return "", false
		}
		for _, c := range []byte(tail) {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
				return "", false
			}
		}
		return "run_" + tail, true
	}
	return "", false
}
