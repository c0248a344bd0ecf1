package studio

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/sentence"
	"github.com/svcdev/svc/views"
)

// The views know nothing of the SDK; these functions turn its types into view models.

func endpointView(d cloudapi.Deployment) views.Endpoint {
	return views.Endpoint{
		ID:            d.ID,
		Slug:          d.Slug,
		URL:           d.URL,
		TargetSummary: d.Target.Summary(),
		AuthMode:      d.AuthMode,
		Enabled:       d.Enabled,
		Retention:     retentionText(d.RunRetentionMode, d.RunRetentionDays),
		Canary:        canaryView(d.Canary),
		MultiModel:    d.Target.Kind == cloudapi.TargetMultiModel,
		Lifetime:      views.NewLifetime(d.CreatedAt, d.ExpiresAt, time.Now()),
		RetentionMode: d.RunRetentionMode,
		RetentionDays: d.RunRetentionDays,
		Budget:        budgetView(d.Budget),
	}
}

// budgetView is a budget as the studio shows it (the zero Budget: none).
func budgetView(b *cloudapi.Budget) views.Budget {
	if b == nil {
		return views.Budget{}
	}
	return views.Budget{Set: true, Used: b.Used, Tokens: b.Tokens, Period: b.Period, ResetsAt: b.ResetsAt}
}

func retentionText(mode string, days int) string {
	switch mode {
	case cloudapi.RetentionUnlimited:
		return "Unlimited (kept until deleted)"
	case cloudapi.RetentionNone:
		return "Don't store"
	case cloudapi.RetentionDays:
		if days == 1 {
			return "Keep for 1 day"
		}
		return "Keep for " + strconv.Itoa(days) + " days"
	}
	return mode
}

// runRetentionText is the retention as the runs card's empty state words it: "7 days", "unlimited".
func runRetentionText(mode string, days int) string {
	switch mode {
	case cloudapi.RetentionUnlimited:
		return "unlimited"
	case cloudapi.RetentionDays:
		if days == 1 {
			return "1 day"
		}
		return strconv.Itoa(days) + " days"
	}
	return mode
}

// runsView is one page of the runs card. keys are the endpoint's keys (revoked ones included), so
// that each run names its key by the label the key table shows.
func runsView(endpointID string, p *cloudapi.RunPage, keys []cloudapi.Key) views.Runs {
	v := views.Runs{EndpointID: endpointID, NextCursor: p.NextCursor, Runs: make([]views.Run, 0, len(p.Runs))}
	for _, r := range p.Runs {
		v.Runs = append(v.Runs, runView(endpointID, r, keys))
	}
	return v
}

func runView(endpointID string, r cloudapi.RunSummary, keys []cloudapi.Key) views.Run {
	t := r.CreatedAt.UTC()
	run := views.Run{
		EndpointID:         endpointID,
		ID:                 r.ID,
		Time:               t.Format("Jan 2 15:04:05"),
		DateTime:           t.Format(time.RFC3339),
		Model:              r.Model,
		Preview:            r.Preview,
		OK:                 r.Status == "ok",
		Status:             r.Status,
		StatusCode:         r.StatusCode,
		ErrorCode:          r.ErrorCode,
		LatencyMs:          r.LatencyMs,
		QueueMs:            r.QueueMs,
		Replica:            r.Replica,
		Surface:            r.Surface,
		RetriedFrom:        r.RetriedFrom,
		UpstreamResponseID: r.UpstreamResponseID,
		Arm:                r.Arm, ArmTarget: r.ArmTarget, ShadowOf: r.ShadowOf, CanaryID: r.CanaryID,
		EvalID: r.EvalID, EvalOf: r.EvalOf,
		Tokens: strconv.FormatInt(r.PromptTokens, 10) + " → " + strconv.FormatInt(r.CompletionTokens, 10),
	}
	if r.Feedback != nil {
		at := r.Feedback.At.UTC()
		run.Score, run.Scored, run.FeedbackComment = r.Feedback.Score, true, r.Feedback.Comment
		run.FeedbackTime, run.FeedbackDateTime = at.Format("Jan 2 15:04:05"), at.Format(time.RFC3339)
	}
	if r.KeyID != nil {
		run.Key.ID = *r.KeyID
		for _, k := range keys {
			if k.ID == *r.KeyID {
				run.Key.Label, run.Key.Prefix = k.Label, k.Prefix
				break
			}
		}
	}
	return run
}

