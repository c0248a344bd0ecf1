package cloudapi

import (
	"encoding/json"
	"time"
)

// Target kinds (docs/API.md, "Resources").
const (
	TargetFinalAdapter = "final_adapter"
	TargetCheckpoint   = "checkpoint"
	TargetBaseModel    = "base_model"
	TargetMultiModel   = "multi_model"
)

// Auth modes.
const (
	AuthFixedAPIKey = "fixed_api_key"
	AuthNone        = "none"
)

// Run retention modes.
const (
	RetentionDays      = "days"
	RetentionUnlimited = "unlimited"
	RetentionNone      = "none"
)

// Target is what a deployment serves. Which fields are set depends on Kind.
type Target struct {
	Kind  string `json:"kind"`
	JobID string `json:"jobId,omitempty"`
	Step  int64  `json:"step,omitempty"`
	Model string `json:"model,omitempty"`
}

// Deployment is a dedicated inference URL bound to a target and an auth mode.
type Deployment struct {
	ID               string     `json:"id"`
	Slug             string     `json:"slug"`
	URL              string     `json:"url"`
	ProjectID        string     `json:"projectId"`
	Target           Target     `json:"target"`
	AuthMode         string     `json:"authMode"`
	Enabled          bool       `json:"enabled"`
	RunRetentionMode string     `json:"runRetentionMode"`
	RunRetentionDays int        `json:"runRetentionDays"`
	CreatedAt        time.Time  `json:"createdAt"`
	UpdatedAt        time.Time  `json:"updatedAt"`
	ExpiresAt        *time.Time `json:"expiresAt"`
	Limits           Limits     `json:"limits"`
	Budget           *Budget    `json:"budget"` // null when the deployment has none (budgets.go)
	// QueueTimeoutMs bounds its calls' wait for their model's turn; null: the model's queueTimeoutMs.
	QueueTimeoutMs *int    `json:"queueTimeoutMs"`
	Canary         *Canary `json:"canary"` // null when the deployment has no canary (canary.go)
	// PromoteGate is the eval a promote needs (evals.go); null when promotes need none.
	PromoteGate *PromoteGate `json:"promoteGate"`
}

// CreateDeploymentRequest is the body of a create call. Unset optional fields take the server defaults
// (auth mode fixed_api_key, retention 7 days).
type CreateDeploymentRequest struct {
	Slug             string `json:"slug"`
	Target           Target `json:"target"`
	AuthMode         string `json:"authMode,omitempty"`
	RunRetentionMode string `json:"runRetentionMode,omitempty"`
	RunRetentionDays int    `json:"runRetentionDays,omitempty"`
	// Budget is the deployment's token budget (nil: none).
	Budget *BudgetSet `json:"budget,omitempty"`
	// QueueTimeoutMs bounds its calls' wait for their model's turn (nil: the model's).
	QueueTimeoutMs *int `json:"queueTimeoutMs,omitempty"`
}

// UpdateDeploymentRequest is a partial update: only non-nil fields change.
type UpdateDeploymentRequest struct {
	Target           *Target `json:"target,omitempty"`
	AuthMode         *string `json:"authMode,omitempty"`
	Enabled          *bool   `json:"enabled,omitempty"`
	RunRetentionMode *string `json:"runRetentionMode,omitempty"`
	RunRetentionDays *int    `json:"runRetentionDays,omitempty"`
	// Limits changes the rate limits field by field (see LimitsUpdate).
	Limits LimitsUpdate `json:"limits,omitzero"`
	// Budget sets or removes the token budget (see BudgetUpdate).
	Budget BudgetUpdate `json:"budget,omitzero"`
	// QueueTimeoutMs sets the bound on its calls' wait for their turn (LimitTo(ms)) or gives it back to
	// the model's (NoLimit()).
	QueueTimeoutMs LimitChange `json:"queueTimeoutMs,omitzero"`
	// Canary sets or ends the canary (see CanaryUpdate).
	Canary CanaryUpdate `json:"canary,omitzero"`
	// PromoteGate sets or removes the promotion gate (see GateUpdate).
	PromoteGate GateUpdate `json:"promoteGate,omitzero"`
	// Override lets a target change past the promotion gate, recording why.
	Override *Override `json:"override,omitempty"`
}

