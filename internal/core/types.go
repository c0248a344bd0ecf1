package core

import (
	"time"

	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/evalscore"
	"github.com/svcdev/svc/internal/runs"
)

// The domain's own types. handlers/api maps them to the SDK's wire types (cloudapi), so that a change
// of the wire format never reaches the rules, and the rules never depend on the SDK.

// Job statuses.
const (
	JobRunning   = "running"
	JobCompleted = "completed"
	JobFailed    = "failed"
)

// Bulk actions.
const (
	BulkEnable  = "enable"
	BulkDisable = "disable"
	BulkDelete  = "delete"
)

// Deployment is a dedicated inference URL bound to a target and an auth mode.
type Deployment struct {
	ID        string
	Slug      string
	URL       string
	ProjectID string
	Target    edgemodel.Target
	AuthMode  string
	Enabled   bool
	Retention edgemodel.Retention
	CreatedAt time.Time
	UpdatedAt time.Time
	ExpiresAt *time.Time // set only on deployments created by anonymous identities
	Limits    edgemodel.RateLimits
	Budget    *BudgetUsage // nil when the deployment has none (budgets.go)
	// QueueTimeoutMs bounds its calls' wait for their model's turn; nil: the model's (admission.go).
	QueueTimeoutMs *int
	Canary         *Canary // nil when the deployment has none (canary.go)
	// PromoteGate is the eval a promote needs (gate.go); nil when promotes need none.
	PromoteGate *evalscore.Gate
}

// NewDeployment asks for a deployment. Nil fields take the defaults; they are pointers so that an
// explicit "" or 0 is refused rather than mistaken for "not given".
type NewDeployment struct {
	Slug          string
	Target        edgemodel.Target
	AuthMode      *string
	RetentionMode *string
	RetentionDays *int
	Budget        *edgemodel.Budget // nil: none
	// QueueTimeoutMs is its own bound on a call's wait for its turn (nil: the model's).
	QueueTimeoutMs *int
}

// DeploymentChange is a partial update: only non-nil fields change.
type DeploymentChange struct {
	Target        *edgemodel.Target
	AuthMode      *string
	Enabled       *bool
	RetentionMode *string
	RetentionDays *int
	Limits        RateLimitsChange // field by field; the zero value changes nothing
	Budget        BudgetChange     // the zero value changes nothing
	// QueueTimeoutMs sets (Value) or clears (nil Value: the model's) its bound on a call's wait.
	QueueTimeoutMs LimitChange
	Canary         *CanaryChange // nil leaves the canary as it is (canary.go)
	PromoteGate    *GateChange   // nil leaves the promotion gate as it is (gate.go)
	// Override lets a target change pass the promotion gate, recorded with its reason (gate.go).
	Override *Override
}

// BulkResult is the outcome of a bulk action for one id; Err is nil on success.
type BulkResult struct {
	ID  string
	Err *edgemodel.Error
}

// Key is an API key of a deployment. The plaintext is never part of it.
type Key struct {
	ID         string
	Label      string
	Prefix     string
	Enabled    bool
	CreatedAt  time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
	Limits     edgemodel.RateLimits
	Budget     *BudgetUsage // nil when the key has none (budgets.go)
	Weight     int          // its share of its model's turns against other keys (admission.go)
}

// IssuedKey is a new key with its plaintext, which exists only in this value.
type IssuedKey struct {
	Key       Key
	Plaintext string
}

// Checkpoint is a mid-run checkpoint of a training job.
type Checkpoint struct {
	Step     int64
	Artifact string
}

// Job is a training job whose adapters deployments can serve.
type Job struct {
	ID           string
	BaseModel    string
	Status       string
	Checkpoints  []Checkpoint
	FinalAdapter *string
	CreatedAt    time.Time
}

// NewJob registers a training job; an empty ID is generated, a nil Status is "running".
type NewJob struct {
	ID           string
	BaseModel    string
	Status       *string
	Checkpoints  []Checkpoint
	FinalAdapter *string
}

// JobChange adds checkpoints and sets the status or the final adapter; nil fields stay.
type JobChange struct {
	Status       *string
	FinalAdapter *string
	Checkpoints  []Checkpoint
}

// RunSummary is a recorded edge request without its bodies: the run as the edge made it (runs.Run, its
// Request and Response empty) and the feedback given on it. A run field added to runs.Run and to the
// store's queries reaches it with no change here (runs.go maps the store's rows by field name).
type RunSummary struct {
	runs.Run
	// Feedback is the feedback given on the run, nil when none was.
	Feedback *Feedback
	// Preview is the start of the last user message of the run's request (conv.Preview), read when a
	// listing asks for it (RunFilter.Preview); "" otherwise.
	Preview string
}

// Run is a recorded edge request with its request and response bodies (JSON as recorded, in
// Run.Request and Run.Response): a RunSummary whose bodies are read.
type Run = RunSummary

// Page is one page of a listing, newest first; NextCursor is "" on the last page.
type Page[T any] struct {
	Items      []T
	NextCursor string
}

// AnonymousToken is a freshly minted anonymous identity and its bearer token.
type AnonymousToken struct {
	Token      string
	IdentityID string
}

// Identity is who a token belongs to.
type Identity struct {
	ID    string
	Kind  string
	Email string
}

// Org is an org with its projects.
type Org struct {
	Slug     string
	Projects []Project
}

// Me is an identity with the orgs and projects it belongs to.
type Me struct {
	Identity Identity
	Orgs     []Org
}
