// Package views holds the studio's templ components and the small view models they render.
package views

import (
	"encoding/json"
	"net/url"
	"strconv"

	"github.com/a-h/templ"
)

// Auth modes as the views compare them; the wire values of the management API.
const (
	AuthFixedAPIKey = "fixed_api_key"
	AuthNone        = "none"
)

// Target kinds offered by the create form (the multi-model target is not offered there).
const (
	KindFinalAdapter = "final_adapter"
	KindCheckpoint   = "checkpoint"
	KindBaseModel    = "base_model"
)

// Page is the full studio page; everything else arrives as fragments.
type Page struct {
	CSRFToken string
}

// Endpoint is one deployment as the list and the detail show it.
type Endpoint struct {
	ID            string
	Slug          string
	URL           string
	TargetSummary string // the list's summary line, e.g. "Final adapter (job 1a2b3c4d)"
	AuthMode      string
	Enabled       bool
	Retention     string // e.g. "Keep for 7 days"
	Canary        Canary // the endpoint's canary (canary.go); zero when none
	MultiModel    bool   // a multi-model endpoint, which takes no canary
	Lifetime      Lifetime
	// RetentionMode and RetentionDays are the run retention as the settings form sets it.
	RetentionMode string
	RetentionDays int
	// Budget is the endpoint's token budget and what its period used; zero when none.
	Budget Budget
}

// List is the endpoint list fragment.
type List struct {
	Endpoints []Endpoint
	// NextCursor is the cloud's cursor of the next page; "" on the last one.
	NextCursor string
	// Notice explains an empty list that is not simply "nothing created yet", such as a signed-in
	// user without a project state file.
	Notice string
	// Created is the id of the endpoint the create form just made: its row is marked as new.
	Created string
}

// Key is an API key row; the plaintext is never part of it.
type Key struct {
	ID      string
	Label   string
	Prefix  string
	Enabled bool
	// RequestsPerMinute and TokensPerMinute are the key's rate limits as its form shows them ("" is
	// unlimited).
	RequestsPerMinute string
	TokensPerMinute   string
	// Calls24h is how many calls the key made in the last 24 hours; "" when unknown.
	Calls24h string
	// Budget is the key's token budget and what its period used; zero when none.
	Budget Budget
	// Created and LastUsed are when the key was issued and last called with ("Dec 2, 14:05 UTC";
	// LastUsed "" when never).
	Created, LastUsed string
}

// Detail is the detail fragment of one endpoint.
type Detail struct {
	Endpoint
	Keys       []Key
	QuickStart QuickStart
	Limits     LimitsForm
	// TargetEdit and RetentionEdit are the Settings' Target and run retention cards.
	TargetEdit    TargetForm
	RetentionEdit RetentionForm
	// BudgetEdit is the Settings' token budget and queue card.
	BudgetEdit BudgetForm
	Section    string    // which section shows: SectionOverview, SectionKeys, …
	RunFilter  RunFilter // the Runs section's filters, from its hash route
	Evals      Evals     // the Evals section, when it shows
	// Gate is the promotion gate in words ("" when the deployment has none); Gate's evals link is the
	// canary's candidate's.
	Gate string
}

// Keys is the key table of one endpoint, swapped on its own after an issue or a revoke.
type Keys struct {
	EndpointID string
	AuthMode   string
	Keys       []Key
}

