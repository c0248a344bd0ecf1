package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/svcdev/svc/cloudapi"
)

func limitText(p *int) string {
	if p == nil {
		return "unlimited"
	}
	b, _ := json.Marshal(*p)
	return string(b)
}

func TestDeploymentLimits(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.user()
	d := must(c.CreateDeployment(ctx, base("limits-dep")))
	if d.Limits.RequestsPerMinute != nil || d.Limits.TokensPerMinute != nil {
		t.Fatalf("a new deployment is unlimited, got %+v", d.Limits)
	}
	set := func(u cloudapi.LimitsUpdate) (*cloudapi.Deployment, error) {
		return c.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{Limits: u})
	}
	got := must(set(cloudapi.LimitsUpdate{RequestsPerMinute: cloudapi.LimitTo(60), TokensPerMinute: cloudapi.LimitTo(10_000)}))
	if limitText(got.Limits.RequestsPerMinute) != "60" || limitText(got.Limits.TokensPerMinute) != "10000" {
		t.Fatalf("set both: %+v", got.Limits)
	}
	// Absent fields stay: another setting alone, or one limit alone, leaves the rest.
	off := false
	got = must(c.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{Enabled: &off}))
	if limitText(got.Limits.RequestsPerMinute) != "60" {
		t.Fatalf("disabling changed the limits: %+v", got.Limits)
	}
	got = must(set(cloudapi.LimitsUpdate{TokensPerMinute: cloudapi.NoLimit()}))
	if limitText(got.Limits.RequestsPerMinute) != "60" || got.Limits.TokensPerMinute != nil {
		t.Fatalf("clear tokens only: %+v", got.Limits)
	}
	// A read returns what was written.
	got = must(c.GetDeployment(ctx, d.ID))
	if limitText(got.Limits.RequestsPerMinute) != "60" || got.Limits.TokensPerMinute != nil {
		t.Fatalf("read back: %+v", got.Limits)
	}

	for _, bad := range []struct {
		u     cloudapi.LimitsUpdate
		field string
	}{
		{cloudapi.LimitsUpdate{RequestsPerMinute: cloudapi.LimitTo(0)}, "requestsPerMinute"},
		{cloudapi.LimitsUpdate{TokensPerMinute: cloudapi.LimitTo(-1)}, "tokensPerMinute"},
		{cloudapi.LimitsUpdate{RequestsPerMinute: cloudapi.LimitTo(5), TokensPerMinute: cloudapi.LimitTo(0)}, "tokensPerMinute"},
	} {
		_, err := set(bad.u)
		wantErr(t, err, 400, "invalid_request")
		if !strings.Contains(err.Error(), "limits."+bad.field) {
			t.Errorf("the error does not name limits.%s: %v", bad.field, err)
		}
	}
	got = must(c.GetDeployment(ctx, d.ID))
	if limitText(got.Limits.RequestsPerMinute) != "60" {
		t.Fatalf("a refused update changed the limits: %+v", got.Limits)
	}

	// {"limits": null} in a raw body clears both; a string or an unknown field is a 400 naming it.
	for body, want := range map[string]string{
		`{"limits": {"requestsPerMinute": "60"}}`: `field \"limits.requestsPerMinute\" must be a whole number, or null`,
		`{"limits": {"requestsPerMinute": 1.5}}`:  `field \"limits.requestsPerMinute\" must be a whole number`,
		`{"limits": {"rpm": 60}}`:                 `field \"limits.rpm\" is not a field`,
		`{"limits": 60}`:                          `field \"limits\" must be an object`,
		`{"runRetentionDays": null}`:              `field \"runRetentionDays\" must not be null`,
	} {
		status, out := e.raw(c, http.MethodPatch, "/deployments/"+d.ID, body)
		if status != 400 || !strings.Contains(out, want) || !strings.Contains(out, `"invalid_request"`) {
			t.Errorf("%s: HTTP %d %s", body, status, out)
		}
	}
	if status, out := e.raw(c, http.MethodPatch, "/deployments/"+d.ID, `{"limits": null}`); status != 200 ||
		!strings.Contains(out, `"limits":{"requestsPerMinute":null,"tokensPerMinute":null}`) {
		t.Fatalf("limits null: HTTP %d %s", status, out)
	}

	// Another project cannot read or change them: 404, as for everything of a foreign project.
	_, err := e.user().UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{Limits: cloudapi.ClearLimits()})
	wantErr(t, err, 404, "not_found")
}

