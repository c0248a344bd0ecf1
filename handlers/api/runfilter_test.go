package api_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
)

// The run listing's filters reach core through the SDK's options; a value core does not know, a time
// that is not RFC 3339 and a parameter the listing does not take are 400 invalid_request, saying what
// it takes.
func TestRunListFilterParameters(t *testing.T) {
	e := newEnv(t)
	c := e.user()
	ctx := context.Background()
	d := must(c.CreateDeployment(ctx, base("filtered")))
	page, err := c.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{Status: "error", KeyID: "key_x", Arm: cloudapi.ArmShadow,
		Since: time.Now().Add(-time.Hour), Until: time.Now()})
	if err != nil || len(page.Runs) != 0 {
		t.Fatalf("filtered listing: %+v, %v", page, err)
	}
	if _, err := c.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{Status: "refused"}); err != nil {
		t.Fatalf("status=refused: %v", err)
	}
	_, err = c.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{Status: "declined"})
	wantErr(t, err, http.StatusBadRequest, "invalid_request")
	if !strings.Contains(err.Error(), `status must be "ok", "error" or "refused"`) {
		t.Errorf("status declined refused with %v", err)
	}
	_, err = c.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{Arm: "blue"})
	wantErr(t, err, http.StatusBadRequest, "invalid_request")

	token := c.Token
	for query, want := range map[string]string{
		"since=yesterday": "since must be an RFC 3339 time",
		"stauts=ok":       `stauts\"; the run listing takes limit, cursor, status, key, arm, surface, since, until and preview`,
	} {
		req, _ := http.NewRequest(http.MethodGet, e.url+"/v1/orgs/"+c.OrgSlug+"/projects/"+c.ProjectSlug+"/deployments/"+d.ID+"/runs?"+query, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), want) {
			t.Errorf("?%s: %d %s, want 400 saying %q", query, resp.StatusCode, body, want)
		}
	}
}
