package api_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/handlers/api"
	"github.com/svcdev/svc/internal/core"
)

// catalog is a fixed catalog: the API tests are about rules, not runtimes.
type catalog []edgemodel.ModelInfo

func (c catalog) Model(id string) (edgemodel.ModelInfo, bool) {
	for _, m := range c {
		if m.ID == id {
			return m, true
		}
	}
	return edgemodel.ModelInfo{}, false
}
func (c catalog) Models() []edgemodel.ModelInfo { return c }

var testCatalog = catalog{
	{ID: "base-a", Public: true, Default: true, Runtime: "simulator", Simulated: true, Adapters: true},
	{ID: "base-b", Public: true, Runtime: "simulator", Simulated: true, Adapters: true},
	{ID: "base-nolora", Runtime: "openai"},
}

type env struct {
	t         *testing.T
	svc       *core.Service
	sqldb     *sql.DB
	dbPath    string
	url       string
	artifacts string // the server's artifacts folder
	echo      *echo.Echo
}

// newEnv serves the real router on loopback over a fresh SQLite file.
func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "svc.db")
	sqldb, err := db.OpenFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, sqldb, slog.New(slog.NewTextHandler(io.Discard, nil)))
	e.dbPath = path
	return e
}

// newEnvOn serves the real router on loopback over sqldb (of either engine), logging to log.
func newEnvOn(t *testing.T, sqldb *sql.DB, log *slog.Logger) *env {
	t.Helper()
	dir := t.TempDir()
	artifacts := filepath.Join(dir, "artifacts")
	if err := os.Mkdir(artifacts, 0o700); err != nil {
		t.Fatal(err)
	}
	svc := core.New(core.Options{DB: sqldb, Catalog: testCatalog, URLFor: func(s string) string { return "http://" + s + ".localhost:8080" }, ArtifactsDir: artifacts})
	e := echo.New()
	// The rule tests below create many endpoints with one anonymous identity; the anonymous cap has
	// its own tests, which set it back (anonymousEnv).
	svc.AnonymousEndpointLimit = 1000
	api.New(api.Options{Service: svc, Logger: log}).Register(e)
	srv := httptest.NewServer(e)
	t.Cleanup(func() { srv.Close(); sqldb.Close() })
	return &env{t: t, svc: svc, sqldb: sqldb, url: srv.URL, artifacts: artifacts, echo: e}
}

