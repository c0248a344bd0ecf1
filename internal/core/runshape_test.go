package core

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/internal/recorder"
	"github.com/svcdev/svc/internal/runs"
)

// Every field of a run reaches the store and comes back from it as the edge made it, through the
// recorder's write and core's two reads (a run, a page of runs): a field added to runs.Run and not to
// the store's queries fails here, on both engines. The values are made from each field's kind and
// name, so a new field is covered without a line here.
func TestEveryRunFieldSurvivesTheStore(t *testing.T) {
	s, now := newTestService(t)
	ctx := context.Background()
	p, pr := anonymousProject(t, s)
	d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "shape", Target: edgemodel.Target{Kind: "base_model", Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	key, err := s.IssueKey(ctx, pr, d.ID, "k")
	if err != nil {
		t.Fatal(err)
	}

	var in runs.Run
	v := reflect.ValueOf(&in).Elem()
	for i := range v.NumField() {
		f, ft := v.Field(i), v.Type().Field(i)
		switch {
		case ft.Type == reflect.TypeFor[time.Duration]():
			f.SetInt(int64(i+1) * int64(time.Millisecond))
		case ft.Type == reflect.TypeFor[time.Time]():
			f.Set(reflect.ValueOf(now.Add(time.Duration(i+1) * time.Hour).Truncate(time.Millisecond)))
		case ft.Type == reflect.TypeFor[runs.Transcript]():
			f.SetBytes([]byte(`{"field":"` + ft.Name + `"}`))
		case f.Kind() == reflect.String:
			f.SetString(ft.Name + "-value")
		case f.CanInt():
			f.SetInt(int64(i + 1))
		case f.Kind() == reflect.Bool:
			// UsageOnly: a run that keeps no transcript is not stored; false is what a stored run has.
		default:
			t.Fatalf("runs.Run.%s is a %s: give it a value here", ft.Name, ft.Type)
		}
	}
	in.ID = runs.NewID(now.Add(-time.Minute))
	in.DeploymentID, in.KeyID, in.Status = d.ID, key.Key.ID, "ok"
	in.CreatedAt = now.Add(-time.Minute).Truncate(time.Millisecond)

	rec := recorder.New(s.db, recorder.Options{})
	if !rec.Record(in) {
		t.Fatal("run not queued")
	}
	rec.Close()

	got, err := s.GetRun(ctx, pr, d.ID, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "GetRun", got.Run, in)
	page, err := s.ListRuns(ctx, pr, d.ID, RunFilter{}, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 {
		t.Fatalf("listed %d runs, want 1", len(page.Items))
	}
	summary := in
	summary.Request, summary.Response = nil, nil // a page lists runs without their bodies
	diff(t, "ListRuns", page.Items[0].Run, summary)
}

func diff(t *testing.T, where string, got, want runs.Run) {
	t.Helper()
	g, w := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := range g.NumField() {
		a, b := g.Field(i).Interface(), w.Field(i).Interface()
		if at, ok := a.(time.Time); ok {
			if !at.Equal(b.(time.Time)) {
				t.Errorf("%s: %s = %v, want %v", where, g.Type().Field(i).Name, a, b)
			}
			continue
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: %s = %v, want %v", where, g.Type().Field(i).Name, a, b)
		}
	}
}