func TestKeyLimits(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.user()
	d := must(c.CreateDeployment(ctx, base("limits-key")))
	k := must(c.IssueDeploymentKey(ctx, d.ID, "ci"))
	other := must(c.IssueDeploymentKey(ctx, d.ID, "other"))
	if k.Key.Limits.RequestsPerMinute != nil || k.Key.Limits.TokensPerMinute != nil {
		t.Fatalf("a new key is unlimited, got %+v", k.Key.Limits)
	}
	set := func(u cloudapi.LimitsUpdate) (*cloudapi.Key, error) {
		return c.UpdateDeploymentKey(ctx, d.ID, k.Key.ID, cloudapi.UpdateKeyRequest{Limits: u})
	}
	got := must(set(cloudapi.LimitsUpdate{RequestsPerMinute: cloudapi.LimitTo(10)}))
	if got.ID != k.Key.ID || got.Label != "ci" || limitText(got.Limits.RequestsPerMinute) != "10" || got.Limits.TokensPerMinute != nil {
		t.Fatalf("set rpm: %+v", got)
	}
	got = must(set(cloudapi.LimitsUpdate{TokensPerMinute: cloudapi.LimitTo(2000)}))
	if limitText(got.Limits.RequestsPerMinute) != "10" || limitText(got.Limits.TokensPerMinute) != "2000" {
		t.Fatalf("set tpm, rpm unchanged: %+v", got.Limits)
	}
	// The listing shows each key's own limits.
	for _, key := range must(c.ListDeploymentKeys(ctx, d.ID)) {
		want := "2000"
		if key.ID == other.Key.ID {
			want = "unlimited"
		}
		if limitText(key.Limits.TokensPerMinute) != want {
			t.Errorf("key %s lists tpm %s, want %s", key.Label, limitText(key.Limits.TokensPerMinute), want)
		}
	}
	_, err := set(cloudapi.LimitsUpdate{RequestsPerMinute: cloudapi.LimitTo(0)})
	wantErr(t, err, 400, "invalid_request")
	if !strings.Contains(err.Error(), "limits.requestsPerMinute") {
		t.Errorf("the error does not name the field: %v", err)
	}
	got = must(set(cloudapi.ClearLimits()))
	if got.Limits.RequestsPerMinute != nil || got.Limits.TokensPerMinute != nil {
		t.Fatalf("cleared: %+v", got.Limits)
	}
	// An empty update changes nothing and returns the key.
	if got = must(c.UpdateDeploymentKey(ctx, d.ID, k.Key.ID, cloudapi.UpdateKeyRequest{})); got.ID != k.Key.ID {
		t.Fatalf("empty update: %+v", got)
	}

	// A key is found only under its own deployment and project.
	d2 := must(c.CreateDeployment(ctx, base("limits-key-2")))
	_, err = c.UpdateDeploymentKey(ctx, d2.ID, k.Key.ID, cloudapi.UpdateKeyRequest{Limits: cloudapi.ClearLimits()})
	wantErr(t, err, 404, "not_found")
	_, err = c.UpdateDeploymentKey(ctx, d.ID, "key_nope", cloudapi.UpdateKeyRequest{Limits: cloudapi.ClearLimits()})
	wantErr(t, err, 404, "not_found")
	_, err = e.user().UpdateDeploymentKey(ctx, d.ID, k.Key.ID, cloudapi.UpdateKeyRequest{Limits: cloudapi.ClearLimits()})
	wantErr(t, err, 404, "not_found")
}

// raw sends a body as written to P<path> with c's token and scope, for what the SDK cannot express.
func (e *env) raw(c *cloudapi.Client, method, path, body string) (int, string) {
	e.t.Helper()
	u := e.url + "/v1/orgs/" + c.OrgSlug + "/projects/" + c.ProjectSlug + path
	req, err := http.NewRequest(method, u, bytes.NewReader([]byte(body)))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// rawURL sends a body as written to path (from the base URL, query included) with c's token.
func (e *env) rawURL(c *cloudapi.Client, method, path, body string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, bytes.NewReader([]byte(body)))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