// user mints an anonymous identity and returns a client scoped to its project.
func (e *env) user() *cloudapi.Client {
	e.t.Helper()
	ctx := context.Background()
	tok, err := cloudapi.New(e.url, "").MintAnonymous(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	c := cloudapi.New(e.url, tok.Token)
	scope, err := c.AnonymousScope(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return c.WithProject(scope.OrgSlug, scope.ProjectSlug)
}

// member signs up a user (as `svc users add` would), gives it an org and a project named after the
// email, and returns a client with an access token scoped to that project.
func (e *env) member(email string) *cloudapi.Client {
	e.t.Helper()
	ctx := context.Background()
	id := must(e.svc.CreateUser(ctx, email, "correct horse battery"))
	token := must(e.svc.IssueToken(ctx, id, "access", time.Now().Add(time.Hour).UnixMilli()))
	c := cloudapi.New(e.url, token)
	org := strings.NewReplacer("@", "-", ".", "-").Replace(email)
	must(c.CreateOrg(ctx, org))
	must(c.CreateProject(ctx, org, "main"))
	return c.WithProject(org, "main")
}

// artifact writes a file that stands for an adapter artifact in the server's artifacts folder and
// returns its path.
func (e *env) artifact(name string) string {
	p := filepath.Join(e.artifacts, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("adapter"), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// completedJob registers a completed job with a final adapter and a checkpoint at step 100.
func (e *env) completedJob(c *cloudapi.Client) *cloudapi.Job {
	t := e.t
	final := "file://" + e.artifact(randomName("final"))
	job, err := c.CreateJob(context.Background(), cloudapi.CreateJobRequest{
		BaseModel: "base-a", Status: cloudapi.JobCompleted, FinalAdapter: &final,
		Checkpoints: []cloudapi.Checkpoint{{Step: 100, Artifact: e.artifact(randomName("step100"))}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return job
}

var names atomic.Int64

// randomName makes artifact names unique within a test.
func randomName(prefix string) string { return fmt.Sprintf("%s-%d", prefix, names.Add(1)) }

func base(slug string) cloudapi.CreateDeploymentRequest {
	return cloudapi.CreateDeploymentRequest{Slug: slug, Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "base-a"}}
}

// wantErr asserts an *cloudapi.Error with the given status and code.
func wantErr(t *testing.T, err error, status int, code string) {
	t.Helper()
	var e *cloudapi.Error
	if !errors.As(err, &e) {
		t.Fatalf("want HTTP %d %s, got %v", status, code, err)
	}
	if e.Status != status || e.Code != code {
		t.Fatalf("want HTTP %d %s, got HTTP %d %s: %s", status, code, e.Status, e.Code, e.Message)
	}
	if e.Message == "" {
		t.Fatalf("error %s has no message", code)
	}
}

// must unwraps a call that the test expects to succeed; a failure panics, which fails the test with
// the stack of the call.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestSlugRules(t *testing.T) {
	e := newEnv(t)
	c := e.user()
	ctx := context.Background()
	cases := []struct {
		slug   string
		status int
		code   string
	}{
		{"ab", 201, ""},
		{strings.Repeat("a", 50), 201, ""},
		{"my-model-2", 201, ""},
		{"a", 400, "invalid_slug"},
		{strings.Repeat("a", 51), 400, "invalid_slug"},
		{"", 400, "invalid_slug"},
		{"My-Model", 400, "invalid_slug"},
		{"-abc", 400, "invalid_slug"},
		{"abc-", 400, "invalid_slug"},
		{"ab_c", 400, "invalid_slug"},
		{"ab.c", 400, "invalid_slug"},
		{"ab c", 400, "invalid_slug"},
		{"www", 400, "reserved_slug"},
		{"api", 400, "reserved_slug"},
		{"app", 400, "reserved_slug"},
		{"admin", 400, "reserved_slug"},
		{"dashboard", 400, "reserved_slug"},
		{"docs", 400, "reserved_slug"},
		{"status", 400, "reserved_slug"},
	}
	for _, tc := range cases {
		t.Run(tc.slug, func(t *testing.T) {
			d, err := c.CreateDeployment(ctx, base(tc.slug))
			if tc.status == 201 {
				if err != nil {
					t.Fatal(err)
				}
				if d.Slug != tc.slug || d.URL != "http://"+tc.slug+".localhost:8080" {
					t.Fatalf("got slug %q url %q", d.Slug, d.URL)
				}
				return
			}
			wantErr(t, err, tc.status, tc.code)
		})
	}
}

func TestSlugIsGloballyUnique(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	alice, bob := e.user(), e.user()
	must(alice.CreateDeployment(ctx, base("shared-name")))
	_, err := bob.CreateDeployment(ctx, base("shared-name"))
	wantErr(t, err, 409, "slug_taken")
	_, err = alice.CreateDeployment(ctx, base("shared-name"))
	wantErr(t, err, 409, "slug_taken")
}

func TestDefaultsAtCreation(t *testing.T) {
	e := newEnv(t)
	d := must(e.member("ann@example.com").CreateDeployment(context.Background(), base("defaults")))
	if d.AuthMode != "fixed_api_key" || !d.Enabled || d.RunRetentionMode != "days" || d.RunRetentionDays != 7 || d.ExpiresAt != nil {
		t.Fatalf("defaults: %+v", d)
	}
	// What an anonymous identity creates expires after 7 days, whichever route created it.
	anon := must(e.user().CreateDeployment(context.Background(), base("anon-defaults")))
	if anon.ExpiresAt == nil || anon.ExpiresAt.Sub(anon.CreatedAt) != 7*24*time.Hour {
		t.Fatalf("anonymous endpoint expiresAt = %v, want createdAt + 7 days", anon.ExpiresAt)
	}
}

func TestRetentionRules(t *testing.T) {
	e := newEnv(t)
	c := e.user()
	ctx := context.Background()
	cases := []struct {
		name     string
		mode     string
		days     int
		wantMode string
		wantDays int
		code     string
	}{
		{"one day", "days", 1, "days", 1, ""},
		{"a year", "days", 365, "days", 365, ""},
		{"days without mode", "", 30, "days", 30, ""},
		{"unlimited", "unlimited", 0, "unlimited", 7, ""},
		{"none", "none", 0, "none", 7, ""},
		{"too many days", "days", 366, "", 0, "invalid_retention"},
		{"negative days", "days", -1, "", 0, "invalid_retention"},
		{"unknown mode", "forever", 0, "", 0, "invalid_retention"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := base("ret-" + string(rune('a'+i)) + "x")
			req.RunRetentionMode, req.RunRetentionDays = tc.mode, tc.days
			d, err := c.CreateDeployment(ctx, req)
			if tc.code != "" {
				wantErr(t, err, 400, tc.code)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.RunRetentionMode != tc.wantMode || d.RunRetentionDays != tc.wantDays {
				t.Fatalf("got %s/%d", d.RunRetentionMode, d.RunRetentionDays)
			}
		})
	}
	d := must(c.CreateDeployment(ctx, base("ret-update")))
	zero, big := 0, 400
	_, err := c.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{RunRetentionDays: &zero})
	wantErr(t, err, 400, "invalid_retention")
	_, err = c.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{RunRetentionDays: &big})
	wantErr(t, err, 400, "invalid_retention")
}

func TestTargetValidation(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c, other := e.user(), e.user()
	job := e.completedJob(c)
	foreign := e.completedJob(other)
	running := must(c.CreateJob(ctx, cloudapi.CreateJobRequest{BaseModel: "base-a", Checkpoints: []cloudapi.Checkpoint{{Step: 5, Artifact: filepath.Join(e.artifacts, "nonexistent", "adapter")}}}))
	unregistered := must(c.CreateJob(ctx, cloudapi.CreateJobRequest{BaseModel: "no-such-base", Status: "completed", FinalAdapter: ptr(e.artifact("x"))}))
	remote := must(c.CreateJob(ctx, cloudapi.CreateJobRequest{BaseModel: "base-b", Status: "completed", FinalAdapter: ptr("s3://bucket/adapter")}))

	cases := []struct {
		name   string
		target cloudapi.Target
		ok     bool
	}{
		{"final adapter", cloudapi.Target{Kind: "final_adapter", JobID: job.ID}, true},
		{"checkpoint", cloudapi.Target{Kind: "checkpoint", JobID: job.ID, Step: 100}, true},
		{"base model", cloudapi.Target{Kind: "base_model", Model: "base-b"}, true},
		{"multi model", cloudapi.Target{Kind: "multi_model"}, true},
		{"remote artifact taken as recorded", cloudapi.Target{Kind: "final_adapter", JobID: remote.ID}, true},
		{"job of another project", cloudapi.Target{Kind: "final_adapter", JobID: foreign.ID}, false},
		{"unknown job", cloudapi.Target{Kind: "final_adapter", JobID: "00000000-0000-4000-8000-000000000000"}, false},
		{"job without final adapter", cloudapi.Target{Kind: "final_adapter", JobID: running.ID}, false},
		{"checkpoint artifact missing on disk", cloudapi.Target{Kind: "checkpoint", JobID: running.ID, Step: 5}, false},
		{"no checkpoint at step", cloudapi.Target{Kind: "checkpoint", JobID: job.ID, Step: 7}, false},
		{"base model not registered", cloudapi.Target{Kind: "base_model", Model: "gpt-9"}, false},
		{"job base model not registered", cloudapi.Target{Kind: "final_adapter", JobID: unregistered.ID}, false},
		{"unknown kind", cloudapi.Target{Kind: "lora"}, false},
		{"missing job id", cloudapi.Target{Kind: "checkpoint", Step: 100}, false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			slug := "target-" + string(rune('a'+i)) + "x"
			d, err := c.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: slug, Target: tc.target})
			if !tc.ok {
				wantErr(t, err, 400, "invalid_target")
				// A rejected create reserves nothing.
				must(c.CreateDeployment(ctx, base(slug)))
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Target.Kind != tc.target.Kind || d.Target.JobID != tc.target.JobID || d.Target.Step != tc.target.Step || d.Target.Model != tc.target.Model {
				t.Fatalf("target %+v, want %+v", d.Target, tc.target)
			}
		})
	}
	if strings.Contains(errText(c.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "leak", Target: cloudapi.Target{Kind: "final_adapter", JobID: foreign.ID}})), "another") {
		t.Fatal("the error for a foreign job must read like the one for a missing job")
	}
}