// Run is one row of the "Recent runs" card, formatted for display.
type Run struct {
	EndpointID string
	ID         string
	Time       string // UTC, short, e.g. "Jan 2 15:04:05"
	DateTime   string // RFC 3339, for the <time> element
	Model      string
	Preview    string // the start of the request's last user message, one line
	OK         bool
	Status     string // "ok" or "error"
	// StatusCode is the HTTP status the call was answered with (0: not recorded, for old runs);
	// ErrorCode why a failed call failed (rate_limit_exceeded, …).
	StatusCode int
	ErrorCode  string
	LatencyMs  int64
	QueueMs    int64  // the wait for its model's turn in admission (0: none)
	Tokens     string // "prompt → completion"
	Key        RunKey
	Replica    string // the replica (host:port) that answered, when the model has replicas
	Surface    string // the route the call came in by: chat, messages, responses, embeddings, completions
	// RetriedFrom is the replica that failed before answering when the call was retried on Replica.
	RetriedFrom string
	// UpstreamResponseID is the upstream's id of a passed-through Responses answer, which its caller got.
	UpstreamResponseID string
	// Score is the feedback given on the run (1 good, -1 bad, 0 neutral), when Scored, with its comment
	// and when it was given (FeedbackTime "Jan 2 15:04:05" UTC, FeedbackDateTime RFC 3339).
	Score                          int
	Scored                         bool
	FeedbackComment                string
	FeedbackTime, FeedbackDateTime string
	// The canary (canary.go): the arm that answered ("" without a canary), the model id it served
	// under, the primary run a shadow copy was made of, and the canary the arm belongs to.
	Arm, ArmTarget, ShadowOf, CanaryID string
	// The replay eval the run answered for, and the stored run it replays (docs/API.md, "Evals").
	EvalID, EvalOf string
}

// shortLabelRunes is how long a key label is shown where room is short (the key table, the runs'
// key column and filter); a longer one keeps its start and its end, where labels made from a common
// prefix differ, with an ellipsis between, and shows whole on hover.
const shortLabelRunes = 40

// ShortLabel is a key label cut to shortLabelRunes runes in its middle when it is longer.
func ShortLabel(label string) string {
	r := []rune(label)
	if len(r) <= shortLabelRunes {
		return label
	}
	head := (shortLabelRunes - 1) * 3 / 5
	tail := shortLabelRunes - 1 - head
	return string(r[:head]) + "…" + string(r[len(r)-tail:])
}

// RunKey is the key a run was made with, as the key table names it.
type RunKey struct {
	ID     string // empty for calls without a key (authentication none)
	Label  string // the key's label; empty when the key is not among the endpoint's keys
	Prefix string
}

// RunDetail is one run opened from the runs card: the row's facts plus what was sent and answered.
type RunDetail struct {
	Run
	Expires  string // "Jan 9 15:04:05 UTC", or "never"
	Request  string // pretty-printed JSON, or the body as recorded
	Response string
	Reason   string // a failed run's error message, from its response; "" when none
}

// Runs is one page of the "Recent runs" card. The first page is the card's body; later pages
// (Append) are only rows, added to the table by "Load more".
type Runs struct {
	EndpointID string
	Runs       []Run
	NextCursor string
	Append     bool
	Retention  string // e.g. "Keep for 7 days"; set on the first page only
	NotStored  bool   // retention none: new calls are not recorded
	Filter     RunFilter
}

// RunFilter is the Runs section's filter, as its controls, its hash route
// (#/endpoints/<id>/runs?status=error) and the studio's runs route carry it; each field off when "".
type RunFilter struct {
	Status string // ok or error
	Key    string // a key id
	Arm    string // primary, canary or shadow
	// Surface is the route the calls came in by: one of RunSurfaces' values.
	Surface string
	Range   string // one of RunRanges: the runs of the last hour, day, …
}

// RunSurfaces are the surfaces a run may have come in by (runs.Surfaces, in its order) with their routes.
var RunSurfaces = []struct{ Value, Route string }{
	{"chat", "POST /v1/chat/completions"}, {"messages", "POST /v1/messages"}, {"responses", "POST /v1/responses"},
	{"embeddings", "POST /v1/embeddings"}, {"completions", "POST /v1/completions"},
}

// SurfaceRoute is the route of a surface, for a title; the surface itself when unknown.
func SurfaceRoute(surface string) string {
	for _, s := range RunSurfaces {
		if s.Value == surface {
			return s.Route
		}
	}
	return surface
}

// RunRanges are the Runs filter's time ranges, by their query value.
var RunRanges = []struct{ Value, Label string }{{"1h", "the last hour"}, {"24h", "the last 24 hours"}, {"7d", "the last 7 days"}, {"30d", "the last 30 days"}}

