// Package edgewire is the wire format of the internal API between the control plane and svc edge
// processes (docs/API.md, "Internal API for edge processes"): its paths, bodies and stream events.
package edgewire

import (
	"encoding/json"
	"time"

	"github.com/svcdev/svc/internal/runs"
)

// Paths of the internal API, under the control plane's base URL.
const (
	Prefix          = "/internal/v1/edge/"
	DeploymentsPath = Prefix + "deployments/" // + slug: GET a snapshot
	ChangesPath     = Prefix + "changes"      // GET ?after=<id>: the change feed, as server-sent events
	RunsPath        = Prefix + "runs"         // POST a run batch
	StoredRunsPath  = RunsPath + "/"          // + deploymentId + "/" + id (a run id, or an id its caller got): GET a StoredRun
	FeedbackPath    = Prefix + "feedback"     // POST a Feedback
)

// ChangeIDHeader carries the feed head of a snapshot answer, 404s included.
const ChangeIDHeader = "Svc-Change-Id"

// NotFoundHeader names what a 404 of the internal API did not find ("run" on GET runs/{deploymentId}/{runId}),
// so that an edge tells a run that is not stored from a route its control plane does not serve (an
// older version, a proxy).
const NotFoundHeader = "Svc-Not-Found"

// MaxStoredRunBytes caps the answer of GET runs/{deploymentId}/{runId} that an edge reads.
const MaxStoredRunBytes = 64 << 20

// MaxRunBatchBytes caps the body of POST runs, gzip-compressed and inflated alike; MaxRunBatchRuns caps
// the runs of one batch. An edge keeps its batches well below both (4 MiB and 500 runs).
const (
	MaxRunBatchBytes = 64 << 20
	MaxRunBatchRuns  = 10_000
)

// MaxRunBytes caps the JSON of one run in a batch (escaping included), and of any other value in it,
// so that the control plane reads a batch in bounded memory however well it compresses: a run past
// it is refused with a 413 and its batch with it. An edge ships a larger run with its usage and
// without its transcript.
const MaxRunBytes = 8 << 20

// Disabled is the body of the 404 that GET deployments/{slug} answers for a disabled endpoint: the
// error envelope, and beside it the deployment with its enabled keys, so that an edge counts the
// refused calls in the endpoint's usage under the key presented. An edge of an earlier version reads
// the 404 alone and never serves the endpoint.
type Disabled struct {
	Error    json.RawMessage `json:"error"`
	Disabled Deployment      `json:"disabled"`
}

// Snapshot is the answer of GET deployments/{slug}.
type Snapshot struct {
	ChangeID   int64      `json:"changeId"`
	Deployment Deployment `json:"deployment"`
}

// Deployment is what an edge needs to serve one slug.
type Deployment struct {
	ID               string     `json:"id"`
	Slug             string     `json:"slug"`
	ProjectID        string     `json:"projectId"`
	Target           Target     `json:"target"`
	BaseModel        string     `json:"baseModel"`
	Adapter          string     `json:"adapter"`
	AdapterName      string     `json:"adapterName"`
	AuthMode         string     `json:"authMode"`
	RunRetentionMode string     `json:"runRetentionMode"`
	RunRetentionDays int        `json:"runRetentionDays"`
	CreatedAt        time.Time  `json:"createdAt"`
	ExpiresAt        *time.Time `json:"expiresAt"`
	// Limits are the deployment's rate limits; each edge enforces limit / --edge-count.
	Limits Limits `json:"limits"`
	// Budget is the deployment's token budget, absent when none; each edge without Redis counts
	// tokens / --edge-count.
	Budget *Budget `json:"budget,omitempty"`
	// QueueTimeoutMs is the deployment's own bound on a call's wait for its turn (0: the model's).
	QueueTimeoutMs int64 `json:"queueTimeoutMs,omitempty"`
	// Keys are the deployment's enabled keys: ids, SHA-256 hashes (hex) and limits, never a plaintext.
	Keys []Key `json:"keys"`
	// Canary is the deployment's canary, absent when none (docs/API.md, "Canary").
	Canary *Canary `json:"canary,omitempty"`
}