func errText(_ *cloudapi.Deployment, err error) string { return err.Error() }

func ptr[T any](v T) *T { return &v }

func TestUpdateIsPartialAndRetargetsInPlace(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.user()
	job := e.completedJob(c)
	d := must(c.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "retarget", Target: cloudapi.Target{Kind: "final_adapter", JobID: job.ID}, AuthMode: "none", RunRetentionMode: "unlimited"}))

	up := must(c.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{Target: &cloudapi.Target{Kind: "checkpoint", JobID: job.ID, Step: 100}}))
	if up.ID != d.ID || up.Slug != d.Slug || up.URL != d.URL || up.AuthMode != "none" || up.RunRetentionMode != "unlimited" || !up.Enabled {
		t.Fatalf("a target update changed other fields: %+v", up)
	}
	if up.Target.Kind != "checkpoint" || up.Target.Step != 100 {
		t.Fatalf("target not updated: %+v", up.Target)
	}
	// The SDK's shorthand goes back to the final adapter of the same job.
	up = must(c.RetargetDeployment(ctx, d.ID, "final"))
	if up.Target.Kind != "final_adapter" || up.Target.JobID != job.ID {
		t.Fatalf("shorthand retarget: %+v", up.Target)
	}
	_, err := c.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{Target: &cloudapi.Target{Kind: "base_model", Model: "nope"}})
	wantErr(t, err, 400, "invalid_target")
	bad := "open"
	_, err = c.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{AuthMode: &bad})
	wantErr(t, err, 400, "invalid_request")
}

