package api

import (
	"encoding/json"
	"math"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/internal/evalscore"
	"github.com/svcdev/svc/internal/fieldmap"
)

// Request bodies as this API reads them. Optional fields are pointers, so that an explicit "" or 0
// reaches the rules (and is refused there) instead of reading as "not given"; null is refused by the
// strict decoder.

type targetBody struct {
	Kind  string `json:"kind"`
	JobID string `json:"jobId"`
	Step  int64  `json:"step"`
	Model string `json:"model"`
}

func (t targetBody) core() edgemodel.Target {
	return edgemodel.Target{Kind: t.Kind, JobID: t.JobID, Step: t.Step, Model: t.Model}
}

type createDeploymentBody struct {
	Slug             string     `json:"slug"`
	Target           targetBody `json:"target"`
	AuthMode         *string    `json:"authMode"`
	RunRetentionMode *string    `json:"runRetentionMode"`
	RunRetentionDays *int       `json:"runRetentionDays"`
	Budget           budgetBody `json:"budget"`
	QueueTimeoutMs   *int       `json:"queueTimeoutMs"`
}

type updateDeploymentBody struct {
	Target           *targetBody      `json:"target"`
	AuthMode         *string          `json:"authMode"`
	Enabled          *bool            `json:"enabled"`
	RunRetentionMode *string          `json:"runRetentionMode"`
	RunRetentionDays *int             `json:"runRetentionDays"`
	Limits           limitsBody       `json:"limits"`
	Budget           budgetBody       `json:"budget"`
	QueueTimeoutMs   queueTimeoutBody `json:"queueTimeoutMs"`
	Canary           canaryBody       `json:"canary"`
	PromoteGate      gateBody         `json:"promoteGate"`
	Override         *overrideBody    `json:"override"`
}

type bulkBody struct {
	IDs    []string `json:"ids"`
	Action string   `json:"action"`
}

type checkpointBody struct {
	Step     int64  `json:"step"`
	Artifact string `json:"artifact"`
}

type createJobBody struct {
	ID           string           `json:"id"`
	BaseModel    string           `json:"baseModel"`
	Status       *string          `json:"status"`
	Checkpoints  []checkpointBody `json:"checkpoints"`
	FinalAdapter *string          `json:"finalAdapter"`
}

type updateJobBody struct {
	Status       *string          `json:"status"`
	FinalAdapter *string          `json:"finalAdapter"`
	Checkpoints  []checkpointBody `json:"checkpoints"`
}

func checkpoints(in []checkpointBody) []core.Checkpoint {
	out := make([]core.Checkpoint, len(in))
	for i, c := range in {
		out[i] = core.Checkpoint{Step: c.Step, Artifact: c.Artifact}
	}
	return out
}

// Answers: core's types in the SDK's wire types.

func targetWire(t edgemodel.Target) cloudapi.Target {
	return cloudapi.Target{Kind: t.Kind, JobID: t.JobID, Step: t.Step, Model: t.Model}
}

func deploymentWire(d *core.Deployment) cloudapi.Deployment {
	return cloudapi.Deployment{
		ID: d.ID, Slug: d.Slug, URL: d.URL, ProjectID: d.ProjectID, Target: targetWire(d.Target),
		AuthMode: d.AuthMode, Enabled: d.Enabled, RunRetentionMode: d.Retention.Mode, RunRetentionDays: d.Retention.Days,
		CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt, ExpiresAt: d.ExpiresAt, Limits: limitsWire(d.Limits), Budget: budgetWire(d.Budget), QueueTimeoutMs: d.QueueTimeoutMs,
		Canary: canaryWire(d.Canary), PromoteGate: gateWire(d.PromoteGate),
	}
}