// Bulk actions.
const (
	BulkEnable  = "enable"
	BulkDisable = "disable"
	BulkDelete  = "delete"
)

// BulkRequest applies one action to many deployments.
type BulkRequest struct {
	IDs    []string `json:"ids"`
	Action string   `json:"action"`
}

// BulkResult is the outcome for one id of a bulk call.
type BulkResult struct {
	ID    string     `json:"id"`
	OK    bool       `json:"ok"`
	Error *ErrorBody `json:"error,omitempty"`
}

// Key is an API key of a deployment. The plaintext is never part of it.
type Key struct {
	ID         string     `json:"id"`
	Label      string     `json:"label"`
	Prefix     string     `json:"prefix"`
	Enabled    bool       `json:"enabled"`
	CreatedAt  time.Time  `json:"createdAt"`
	LastUsedAt *time.Time `json:"lastUsedAt"`
	RevokedAt  *time.Time `json:"revokedAt"`
	Limits     Limits     `json:"limits"`
	Budget     *Budget    `json:"budget"` // null when the key has none (budgets.go)
	// Weight is its share of its model's turns against the other keys waiting (1 to 100, default 1).
	Weight int `json:"weight"`
}

// IssuedKey is the answer to an issue call: the only time the plaintext is ever returned.
type IssuedKey struct {
	Key       Key    `json:"key"`
	Plaintext string `json:"plaintext"`
}

// Job statuses.
const (
	JobRunning   = "running"
	JobCompleted = "completed"
	JobFailed    = "failed"
)

// Checkpoint is a mid-run checkpoint of a training job.
type Checkpoint struct {
	Step     int64  `json:"step"`
	Artifact string `json:"artifact"`
}

// Job is a training job whose adapters deployments can serve.
type Job struct {
	ID           string       `json:"id"`
	BaseModel    string       `json:"baseModel"`
	Status       string       `json:"status"`
	Checkpoints  []Checkpoint `json:"checkpoints"`
	FinalAdapter *string      `json:"finalAdapter"`
	CreatedAt    time.Time    `json:"createdAt"`
}

// CreateJobRequest registers a training job.
type CreateJobRequest struct {
	ID           string       `json:"id,omitempty"` // a UUID; generated when empty
	BaseModel    string       `json:"baseModel"`
	Status       string       `json:"status,omitempty"` // default running
	Checkpoints  []Checkpoint `json:"checkpoints,omitempty"`
	FinalAdapter *string      `json:"finalAdapter,omitempty"`
}

// UpdateJobRequest adds checkpoints, sets the status or the final adapter.
type UpdateJobRequest struct {
	Status       *string      `json:"status,omitempty"`
	FinalAdapter *string      `json:"finalAdapter,omitempty"`
	Checkpoints  []Checkpoint `json:"checkpoints,omitempty"`
}

// Model is an entry of the catalog.
type Model struct {
	ID               string `json:"id"`
	Public           bool   `json:"public"`
	Default          bool   `json:"default"`
	SupportsMessages bool   `json:"supportsMessages"`
	Runtime          string `json:"runtime"`
	Simulated        bool   `json:"simulated"`
	// Fleet is the model's replicas as the server's edge sees them; nil for a model with one upstream.
	Fleet *Fleet `json:"fleet,omitempty"`
}

// Fleet is how a model with replicas routes and the state of each replica.
type Fleet struct {
	// Routing is affinity, least-loaded or round-robin.
	Routing string `json:"routing"`
	// CacheSignal is what the router knows of the replicas' prefix caches: "routed" (the prompts it
	// sent each, an approximation) or "kv-events" (the replicas' own).
	CacheSignal string    `json:"cacheSignal"`
	MaxLoras    int       `json:"maxLoras"`
	Replicas    []Replica `json:"replicas"`
}

// Replica states.
const (
	ReplicaHealthy = "healthy"
	ReplicaOut     = "out"
)