func TestDisableKeepsSlugAndConfiguration(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.user()
	d := must(c.CreateDeployment(ctx, base("keeper")))
	off := false
	up := must(c.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{Enabled: &off}))
	if up.Enabled || up.Slug != "keeper" || up.URL != d.URL || up.Target != d.Target || up.AuthMode != d.AuthMode {
		t.Fatalf("disable changed more than enabled: %+v", up)
	}
	_, err := e.user().CreateDeployment(ctx, base("keeper"))
	wantErr(t, err, 409, "slug_taken")
	on := true
	if up = must(c.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{Enabled: &on})); !up.Enabled || up.URL != d.URL {
		t.Fatalf("enable: %+v", up)
	}
}

func TestDeleteFreesSlugAndRemovesKeys(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.user()
	d := must(c.CreateDeployment(ctx, base("short-lived")))
	must(c.IssueDeploymentKey(ctx, d.ID, "ci"))
	if err := c.DeleteDeployment(ctx, d.ID); err != nil {
		t.Fatal(err)
	}
	_, err := c.GetDeployment(ctx, d.ID)
	wantErr(t, err, 404, "not_found")
	_, err = c.ListDeploymentKeys(ctx, d.ID)
	wantErr(t, err, 404, "not_found")
	var keys int
	if err := e.sqldb.QueryRow("SELECT count(*) FROM api_keys WHERE deployment_id = ?", d.ID).Scan(&keys); err != nil || keys != 0 {
		t.Fatalf("keys left after delete: %d (%v)", keys, err)
	}
	must(c.CreateDeployment(ctx, base("short-lived")))
}