// Canary is a snapshot's canary: its share, its mode, and its target as resolved for serving.
type Canary struct {
	ID          string `json:"id"`
	Percent     int    `json:"percent"`
	Mode        string `json:"mode"`
	Target      Target `json:"target"`
	BaseModel   string `json:"baseModel"`
	Adapter     string `json:"adapter"`
	AdapterName string `json:"adapterName"`
}

// Limits are rate limits; null is unlimited.
type Limits struct {
	RequestsPerMinute *int `json:"requestsPerMinute"`
	TokensPerMinute   *int `json:"tokensPerMinute"`
}

// Budget is a token budget: tokens per period ("day" or "month", UTC).
type Budget struct {
	Tokens int64  `json:"tokens"`
	Period string `json:"period"`
}

// Target is a deployment's target, as in the management API.
type Target struct {
	Kind  string `json:"kind"`
	JobID string `json:"jobId,omitempty"`
	Step  int64  `json:"step,omitempty"`
	Model string `json:"model,omitempty"`
}

// Key is an enabled key of a snapshot.
type Key struct {
	ID     string  `json:"id"`
	Hash   string  `json:"hash"`
	Limits Limits  `json:"limits"`
	Budget *Budget `json:"budget,omitempty"`
	Weight int     `json:"weight,omitempty"` // 0: 1
}

// Names of the change feed's events.
const (
	EventHello     = "hello"
	EventChange    = "change"
	EventHeartbeat = "heartbeat"
)

// Hello opens the change feed. Reset says that the edge's position could not be continued from (or
// it gave none): it must drop every snapshot whose changeId is below Head, then follow from Head.
// ThinkingSecret is the control plane's key of thinking signatures (base64 in JSON), which the edge
// signs and verifies with as svc server does, so that a signed thinking block goes back to any process.
type Hello struct {
	Head           int64  `json:"head"`
	Reset          bool   `json:"reset"`
	ThinkingSecret []byte `json:"thinkingSecret,omitempty"`
	// RunForms are the run batch forms the control plane reads besides the first (RunFormLines).
	RunForms []string `json:"runForms,omitempty"`
}

// Change is one change: the snapshot of Slug is no longer valid ("" for every slug).
type Change struct {
	ID   int64  `json:"id"`
	Slug string `json:"slug"`
}

// Heartbeat tells the edge that the feed is alive, and where it stands.
type Heartbeat struct {
	Head int64 `json:"head"`
}

// A run batch (POST runs) is newline-delimited JSON (ContentTypeRuns): a BatchHeader line, then one
// line per run, each a runs.Run as runs.AppendLine writes it (transcripts as the JSON they are). An edge
// sends it to a control plane whose hello announced it (Hello.RunForms); to one that did not (an older
// version, during a rolling upgrade) it sends the first form, a RunBatchV1 object, which every control
// plane still reads for one release. The edge gives the batch and every run their ids, and sends a batch
// again, unchanged, until it is answered: the control plane applies it once.

// ContentTypeRuns is the content type of a run batch in lines; RunFormLines names it in a hello.
const (
	ContentTypeRuns = "application/x-ndjson"
	RunFormLines    = "ndjson"
)

// BatchHeader is the first line of a run batch.
type BatchHeader struct {
	Batch   string  `json:"batch"` // the batch id, at most 100 characters
	Touches []Touch `json:"touches,omitempty"`
}

// RunBatchV1 is the first form of a run batch: one JSON object. Deprecated: read by control planes and
// written by edges for one release, for the other side of a rolling upgrade; removed after it.
type RunBatchV1 struct {
	BatchID string  `json:"batchId"`
	Runs    []RunV1 `json:"runs"`
	Touches []Touch `json:"touches"`
}

