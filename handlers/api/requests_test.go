package api_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svcdev/svc/cloudapi"
)

// send posts a raw body to a project route and returns the status and the error envelope.
func (e *env) send(c *cloudapi.Client, method, route, body string) (int, cloudapi.ErrorBody) {
	e.t.Helper()
	req, _ := http.NewRequest(method, e.url+"/v1/orgs/"+c.OrgSlug+"/projects/"+c.ProjectSlug+route, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Error cloudapi.ErrorBody `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&env)
	return resp.StatusCode, env.Error
}

func TestBodiesAreReadStrictly(t *testing.T) {
	e := newEnv(t)
	c := e.user()
	ctx := context.Background()
	d := must(c.CreateDeployment(ctx, base("strict")))
	cases := []struct {
		name, method, route, body string
		code, field               string
	}{
		{"duplicate key cannot open an endpoint", "POST", "/deployments",
			`{"slug":"dup","target":{"kind":"multi_model"},"authMode":"fixed_api_key","authMode":"none"}`, "invalid_request", "authMode"},
		{"duplicate key in another case", "POST", "/deployments",
			`{"slug":"dup","target":{"kind":"multi_model"},"authMode":"fixed_api_key","AuthMode":"none"}`, "invalid_request", "AuthMode"},
		{"duplicate nested key", "POST", "/deployments",
			`{"slug":"dup","target":{"kind":"multi_model","kind":"base_model"}}`, "invalid_request", "target.kind"},
		{"trailing data", "POST", "/deployments", `{"slug":"dup","target":{"kind":"multi_model"}} {"slug":"x"}`, "invalid_request", ""},
		{"wrong type names the field", "POST", "/deployments", `{"slug":"dup","target":{"kind":"checkpoint","step":"5"}}`, "invalid_request", "target.step"},
		{"null is not absent", "POST", "/deployments", `{"slug":"dup","target":{"kind":"multi_model"},"runRetentionDays":null}`, "invalid_request", "runRetentionDays"},
		{"zero retention days at create", "POST", "/deployments", `{"slug":"dup","target":{"kind":"multi_model"},"runRetentionDays":0}`, "invalid_retention", ""},
		{"empty retention mode at create", "POST", "/deployments", `{"slug":"dup","target":{"kind":"multi_model"},"runRetentionMode":""}`, "invalid_retention", ""},
		{"empty auth mode at create", "POST", "/deployments", `{"slug":"dup","target":{"kind":"multi_model"},"authMode":""}`, "invalid_request", ""},
		{"zero retention days in an update", "PATCH", "/deployments/" + d.ID, `{"runRetentionDays":0}`, "invalid_retention", ""},
		{"duplicate key in an update", "PATCH", "/deployments/" + d.ID, `{"enabled":true,"enabled":false}`, "invalid_request", "enabled"},
		{"null in a job", "POST", "/jobs", `{"baseModel":"base-a","finalAdapter":null}`, "invalid_request", "finalAdapter"},
		{"not an object", "POST", "/jobs", `["base-a"]`, "invalid_request", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := e.send(c, tc.method, tc.route, tc.body)
			if status != 400 || body.Code != tc.code {
				t.Fatalf("got %d %s (%s), want 400 %s", status, body.Code, body.Message, tc.code)
			}
			if tc.field != "" && !strings.Contains(body.Message, `"`+tc.field+`"`) {
				t.Fatalf("message %q does not name the field %q", body.Message, tc.field)
			}
		})
	}
	if list := must(c.ListDeployments(ctx)); len(list) != 1 {
		t.Fatalf("refused bodies created endpoints: %d listed", len(list))
	}
	if got := must(c.GetDeployment(ctx, d.ID)); !got.Enabled || got.RunRetentionDays != 7 {
		t.Fatalf("refused updates changed the endpoint: %+v", got)
	}
}

func TestAdapterTargetsNeedAModelThatServesAdapters(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.user()
	final := e.artifact("nolora-final")
	job := must(c.CreateJob(ctx, cloudapi.CreateJobRequest{BaseModel: "base-nolora", Status: cloudapi.JobCompleted, FinalAdapter: &final,
		Checkpoints: []cloudapi.Checkpoint{{Step: 1, Artifact: final}}}))
	_, err := c.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "nolora", Target: cloudapi.Target{Kind: "final_adapter", JobID: job.ID}})
	wantErr(t, err, 400, "invalid_target")
	_, err = c.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "nolora", Target: cloudapi.Target{Kind: "checkpoint", JobID: job.ID, Step: 1}})
	wantErr(t, err, 400, "invalid_target")
	// The same rule holds for a re-target, and the base model itself stays deployable.
	d := must(c.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "nolora", Target: cloudapi.Target{Kind: "base_model", Model: "base-nolora"}}))
	_, err = c.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{Target: &cloudapi.Target{Kind: "final_adapter", JobID: job.ID}})
	wantErr(t, err, 400, "invalid_target")
}

func TestLocalArtifactsMustBeInTheArtifactsFolder(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.user()
	// Registering an artifact outside the folder, or one that climbs out of it, is refused without
	// looking at the disk.
	for _, a := range []string{"/etc/passwd", "file:///etc/passwd", "../x", "sub/../../x", "file://relative/x", filepath.Join(e.artifacts, "..", "x")} {
		_, err := c.CreateJob(ctx, cloudapi.CreateJobRequest{BaseModel: "base-a", Status: cloudapi.JobCompleted, FinalAdapter: &a})
		wantErr(t, err, 400, "invalid_request")
	}
	// Inside the folder: a path relative to it, an absolute path or a file:// URI.
	e.artifact("adapters/ok")
	for i, a := range []string{"adapters/ok", filepath.Join(e.artifacts, "adapters/ok"), "file://" + filepath.Join(e.artifacts, "adapters/ok")} {
		job := must(c.CreateJob(ctx, cloudapi.CreateJobRequest{BaseModel: "base-a", Status: cloudapi.JobCompleted, FinalAdapter: &a}))
		must(c.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: fmt.Sprintf("inside-%d", i), Target: cloudapi.Target{Kind: "final_adapter", JobID: job.ID}}))
	}

	// A job recorded before the rule (or by hand) that names a file outside the folder, a symbolic link
	// inside the folder that leads out of it, and a file that does not exist: one and the same answer,
	// so that deploying tells nothing about the server's files.
	if err := os.Symlink("/etc/passwd", filepath.Join(e.artifacts, "link")); err != nil {
		t.Fatal(err)
	}
	messages := map[string]string{}
	for name, a := range map[string]string{"outside": "/etc/passwd", "climbing": "../../../../etc/passwd", "symlink": "link", "missing": "no-such-file"} {
		job := must(c.CreateJob(ctx, cloudapi.CreateJobRequest{BaseModel: "base-a", Status: cloudapi.JobCompleted, FinalAdapter: ptr("s3://placeholder")}))
		if _, err := e.sqldb.Exec(`UPDATE jobs SET final_adapter = ? WHERE id = ?`, a, job.ID); err != nil {
			t.Fatal(err)
		}
		_, err := c.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "probe-" + name, Target: cloudapi.Target{Kind: "final_adapter", JobID: job.ID}})
		wantErr(t, err, 400, "invalid_target")
		messages[name] = strings.Replace(err.(*cloudapi.Error).Message, a, "<artifact>", 1)
	}
	for name, m := range messages {
		if m != messages["missing"] {
			t.Errorf("%s artifact: %q differs from a missing file's %q", name, m, messages["missing"])
		}
	}
}

func TestListsPageAndFollowEveryPage(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.user()
	for i := 0; i < 7; i++ {
		must(c.CreateDeployment(ctx, base(fmt.Sprintf("page-%d", i))))
		must(c.CreateJob(ctx, cloudapi.CreateJobRequest{BaseModel: "base-a"}))
	}
	seen := map[string]bool{}
	opts := cloudapi.ListOptions{Limit: 3}
	var sizes []int
	for {
		page := must(c.ListDeploymentsPage(ctx, opts))
		sizes = append(sizes, len(page.Deployments))
		for _, d := range page.Deployments {
			if seen[d.ID] {
				t.Fatalf("%s listed twice", d.Slug)
			}
			seen[d.ID] = true
		}
		if opts.Cursor = page.NextCursor; opts.Cursor == "" {
			break
		}
	}
	if fmt.Sprint(sizes) != "[3 3 1]" || len(seen) != 7 {
		t.Fatalf("pages of %v, %d deployments", sizes, len(seen))
	}
	jobs := must(c.ListJobsPage(ctx, cloudapi.ListOptions{Limit: 5}))
	if len(jobs.Jobs) != 5 || jobs.NextCursor == "" {
		t.Fatalf("first job page: %d jobs, cursor %q", len(jobs.Jobs), jobs.NextCursor)
	}
	if all := must(c.ListJobs(ctx)); len(all) != 7 {
		t.Fatalf("ListJobs followed the pages to %d jobs, want 7", len(all))
	}
	if all := must(c.ListDeployments(ctx)); len(all) != 7 {
		t.Fatalf("ListDeployments followed the pages to %d, want 7", len(all))
	}
	for _, q := range []string{"?limit=501", "?limit=0", "?limit=x", "?cursor=bogus"} {
		if status, body := e.send(c, "GET", "/deployments"+q, ""); status != 400 || body.Code != "invalid_request" {
			t.Errorf("GET deployments%s: %d %s", q, status, body.Code)
		}
	}
}

func TestJSONAnswersAreCompressedWhenAsked(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.user()
	for i := 0; i < 20; i++ {
		must(c.CreateDeployment(ctx, base(fmt.Sprintf("gz-%d", i))))
	}
	get := func(acceptGzip bool) (*http.Response, []byte) {
		req, _ := http.NewRequest("GET", e.url+"/v1/orgs/"+c.OrgSlug+"/projects/"+c.ProjectSlug+"/deployments", nil)
		req.Header.Set("Authorization", "Bearer "+c.Token)
		if acceptGzip {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		// A transport that does not add or undo gzip by itself, to see what the server sent.
		resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	plain, plainBody := get(false)
	if plain.Header.Get("Content-Encoding") != "" || !json.Valid(plainBody) {
		t.Fatalf("without Accept-Encoding: %q encoding", plain.Header.Get("Content-Encoding"))
	}
	zipped, zippedBody := get(true)
	if zipped.Header.Get("Content-Encoding") != "gzip" || len(zippedBody) >= len(plainBody)/2 {
		t.Fatalf("with Accept-Encoding gzip: %q encoding, %d bytes (plain %d)", zipped.Header.Get("Content-Encoding"), len(zippedBody), len(plainBody))
	}
	zr, err := gzip.NewReader(strings.NewReader(string(zippedBody)))
	if err != nil {
		t.Fatal(err)
	}
	unzipped, _ := io.ReadAll(zr)
	if string(unzipped) != string(plainBody) {
		t.Fatal("the gzipped answer differs from the plain one")
	}
}