// runDetailView is a run opened from the runs card, its bodies pretty-printed.
func runDetailView(endpointID string, r *cloudapi.Run, keys []cloudapi.Key) views.RunDetail {
	v := views.RunDetail{Run: runView(endpointID, r.RunSummary, keys), Expires: "never (unlimited retention)",
		Request: prettyJSON(r.Request), Response: prettyJSON(r.Response)}
	if !v.OK {
		v.Reason = sentence.From(errorMessage(r.Response))
	}
	if r.ExpiresAt != nil {
		v.Expires = r.ExpiresAt.UTC().Format("Jan 2 15:04:05") + " UTC"
	}
	return v
}

// errorMessage is the message of the error a failed run answered: its response is the error's
// envelope (OpenAI's or Anthropic's), or a cut stream's answer with the error beside its content.
func errorMessage(response json.RawMessage) string {
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(response, &body) != nil {
		return ""
	}
	return body.Error.Message
}

// prettyJSON indents a recorded body; one that is not JSON is shown as it was recorded. An empty
// body (runs recorded before svc kept refused calls' bodies) reads as not recorded.
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" || string(raw) == `""` {
		return "(not recorded)"
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

func listView(ds []cloudapi.Deployment) views.List {
	l := views.List{Endpoints: make([]views.Endpoint, 0, len(ds))}
	for _, d := range ds {
		l.Endpoints = append(l.Endpoints, endpointView(d))
	}
	return l
}

func keyViews(ks []cloudapi.Key) []views.Key {
	out := make([]views.Key, 0, len(ks))
	for _, k := range ks {
		v := views.Key{ID: k.ID, Label: k.Label, Prefix: k.Prefix, Enabled: k.Enabled, Created: views.WhenText(k.CreatedAt),
			RequestsPerMinute: limitText(k.Limits.RequestsPerMinute), TokensPerMinute: limitText(k.Limits.TokensPerMinute),
			Budget: budgetView(k.Budget)}
		if k.LastUsedAt != nil {
			v.LastUsed = views.WhenText(*k.LastUsedAt)
		}
		out = append(out, v)
	}
	return out
}

func keysView(d cloudapi.Deployment, ks []cloudapi.Key) views.Keys {
	return views.Keys{EndpointID: d.ID, AuthMode: d.AuthMode, Keys: keyViews(ks)}
}

func (s *Server) detailView(d cloudapi.Deployment, ks []cloudapi.Key) views.Detail {
	return views.Detail{
		Endpoint:      endpointView(d),
		Keys:          keyViews(ks),
		Limits:        limitsForm(d.ID, d.Limits),
		TargetEdit:    targetEdit(d),
		RetentionEdit: retentionEdit(d),
		BudgetEdit:    budgetEdit(d),
		QuickStart: views.QuickStart{
			BaseURL:  views.EdgeBaseURL(s.apiBaseURL, d.URL, d.Slug),
			AuthMode: d.AuthMode,
			Disabled: !d.Enabled,
			Model:    sampleModel(d),
			// The key dialog is in the API keys section; keys exist only in fixed_api_key mode.
			EndpointID: d.ID,
			NoKeys:     !hasEnabledKey(ks),
		},
	}
}

// hasEnabledKey reports whether any key is enabled (revoked keys stay listed).
func hasEnabledKey(ks []cloudapi.Key) bool {
	for _, k := range ks {
		if k.Enabled {
			return true
		}
	}
	return false
}

// sampleModel is the "model" the samples send. Single-target endpoints ignore it, but the SDKs
// require one; the base model's name reads best, the slug otherwise. Multi-model endpoints get ""
// so the samples leave the choice to the user (omitted means the default model).
func sampleModel(d cloudapi.Deployment) string {
	switch d.Target.Kind {
	case cloudapi.TargetBaseModel:
		return d.Target.Model
	case cloudapi.TargetMultiModel:
		return ""
	}
	return d.Slug
}

func jobView(j cloudapi.Job) views.Job {
	v := views.Job{ID: j.ID, Short: shortID(j.ID), BaseModel: j.BaseModel, Status: j.Status, HasFinal: j.FinalAdapter != nil}
	for _, c := range j.Checkpoints {
		v.Checkpoints = append(v.Checkpoints, c.Step)
	}
	return v
}