func fleetWire(f edgemodel.Fleet) *cloudapi.Fleet {
	out := &cloudapi.Fleet{Routing: f.Routing, CacheSignal: f.CacheSignal, MaxLoras: f.MaxLoras, Replicas: make([]cloudapi.Replica, 0, len(f.Replicas))}
	for _, r := range f.Replicas {
		w := cloudapi.Replica{Addr: r.Addr, State: cloudapi.ReplicaHealthy, InFlight: r.InFlight, Waiting: r.Waiting, Running: r.Running,
			Ejections: int64(r.Ejections), MeanCallMs: r.MeanCall.Milliseconds(), Pace: math.Round(r.Pace*100) / 100, Adapters: r.Adapters}
		w.ResidentAdapters, w.UnreadyAdapters = r.Resident, r.Unready
		if r.KVState != "" {
			w.KV = &cloudapi.ReplicaKV{State: r.KVState, Blocks: r.KVBlocks}
		}
		if w.Adapters == nil {
			w.Adapters = []string{}
		}
		if w.ResidentAdapters == nil {
			w.ResidentAdapters = []string{}
		}
		if w.UnreadyAdapters == nil {
			w.UnreadyAdapters = []string{}
		}
		if !r.Healthy {
			until := r.OutUntil.UTC()
			w.State, w.OutReason, w.OutUntil = cloudapi.ReplicaOut, r.Out, &until
		}
		out.Replicas = append(out.Replicas, w)
	}
	return out
}

func keyWire(k core.Key) cloudapi.Key {
	return cloudapi.Key{ID: k.ID, Label: k.Label, Prefix: k.Prefix, Enabled: k.Enabled, CreatedAt: k.CreatedAt, LastUsedAt: k.LastUsedAt,
		RevokedAt: k.RevokedAt, Limits: limitsWire(k.Limits), Budget: budgetWire(k.Budget), Weight: k.Weight}
}

func jobWire(j *core.Job) cloudapi.Job {
	out := cloudapi.Job{ID: j.ID, BaseModel: j.BaseModel, Status: j.Status, Checkpoints: make([]cloudapi.Checkpoint, len(j.Checkpoints)),
		FinalAdapter: j.FinalAdapter, CreatedAt: j.CreatedAt}
	for i, c := range j.Checkpoints {
		out.Checkpoints[i] = cloudapi.Checkpoint{Step: c.Step, Artifact: c.Artifact}
	}
	return out
}

func runSummaryWire(r core.RunSummary) cloudapi.RunSummary {
	var out cloudapi.RunSummary
	summaryWire.Copy(&out, &r)
	out.Feedback = feedbackWire(r.Feedback)
	return out
}

// summaryWire maps a run's fields to the SDK's by name (fieldmap: durations as milliseconds, "" as
// null), so that a run field needs no line here; the feedback is mapped by feedbackWire.
var summaryWire = fieldmap.New[cloudapi.RunSummary, core.RunSummary]("Feedback")

// runWire is a run with its bodies.
func runWire(r *core.Run) cloudapi.Run {
	return cloudapi.Run{RunSummary: runSummaryWire(*r), Request: rawJSON(r.Request), Response: rawJSON(r.Response)}
}

// rawJSON passes a recorded body through as JSON, or as a JSON string when it is not JSON.
func rawJSON(s []byte) json.RawMessage {
	if json.Valid(s) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(string(s))
	return b
}

func scopeWire(p *core.Project) cloudapi.Scope {
	return cloudapi.Scope{OrgSlug: p.OrgSlug, ProjectSlug: p.Slug, ProjectID: p.ID}
}

func orgWire(o core.Org) cloudapi.Org {
	out := cloudapi.Org{Slug: o.Slug, Projects: make([]cloudapi.Project, len(o.Projects))}
	for i, p := range o.Projects {
		out.Projects[i] = cloudapi.Project{ID: p.ID, Slug: p.Slug}
	}
	return out
}

// gateWire is a deployment's promotion gate as the SDK reads it, nil when none.
func gateWire(g *evalscore.Gate) *cloudapi.PromoteGate {
	if g == nil {
		return nil
	}
	return &cloudapi.PromoteGate{MinWinRate: g.MinWinRate, MaxAgeHours: g.MaxAgeHours}
}