// Replica is one replica of a Fleet.
type Replica struct {
	Addr  string `json:"addr"`  // host:port, as runs name it
	State string `json:"state"` // ReplicaHealthy or ReplicaOut
	// OutReason says why a replica is out; OutUntil is when it is next probed.
	OutReason string     `json:"outReason,omitempty"`
	OutUntil  *time.Time `json:"outUntil,omitempty"`
	// InFlight counts the server's calls on the replica; Waiting and Running are the replica's own
	// counts as last scraped from its /metrics.
	InFlight  int   `json:"inFlight"`
	Waiting   int   `json:"waiting"`
	Running   int   `json:"running"`
	Ejections int64 `json:"ejections"`
	// MeanCallMs is the moving mean of its calls' time; Pace that over the fastest replica's (1 the
	// fastest; 0 before a call ended).
	MeanCallMs int64   `json:"meanCallMs"`
	Pace       float64 `json:"pace"`
	// Adapters are the LoRA adapters running on it; ResidentAdapters those with no call running that
	// are still in one of its GPU slots (a call of one there needs no adapter load).
	Adapters         []string `json:"adapters"`
	ResidentAdapters []string `json:"residentAdapters"`
	// UnreadyAdapters are those svc is loading on it (or that its listing lacks): their calls go to
	// the other replicas meanwhile.
	UnreadyAdapters []string `json:"unreadyAdapters"`
	// KV is what the replica's own KV-cache events say it holds; nil when the model reads none
	// (cacheSignal "routed").
	KV *ReplicaKV `json:"kv,omitempty"`
}

// ReplicaKV is a replica's KV-cache state as its KV events told it (docs/LORA.md, "Exact cache state
// from KV events").
type ReplicaKV struct {
	// State is "exact" (every event since its publisher began), "partial" (events were missed: what
	// it holds is known in part), "quiet" (no event yet) or "unknown" (calls went to it and no event
	// came for 30 s: placement uses the routed signal for it).
	State  string `json:"state"`
	Blocks int    `json:"blocks"` // the blocks its events say it holds
}

// RunSummary is a run without its request and response bodies.
type RunSummary struct {
	ID string `json:"id"`
	// Preview is the start of the request's last user message, one line, when the listing asked for it
	// (ListRunsOptions.Preview).
	Preview          string     `json:"preview,omitempty"`
	DeploymentID     string     `json:"deploymentId"`
	KeyID            *string    `json:"keyId"`
	Model            string     `json:"model"`
	Status           string     `json:"status"`
	LatencyMs        int64      `json:"latencyMs"`
	PromptTokens     int64      `json:"promptTokens"`
	CompletionTokens int64      `json:"completionTokens"`
	CreatedAt        time.Time  `json:"createdAt"`
	ExpiresAt        *time.Time `json:"expiresAt"`
	// RequestID is the X-Request-Id the edge answered; UpstreamRequestID the upstream's own id.
	RequestID         string `json:"requestId"`
	UpstreamRequestID string `json:"upstreamRequestId"`
	// StatusCode is the HTTP status the call was answered with: 200, or the error's (429 for a call
	// beyond a rate limit, 499 when the caller went away); 0 for runs recorded before svc kept it.
	// ErrorCode says why a failed call failed (rate_limit_exceeded, model_not_found, invalid_request,
	// …), "" for an answer; the error's message is in the run's response.
	StatusCode int    `json:"statusCode"`
	ErrorCode  string `json:"errorCode,omitempty"`
	// TraceID is the OpenTelemetry trace id of the request (32 hex digits) when the server traces; ""
	// when tracing is off.
	TraceID string `json:"traceId"`
	// Replica is the replica (host:port) of the model's fleet that answered; "" for a model with one
	// upstream.
	Replica string `json:"replica,omitempty"`
	// RetriedFrom is the replica (host:port) that failed before any byte of its answer when the call
	// was retried on Replica; "" when the call was not retried.
	RetriedFrom string `json:"retriedFrom,omitempty"`
	// Surface is the route the call came in by: "chat", "messages", "responses", "embeddings" or
	// "completions" ("" for a run recorded before svc said).
	Surface string `json:"surface,omitempty"`
	// CachedTokens are the prompt tokens the upstream read from its prefix cache (of promptTokens).
	CachedTokens int64 `json:"cachedTokens"`
	// Arm is the canary arm that answered (ArmPrimary or ArmCanary; "" when the deployment had no
	// canary), ArmTarget the model id that arm served under, ShadowOf the primary run a shadow copy was
	// made of ("" for a caller's own call), CanaryID the canary the arm belongs to. TTFTMs is the time
	// to the answer's first byte.
	Arm       string `json:"arm,omitempty"`
	ArmTarget string `json:"armTarget,omitempty"`
	ShadowOf  string `json:"shadowOf,omitempty"`
	CanaryID  string `json:"canaryId,omitempty"`
	TTFTMs    int64  `json:"ttftMs"`
	// EvalID is the replay eval the run answered for (Arm "eval"), EvalOf the stored run it replays
	// (docs/API.md, "Evals"); "" for every other run.
	EvalID string `json:"evalId,omitempty"`
	EvalOf string `json:"evalOf,omitempty"`
	// QueueMs is the call's wait for its model's turn in admission; 0 when it did not wait.
	QueueMs int64 `json:"queueMs"`
	// UpstreamResponseID is the upstream's id of a passed-through Responses answer, the id its caller got
	// (feedback may name the run by it); "" for other runs, whose answers carry ids made of the run id.
	UpstreamResponseID string `json:"upstreamResponseId,omitempty"`
	// Feedback is the feedback given on the run; absent when none was (docs/API.md, "Feedback").
	Feedback *Feedback `json:"feedback,omitempty"`
}