// Set reports whether any filter is on.
func (f RunFilter) Set() bool { return f != RunFilter{} }

// Query is the filter as query parameters, "" when none is set.
func (f RunFilter) Query() string {
	q := url.Values{}
	for name, v := range map[string]string{"status": f.Status, "key": f.Key, "arm": f.Arm, "surface": f.Surface, "range": f.Range} {
		if v != "" {
			q.Set(name, v)
		}
	}
	return q.Encode()
}

// KeyForm is the key modal's prompt, with the error of a failed attempt.
type KeyForm struct {
	EndpointID string
	Label      string
	Error      string
	// BudgetTokens and BudgetPeriod are the new key's token budget as typed ("" tokens: none), with
	// their errors keyed "budgetTokens" and "budgetPeriod".
	BudgetTokens, BudgetPeriod string
	BudgetErrors               map[string]string
}

// IssuedKey is the key modal after a successful issue: the only time the plaintext is shown.
type IssuedKey struct {
	Label     string
	Plaintext string
	Keys      Keys // swapped out of band so the table shows the new key at once
}

// CreateForm is the create form with the values and errors of a failed attempt. Errors are keyed
// by field name ("slug", "target", "jobId", "step", "model", "authMode"); Message is a form-wide error.
type CreateForm struct {
	Slug      string
	Kind      string
	JobID     string
	Step      string
	Model     string
	AuthMode  string
	Errors    map[string]string
	Message   string
	Submitted bool
	OOB       bool // rendered as a fresh form riding along with the reloaded list
}

// NewCreateForm is the form as it first opens: Base model, which needs nothing but the catalog, and
// API-key authentication (the default auth mode).
func NewCreateForm() CreateForm {
	return CreateForm{Kind: KindBaseModel, AuthMode: AuthFixedAPIKey}
}

// Job is one entry of the job picker. Its checkpoints' steps fill the step picker (app.js).
type Job struct {
	ID          string
	Short       string
	BaseModel   string
	Status      string
	HasFinal    bool
	Checkpoints []int64
}

// Model is one entry of the base-model picker.
type Model struct {
	ID        string
	Default   bool
	Simulated bool
}

// Options is the content of a picker: the choices and the one to keep selected.
type Options[T any] struct {
	Items    []T
	Selected string
}

// Identity is the header badge: who the studio calls the cloud as, and in which project.
type Identity struct {
	Present    bool   // a usable credentials file exists
	Kind       string // anonymous or oauth
	APIBaseURL string
	Project    string // org/project, empty without a state file
}

// ChatReply is the playground's answer.
type ChatReply struct {
	Model string
	Reply string
}

// Problem is an error shown in the page: the upstream message and its code.
type Problem struct {
	Status  int
	Code    string
	Message string
}

// ErrorPage is a view that failed to load.
type ErrorPage struct {
	Problem
	Title string // e.g. "Endpoint not found"
	Retry bool   // offer to load the view again
	Back  bool   // link to the list (every view but the list)
	// Create offers the create form, which mints anonymous credentials when it opens: the action the
	// no_credentials message names.
	Create bool
}

// kvJSON encodes a flat map for hx-vals; the values are ours, so encoding cannot fail.
func kvJSON(m map[string]string) string {
	b, _ := json.Marshal(m)
	return string(b)
}

// endpointPath is the studio route of one endpoint's API resource.
func endpointPath(id string, rest ...string) string {
	p := "/api/deployments/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + url.PathEscape(r)
	}
	return p
}

// detailHash is the deep link of one endpoint's detail view.
func detailHash(id string) string {
	return "#/endpoints/" + url.PathEscape(id)
}

// plural is "1 checkpoint", "3 checkpoints".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// oob marks a fragment for an out-of-band swap when it rides along with another response.
func oob(on bool) templ.Attributes {
	if on {
		return templ.Attributes{"hx-swap-oob": "true"}
	}
	return templ.Attributes{}
}
