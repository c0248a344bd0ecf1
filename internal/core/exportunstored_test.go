package core

import (
	"context"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/internal/dataset"
	"github.com/svcdev/svc/internal/recorder"
	"github.com/svcdev/svc/internal/runs"
)

// Runs svc kept no transcript of cannot be exported, and the export counts them as no_transcript from
// what it keeps: the usage aggregates' answered calls of the hours the window touches less the answered
// runs stored in those hours. A deployment whose retention went from days to none and back: the runs
// stored are written; the calls of the retention-none hour, those of a later hour that were not stored,
// and a run whose transcript expired are counted; failed calls are not (usage does not tell them from
// cut ones, and they would never be written); a cut hour counts whole; minScore leaves them out unseen
// (they have no feedback); the arm filter counts the arm's own.
func TestExportCountsRunsWithoutTranscript(t *testing.T) {
	s, _ := newTestService(t) // now is 12:00 UTC
	ctx := context.Background()
	p, pr := anonymousProject(t, s)
	d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "kept", Target: edgemodel.Target{Kind: "base_model", Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	rec := recorder.New(s.db, recorder.Options{})
	at := func(hhmm string) time.Time {
		c, err := time.Parse("15:04", hhmm)
		if err != nil {
			t.Fatal(err)
		}
		return time.Date(2026, 1, 1, c.Hour(), c.Minute(), 0, 0, time.UTC)
	}
	call := func(hhmm, status string, usageOnly bool, arm string, expires time.Time) {
		t.Helper()
		r := runs.Run{DeploymentID: d.ID, Model: "m", Status: status, StatusCode: 200, CreatedAt: at(hhmm), UsageOnly: usageOnly, Arm: arm, ArmTarget: "m", ExpiresAt: expires,
			Request:  runs.Transcript(`{"model":"m","messages":[{"role":"user","content":"asked at ` + hhmm + `"}]}`),
			Response: runs.Transcript(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"answered"},"finish_reason":"stop"}]}`)}
		if status != "ok" {
			r.StatusCode, r.Response = 500, runs.Transcript(`{"error":{"message":"upstream failed","type":"server_error"}}`)
		}
		if !rec.Record(r) {
			t.Fatal("run not queued")
		}
	}
	none := time.Time{}
	// 09:00-10:00, retention 30 days: three answers (one expired since), one failure.
	call("09:05", "ok", false, "", none)
	call("09:10", "ok", false, "", none)
	call("09:15", "ok", false, "", at("11:00"))
	call("09:20", "error", false, "", none)
	// 10:00-11:00, retention none: four answers (two of them a split canary's) and a failure, none stored.
	call("10:05", "ok", true, "primary", none)
	call("10:10", "ok", true, "primary", none)
	call("10:15", "ok", true, "canary", none)
	call("10:20", "ok", true, "canary", none)
	call("10:25", "error", true, "primary", none)
	// 11:00-12:00: retention none until 11:30, then 30 days again.
	call("11:10", "ok", true, "", none)
	call("11:20", "ok", true, "", none)
	call("11:40", "ok", false, "", none)
	call("11:50", "ok", false, "", none)
	rec.Close()

	for _, c := range []struct {
		name                      string
		req                       ExportRequest
		written, noTranscript, fa int
	}{
		{"all time", ExportRequest{}, 4, 7, 1},                                                    // 09:05 09:10 11:40 11:50; 09:15 expired, 4 of 10:00, 2 of 11:00
		{"up to 10:00", ExportRequest{Until: at("10:00")}, 2, 1, 1},                               // the expired one
		{"the none hour", ExportRequest{Since: at("10:00"), Until: at("11:00")}, 0, 4, 0},         // nothing stored
		{"cut hours count whole", ExportRequest{Since: at("10:30"), Until: at("11:45")}, 1, 6, 0}, // 11:40 written; 10:00's 4 and 11:00's 2
		{"since 11:30", ExportRequest{Since: at("11:30")}, 2, 2, 0},
		{"minScore 0", ExportRequest{MinScore: ptr(0)}, 4, 7, 1}, // nothing marked bad: an unscored run counts 0, as all time
		{"minScore 1", ExportRequest{MinScore: ptr(1)}, 0, 0, 0}, // nothing marked good: nothing written, nothing counted
		{"canary arm", ExportRequest{Arm: edgemodel.ArmCanary}, 0, 2, 0},
		{"primary arm", ExportRequest{Arm: edgemodel.ArmPrimary}, 4, 5, 1}, // every answer but the canary's two
	} {
		t.Run(c.name, func(t *testing.T) {
			c.req.Format = ExportChat
			var lines int
			counts, err := s.ExportRuns(ctx, pr, d.ID, c.req, func([]byte) error { lines++; return nil }, func() {})
			if err != nil {
				t.Fatal(err)
			}
			if lines != c.written || counts.Written != c.written || counts.Skipped[dataset.ReasonNoTranscript] != c.noTranscript ||
				counts.Skipped[dataset.ReasonFailed] != c.fa {
				t.Errorf("%d lines, counts %+v; want %d written, no_transcript %d, failed %d", lines, counts, c.written, c.noTranscript, c.fa)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