// Run is one recorded edge request with its request and response.
type Run struct {
	RunSummary
	Request  json.RawMessage `json:"request"`
	Response json.RawMessage `json:"response"`
}

// RunPage is one page of a run listing; NextCursor is empty on the last page.
type RunPage struct {
	Runs       []RunSummary `json:"runs"`
	NextCursor string       `json:"nextCursor"`
}

// ListOptions pages through a listing. Zero values leave the choice to the server (100 items, the
// first page).
type ListOptions struct {
	Limit  int    // page size, 1 to 500; 0 = the server's default (100)
	Cursor string // NextCursor of the previous page; empty = first page
}

// DeploymentPage is one page of a deployment listing, newest first; NextCursor is empty on the last
// page.
type DeploymentPage struct {
	Deployments []Deployment `json:"deployments"`
	NextCursor  string       `json:"nextCursor"`
}

// JobPage is one page of a job listing, newest first; NextCursor is empty on the last page.
type JobPage struct {
	Jobs       []Job  `json:"jobs"`
	NextCursor string `json:"nextCursor"`
}

// Claim is the answer to ClaimAnonymous: the anonymous identity's project, now the caller's (empty
// when it never had one), and how many of its endpoints were kept.
type Claim struct {
	OrgSlug     string `json:"orgSlug"`
	ProjectSlug string `json:"projectSlug"`
	ProjectID   string `json:"projectId"`
	Endpoints   int    `json:"endpoints"`
}

// Identity is who a token belongs to.
type Identity struct {
	ID    string `json:"id"`
	Kind  string `json:"kind"` // anonymous or user
	Email string `json:"email,omitempty"`
}

// AnonymousToken is the answer to the anonymous mint.
type AnonymousToken struct {
	Token    string   `json:"token"`
	Identity Identity `json:"identity"`
}

// Scope names a project: the content of .svc/state.json.
type Scope struct {
	OrgSlug     string `json:"orgSlug"`
	ProjectSlug string `json:"projectSlug"`
	ProjectID   string `json:"projectId"`
}

// Project is a project of an org, as listed by Me.
type Project struct {
	ID   string `json:"id"`
	Slug string `json:"slug"`
}

// Org is an org the identity belongs to, with its projects.
type Org struct {
	Slug     string    `json:"slug"`
	Projects []Project `json:"projects"`
}

// Me is the answer to GET /v1/me.
type Me struct {
	Identity Identity `json:"identity"`
	Orgs     []Org    `json:"orgs"`
}

// ErrorBody is the body of every error of the management API: {"error": ErrorBody}.
type ErrorBody struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
}