func TestDeleteWithLargeHistoryReservesSlugUntilSwept(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.user()
	e.svc.DrainThreshold = 3
	d := must(c.CreateDeployment(ctx, base("big-history")))
	for i := 0; i < 5; i++ {
		_, err := e.sqldb.Exec(`INSERT INTO runs (id, deployment_id, model, status, latency_ms, prompt_tokens, completion_tokens, created_at, request, response)
			VALUES (?, ?, 'base-a', 'ok', 1, 1, 1, ?, '{}', '{}')`, "run_"+string(rune('a'+i)), d.ID, i+1)
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := c.DeleteDeployment(ctx, d.ID); err != nil {
		t.Fatal(err)
	}
	_, err := c.GetDeployment(ctx, d.ID)
	wantErr(t, err, 404, "not_found")
	if list := must(c.ListDeployments(ctx)); len(list) != 0 {
		t.Fatalf("deleted deployment still listed: %+v", list)
	}
	_, err = c.CreateDeployment(ctx, base("big-history"))
	wantErr(t, err, 409, "slug_taken")

	if err := e.svc.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	var runs int
	if err := e.sqldb.QueryRow("SELECT count(*) FROM runs").Scan(&runs); err != nil || runs != 0 {
		t.Fatalf("runs left after sweep: %d (%v)", runs, err)
	}
	must(c.CreateDeployment(ctx, base("big-history")))
}

func TestKeyLabelRules(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.user()
	d := must(c.CreateDeployment(ctx, base("labels")))
	cases := []struct {
		label string
		code  string
	}{
		{"a", ""},
		{strings.Repeat("x", 80), ""},
		{strings.Repeat("é", 80), ""},
		{"", "invalid_label"},
		{"   ", "invalid_label"},
		{strings.Repeat("x", 81), "invalid_label"},
		{"tab\there", "invalid_label"},
	}
	for _, tc := range cases {
		_, err := c.IssueDeploymentKey(ctx, d.ID, tc.label)
		if tc.code == "" {
			if err != nil {
				t.Fatalf("label %q: %v", tc.label, err)
			}
			continue
		}
		wantErr(t, err, 400, tc.code)
	}
	first := must(c.IssueDeploymentKey(ctx, d.ID, "prod"))
	_, err := c.IssueDeploymentKey(ctx, d.ID, "prod")
	wantErr(t, err, 409, "label_taken")
	// Labels are unique among enabled keys only: revoking frees the label.
	must(c.RevokeDeploymentKey(ctx, d.ID, first.Key.ID))
	must(c.IssueDeploymentKey(ctx, d.ID, "prod"))
	// The same label on another endpoint is fine.
	other := must(c.CreateDeployment(ctx, base("labels-2")))
	must(c.IssueDeploymentKey(ctx, other.ID, "prod"))
}

func TestAtMostTwentyEnabledKeys(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.user()
	d := must(c.CreateDeployment(ctx, base("many-keys")))
	var first *cloudapi.IssuedKey
	for i := 0; i < core.MaxEnabledKeys; i++ {
		k := must(c.IssueDeploymentKey(ctx, d.ID, "key "+string(rune('A'+i))))
		if first == nil {
			first = k
		}
	}
	_, err := c.IssueDeploymentKey(ctx, d.ID, "one too many")
	wantErr(t, err, 409, "key_limit")
	must(c.RevokeDeploymentKey(ctx, d.ID, first.Key.ID))
	must(c.IssueDeploymentKey(ctx, d.ID, "one too many"))
}

func TestKeyPlaintextOnlyOnceAndStoredHashed(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.user()
	d := must(c.CreateDeployment(ctx, base("secret")))
	issued := must(c.IssueDeploymentKey(ctx, d.ID, "laptop"))
	if !strings.HasPrefix(issued.Plaintext, core.KeyPrefix) || len(issued.Plaintext) < 40 {
		t.Fatalf("plaintext %q is not a full key", issued.Plaintext)
	}
	if issued.Key.Prefix != issued.Plaintext[:12] || !issued.Key.Enabled || issued.Key.LastUsedAt != nil {
		t.Fatalf("key: %+v", issued.Key)
	}
	keys := must(c.ListDeploymentKeys(ctx, d.ID))
	if len(keys) != 1 || keys[0].ID != issued.Key.ID || keys[0].Prefix != issued.Key.Prefix {
		t.Fatalf("list: %+v", keys)
	}
	// No route returns the plaintext again, and the database file never contains it.
	for _, path := range []string{"", "/" + d.ID, "/" + d.ID + "/keys"} {
		req, _ := http.NewRequest("GET", e.url+"/v1/orgs/"+c.OrgSlug+"/projects/"+c.ProjectSlug+"/deployments"+path, nil)
		req.Header.Set("Authorization", "Bearer "+c.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		resp.Body.Close()
		if strings.Contains(buf.String(), issued.Plaintext[12:]) {
			t.Fatalf("GET %s returned the key plaintext", path)
		}
	}
	e.sqldb.Exec("PRAGMA wal_checkpoint(FULL)")
	for _, f := range []string{e.dbPath, e.dbPath + "-wal"} {
		raw, _ := os.ReadFile(f)
		if bytes.Contains(raw, []byte(issued.Plaintext[12:])) {
			t.Fatalf("%s contains the key plaintext", filepath.Base(f))
		}
		if bytes.Contains(raw, []byte(c.Token)) {
			t.Fatalf("%s contains the bearer token", filepath.Base(f))
		}
	}
}

func TestRevokeSetsEnabledFalse(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.user()
	d := must(c.CreateDeployment(ctx, base("revoker")))
	k := must(c.IssueDeploymentKey(ctx, d.ID, "temp"))
	r := must(c.RevokeDeploymentKey(ctx, d.ID, k.Key.ID))
	if r.Enabled || r.RevokedAt == nil {
		t.Fatalf("revoked key: %+v", r)
	}
	keys := must(c.ListDeploymentKeys(ctx, d.ID))
	if len(keys) != 1 || keys[0].Enabled {
		t.Fatalf("list after revoke: %+v", keys)
	}
	// A key id under the wrong deployment is not found, and is left alone.
	other := must(c.CreateDeployment(ctx, base("revoker-2")))
	k2 := must(c.IssueDeploymentKey(ctx, other.ID, "keep"))
	_, err := c.RevokeDeploymentKey(ctx, d.ID, k2.Key.ID)
	wantErr(t, err, 404, "not_found")
	if keys := must(c.ListDeploymentKeys(ctx, other.ID)); !keys[0].Enabled {
		t.Fatal("revoke through another deployment disabled the key")
	}
}

func TestAuthModeSwitchNeverRevokesKeys(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.user()
	d := must(c.CreateDeployment(ctx, base("switcher")))
	must(c.IssueDeploymentKey(ctx, d.ID, "a"))
	must(c.IssueDeploymentKey(ctx, d.ID, "b"))
	none, fixed := "none", "fixed_api_key"
	if up := must(c.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{AuthMode: &none})); up.AuthMode != "none" {
		t.Fatalf("auth mode: %s", up.AuthMode)
	}
	_, err := c.IssueDeploymentKey(ctx, d.ID, "c")
	wantErr(t, err, 409, "auth_mode")
	must(c.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{AuthMode: &fixed}))
	keys := must(c.ListDeploymentKeys(ctx, d.ID))
	if len(keys) != 2 || !keys[0].Enabled || !keys[1].Enabled {
		t.Fatalf("keys after switching back: %+v", keys)
	}
}