// RunV1 is a run of a RunBatchV1, its transcripts as strings. Deprecated with RunBatchV1.
type RunV1 struct {
	ID                string     `json:"id"`
	DeploymentID      string     `json:"deploymentId"`
	KeyID             string     `json:"keyId,omitempty"`
	Model             string     `json:"model"`
	Status            string     `json:"status"`
	StatusCode        int        `json:"statusCode,omitempty"`
	ErrorCode         string     `json:"errorCode,omitempty"`
	LatencyMs         int64      `json:"latencyMs"`
	PromptTokens      int        `json:"promptTokens"`
	CompletionTokens  int        `json:"completionTokens"`
	CreatedAt         time.Time  `json:"createdAt"`
	ExpiresAt         *time.Time `json:"expiresAt"`
	Request           string     `json:"request"`
	Response          string     `json:"response"`
	RequestID         string     `json:"requestId,omitempty"`
	UpstreamRequestID string     `json:"upstreamRequestId,omitempty"`
	TraceID           string     `json:"traceId,omitempty"`
	UsageOnly         bool       `json:"usageOnly,omitempty"`
}

// Touch is the last use of a key.
type Touch struct {
	KeyID  string    `json:"keyId"`
	UsedAt time.Time `json:"usedAt"`
}

// StoredRun is the answer of GET runs/{deploymentId}/{runId}: the request and response a stored run
// recorded, as it recorded them (core.Service.EdgeRun). An edge reads it for the Responses API's
// previous_response_id and GET /v1/responses/{id}.
type StoredRun struct {
	Request  string `json:"request"`
	Response string `json:"response"`
}

// Feedback is the body of POST feedback: the feedback an app sent an svc edge process on a run of a
// deployment (POST /v1/feedback), named by the id the app got; the control plane answers 204, 404 with
// Svc-Not-Found: run when the run is not the deployment's to score (core.Service.EdgeFeedback), or 400.
type Feedback struct {
	DeploymentID string `json:"deploymentId"`
	ID           string `json:"id"`
	Score        int    `json:"score"`
	Comment      string `json:"comment,omitempty"`
}

// RunBatchResult is the answer of POST runs.
type RunBatchResult struct {
	Inserted   int  `json:"inserted"`
	UsageOnly  int  `json:"usageOnly"`
	Duplicates int  `json:"duplicates"`
	Rejected   int  `json:"rejected"`
	Replayed   bool `json:"replayed"`
	// Refused are the runs of the batch the store could not take, set aside while the rest was
	// written: the edge counts and logs them and never sends them again. Ids and reasons only, never
	// a run's content. Absent from the answers of older control planes.
	Refused []RefusedRun `json:"refused,omitempty"`
}

// RefusedRun is a run the control plane refused, and why.
type RefusedRun struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// V1Of is a run in the first form (for a control plane that reads no other).
func V1Of(r runs.Run) RunV1 {
	v := RunV1{
		ID: r.ID, DeploymentID: r.DeploymentID, KeyID: r.KeyID, Model: r.Model, Status: r.Status,
		StatusCode: r.StatusCode, ErrorCode: r.ErrorCode, LatencyMs: r.Latency.Milliseconds(), PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens,
		CreatedAt: r.CreatedAt.UTC(), Request: string(r.Request), Response: string(r.Response),
		RequestID: r.RequestID, UpstreamRequestID: r.UpstreamRequestID, TraceID: r.TraceID, UsageOnly: r.UsageOnly,
	}
	if !r.ExpiresAt.IsZero() {
		t := r.ExpiresAt.UTC()
		v.ExpiresAt = &t
	}
	return v
}

// Run is the run a first-form run stands for.
func (v RunV1) Run() runs.Run {
	r := runs.Run{
		ID: v.ID, DeploymentID: v.DeploymentID, KeyID: v.KeyID, Model: v.Model, Status: v.Status,
		StatusCode: v.StatusCode, ErrorCode: v.ErrorCode, Latency: time.Duration(v.LatencyMs) * time.Millisecond, PromptTokens: v.PromptTokens, CompletionTokens: v.CompletionTokens,
		CreatedAt: v.CreatedAt, Request: []byte(v.Request), Response: []byte(v.Response),
		RequestID: v.RequestID, UpstreamRequestID: v.UpstreamRequestID, TraceID: v.TraceID, UsageOnly: v.UsageOnly,
	}
	if v.ExpiresAt != nil {
		r.ExpiresAt = *v.ExpiresAt
	}
	return r
}
