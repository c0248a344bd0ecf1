package edgemodel

import (
	"crypto/sha256"
	"crypto/subtle"
	"time"
)

// Target kinds.
const (
	TargetFinalAdapter = "final_adapter"
	TargetCheckpoint   = "checkpoint"
	TargetBaseModel    = "base_model"
	TargetMultiModel   = "multi_model"
)

// Auth modes of a deployment.
const (
	AuthFixedAPIKey = "fixed_api_key"
	AuthNone        = "none"
)

// Target is what a deployment serves. Which fields are set depends on Kind.
type Target struct {
	Kind  string
	JobID string
	Step  int64
	Model string
}

// RateLimits are the rate limits of a deployment or of one of its keys (docs/API.md, "Rate limits"):
// at most RequestsPerMinute requests and TokensPerMinute tokens (prompt plus completion) a minute. A
// nil field is unlimited. A call must fit both its deployment's limits and its key's.
type RateLimits struct {
	RequestsPerMinute *int
	TokensPerMinute   *int
}

// Unlimited reports whether neither limit is set.
func (l RateLimits) Unlimited() bool { return l.RequestsPerMinute == nil && l.TokensPerMinute == nil }

// Budget is the token budget of a deployment or of one of its keys (docs/API.md, "Budgets"): at most
// Tokens prompt plus completion tokens per Period, "day" or "month" (UTC). A call must fit both its
// deployment's budget and its key's.
type Budget struct {
	Tokens int64
	Period string
}

// EdgeDeployment is the snapshot of a deployment that the edge needs to serve one request. It is
// shared between requests and must not be modified.
type EdgeDeployment struct {
	ID        string
	Slug      string
	ProjectID string
	Target    Target
	// BaseModel is the catalog model that serves the target: the job's base model for adapter and
	// checkpoint targets, the pinned model for base_model targets, "" for multi_model.
	BaseModel string
	// Adapter is the artifact URI of the adapter to serve on top of BaseModel ("" when none), and
	// AdapterName the stable name under which a runtime loads it.
	Adapter     string
	AdapterName string
	AuthMode    string
	// Retention decides whether the edge records a run and the run's expiresAt.
	Retention Retention
	CreatedAt time.Time
	// Limits are the deployment's own rate limits; a key's limits apply on top (EdgeKey.Limits).
	Limits RateLimits
	// Budget is the deployment's token budget (nil: none); a key's applies on top (EdgeKey.Budget).
	Budget *Budget
	// QueueTimeout bounds its calls' wait for their model's turn, over the model's queueTimeoutMs
	// (0: the model's).
	QueueTimeout time.Duration
	// Canary is the deployment's canary (canary.go), nil when it has none.
	Canary *EdgeCanary

	expiresAt int64 // Unix ms; 0 = never
}

// Served reports the model id that answers for this deployment: the adapter name when there is one,
// else the base model.
func (d *EdgeDeployment) Served() string {
	if d.AdapterName != "" {
		return d.AdapterName
	}
	return d.BaseModel
}

// ExpiresAt returns when a deployment made by an anonymous identity stops serving (zero: never).
func (d *EdgeDeployment) ExpiresAt() time.Time {
	if d.expiresAt == 0 {
		return time.Time{}
	}
	return time.UnixMilli(d.expiresAt).UTC()
}

// SetExpiresAt sets when the deployment stops serving (zero: never), for whoever builds it: the store,
// or an edge process rebuilding it from its snapshot.
func (d *EdgeDeployment) SetExpiresAt(t time.Time) {
	d.expiresAt = 0
	if !t.IsZero() {
		d.expiresAt = t.UnixMilli()
	}
}

// Expired reports whether the deployment had expired at now.
func (d *EdgeDeployment) Expired(now time.Time) bool {
	return d.expiresAt != 0 && d.expiresAt <= now.UnixMilli()
}

// EdgeKey is the key that authorised an edge request: its id and its own rate limits. The zero value
// (no ID) stands for a deployment in auth mode none, where no key is checked.
type EdgeKey struct {
	ID     string
	Limits RateLimits
	Budget *Budget // nil: none
	Weight int     // its share of its model's turns against other keys (1 by default; 0 reads as 1)
}

// EdgeSnapshotKey is an enabled key of a snapshot's deployment, with its own rate limits.
type EdgeSnapshotKey struct {
	ID     string
	Hash   [32]byte
	Limits RateLimits
	Budget *Budget // nil: none
	Weight int
}

// HashSecret is how every secret (API keys, tokens) is stored and compared: its SHA-256.
func HashSecret(plaintext string) [32]byte { return sha256.Sum256([]byte(plaintext)) }

// EdgeKeyMatch returns the key among keys whose hash is presented's, with its limits, comparing every
// hash in constant time; ok is false when none matches. It is the key check of edge processes, which
// hold snapshots instead of the database (the embedded edge's is core's EdgeAuthorize).
func EdgeKeyMatch(keys []EdgeSnapshotKey, presented string) (key EdgeKey, ok bool) {
	if presented == "" {
		return EdgeKey{}, false
	}
	hash := HashSecret(presented)
	for _, k := range keys {
		if subtle.ConstantTimeCompare(k.Hash[:], hash[:]) == 1 {
			key, ok = EdgeKey{ID: k.ID, Limits: k.Limits, Budget: k.Budget, Weight: k.Weight}, true
		}
	}
	return key, ok
}

// EdgeTokenPrefix starts every edge token, so that a leaked one is recognisable.
const EdgeTokenPrefix = "svc-edge-"

// Run retention modes.
const (
	RetentionDays      = "days"
	RetentionUnlimited = "unlimited"
	RetentionNone      = "none"
)

// Bounds and default of a retention in days.
const (
	RetentionMinDays     = 1
	RetentionMaxDays     = 365
	DefaultRetentionDays = 7
)

// Retention is a deployment's run retention: whether runs are recorded, and until when they are kept.
// core decides it; the recorder and the edge carry what it says.
type Retention struct {
	Mode string // RetentionDays, RetentionUnlimited or RetentionNone
	Days int    // used by RetentionDays; kept for the other modes so that switching back restores it
}

// Records reports whether runs of a deployment with this retention are recorded at all.
func (r Retention) Records() bool { return r.Mode == RetentionDays || r.Mode == RetentionUnlimited }

// RunExpiresAt is the expiresAt of a run served at created: created + Days for RetentionDays, the
// zero time (kept until deleted) otherwise. It is fixed when the run is written, so a later change of
// retention leaves earlier runs on their original lifecycle.
func (r Retention) RunExpiresAt(created time.Time) time.Time {
	if r.Mode != RetentionDays {
		return time.Time{}
	}
	days := r.Days
	if days < RetentionMinDays || days > RetentionMaxDays {
		days = DefaultRetentionDays
	}
	return created.Add(time.Duration(days) * 24 * time.Hour)
}