func TestProjectsAreIsolated(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	alice, mallory := e.user(), e.user()
	d := must(alice.CreateDeployment(ctx, base("private")))
	k := must(alice.IssueDeploymentKey(ctx, d.ID, "k"))
	job := e.completedJob(alice)

	_, err := mallory.GetDeployment(ctx, d.ID)
	wantErr(t, err, 404, "not_found")
	off := false
	_, err = mallory.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{Enabled: &off})
	wantErr(t, err, 404, "not_found")
	wantErr(t, mallory.DeleteDeployment(ctx, d.ID), 404, "not_found")
	_, err = mallory.ListDeploymentKeys(ctx, d.ID)
	wantErr(t, err, 404, "not_found")
	_, err = mallory.RevokeDeploymentKey(ctx, d.ID, k.Key.ID)
	wantErr(t, err, 404, "not_found")
	_, err = mallory.GetJob(ctx, job.ID)
	wantErr(t, err, 404, "not_found")
	res := must(mallory.BulkDeployments(ctx, cloudapi.BulkRequest{IDs: []string{d.ID}, Action: "delete"}))
	if res[0].OK {
		t.Fatal("bulk delete of another project's deployment succeeded")
	}
	// Mallory's token on Alice's project path: 404, not 403.
	_, err = mallory.WithProject(alice.OrgSlug, alice.ProjectSlug).ListDeployments(ctx)
	wantErr(t, err, 404, "not_found")
	if got := must(alice.GetDeployment(ctx, d.ID)); !got.Enabled {
		t.Fatal("alice's deployment was changed")
	}
}

func TestAuthentication(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, err := cloudapi.New(e.url, "").Me(ctx)
	wantErr(t, err, 401, "unauthorized")
	_, err = cloudapi.New(e.url, "svc_at_forged").Me(ctx)
	wantErr(t, err, 401, "unauthorized")
	c := e.user()
	me := must(c.Me(ctx))
	if me.Identity.Kind != "anonymous" || len(me.Orgs) != 1 || me.Orgs[0].Slug != c.OrgSlug || me.Orgs[0].Projects[0].Slug != c.ProjectSlug {
		t.Fatalf("me: %+v", me)
	}
	// The anonymous scope is created once and returned the same afterwards.
	again := must(c.AnonymousScope(ctx))
	if again.OrgSlug != c.OrgSlug || again.ProjectSlug != c.ProjectSlug || again.ProjectID != me.Orgs[0].Projects[0].ID {
		t.Fatalf("second scope call: %+v", again)
	}
}

func TestModelsAndJobs(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.user()
	models := must(c.ListModels(ctx))
	if len(models) != 3 || models[0].ID != "base-a" || !models[0].Default {
		t.Fatalf("models: %+v", models)
	}
	job := must(c.CreateJob(ctx, cloudapi.CreateJobRequest{BaseModel: "base-a"}))
	if job.Status != "running" || len(job.Checkpoints) != 0 || job.FinalAdapter != nil {
		t.Fatalf("new job: %+v", job)
	}
	done := "completed"
	upd := must(c.UpdateJob(ctx, job.ID, cloudapi.UpdateJobRequest{Status: &done, FinalAdapter: ptr("hf://org/adapter"), Checkpoints: []cloudapi.Checkpoint{{Step: 10, Artifact: "s3://b/10"}, {Step: 20, Artifact: "s3://b/20"}}}))
	if upd.Status != "completed" || *upd.FinalAdapter != "hf://org/adapter" || len(upd.Checkpoints) != 2 {
		t.Fatalf("updated job: %+v", upd)
	}
	if list := must(c.ListJobs(ctx)); len(list) != 1 || list[0].ID != job.ID {
		t.Fatalf("jobs: %+v", list)
	}
	bad := "paused"
	_, err := c.UpdateJob(ctx, job.ID, cloudapi.UpdateJobRequest{Status: &bad})
	wantErr(t, err, 400, "invalid_request")
	_, err = c.CreateJob(ctx, cloudapi.CreateJobRequest{ID: "not-a-uuid", BaseModel: "base-a"})
	wantErr(t, err, 400, "invalid_request")
}

func TestBulk(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.user()
	a := must(c.CreateDeployment(ctx, base("bulk-a")))
	b := must(c.CreateDeployment(ctx, base("bulk-b")))
	res := must(c.BulkDeployments(ctx, cloudapi.BulkRequest{IDs: []string{a.ID, "dep_missing", b.ID}, Action: "disable"}))
	if len(res) != 3 || !res[0].OK || res[1].OK || res[1].Error.Code != "not_found" || !res[2].OK {
		t.Fatalf("bulk results: %+v", res)
	}
	for _, d := range must(c.ListDeployments(ctx)) {
		if d.Enabled {
			t.Fatalf("%s still enabled", d.Slug)
		}
	}
	_, err := c.BulkDeployments(ctx, cloudapi.BulkRequest{IDs: []string{a.ID}, Action: "explode"})
	wantErr(t, err, 400, "invalid_request")
	must(c.BulkDeployments(ctx, cloudapi.BulkRequest{IDs: []string{a.ID, b.ID}, Action: "delete"}))
	if list := must(c.ListDeployments(ctx)); len(list) != 0 {
		t.Fatalf("after bulk delete: %+v", list)
	}
}

func TestOneClick(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.user()
	e.svc.AnonymousEndpointLimit = 2
	d := must(c.OneClick(ctx))
	if d.Target.Kind != "multi_model" || d.ExpiresAt == nil || d.ExpiresAt.Sub(d.CreatedAt).Hours() != 7*24 {
		t.Fatalf("one-click: %+v", d)
	}
	must(c.OneClick(ctx))
	_, err := c.OneClick(ctx)
	wantErr(t, err, 403, "anonymous_limit")
}

func TestBadRequests(t *testing.T) {
	e := newEnv(t)
	c := e.user()
	path := e.url + "/v1/orgs/" + c.OrgSlug + "/projects/" + c.ProjectSlug + "/deployments"
	cases := []struct {
		name, method, body string
		status             int
		code               string
	}{
		{"malformed json", "POST", `{"slug": "x",`, 400, "invalid_request"},
		{"wrong type", "POST", `{"slug": 12}`, 400, "invalid_request"},
		{"unknown field", "POST", `{"slug": "abc", "target": {"kind": "multi_model"}, "enabeld": true}`, 400, "invalid_request"},
		{"too large", "POST", `{"slug": "` + strings.Repeat("a", 2<<20) + `"}`, 413, "body_too_large"},
		{"wrong method", "PUT", `{}`, 405, "method_not_allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, path, strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+c.Token)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var buf bytes.Buffer
			buf.ReadFrom(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(buf.String(), `"code":"`+tc.code+`"`) {
				t.Fatalf("got %d %s", resp.StatusCode, buf.String())
			}
		})
	}
	// Nothing was created by the rejected requests.
	if list := must(c.ListDeployments(context.Background())); len(list) != 0 {
		t.Fatalf("rejected requests created %+v", list)
	}
}
