package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/internal/core"
)

// The edge-tokens commands work on the data folder: the token printed by create is the one the
// control plane accepts, list shows it without its secret, revoke makes the control plane refuse it.
func TestCLIEdgeTokens(t *testing.T) {
	dir := t.TempDir()
	out, errOut, handled, err := runForTest(t, "edge-tokens", "create", "edge-eu-1", "--data", dir)
	if !handled || err != nil {
		t.Fatalf("create: %v %s", err, errOut)
	}
	token := strings.TrimSpace(out)
	if !strings.HasPrefix(token, edgemodel.EdgeTokenPrefix) || strings.Contains(errOut, token) {
		t.Fatalf("create printed %q (stderr %q)", out, errOut)
	}
	ctx := context.Background()
	check := func() error {
		sqldb, err := db.Open(ctx, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer sqldb.Close()
		_, err = core.New(core.Options{DB: sqldb}).AuthenticateEdge(ctx, token)
		return err
	}
	if err := check(); err != nil {
		t.Fatalf("the printed token is refused: %v", err)
	}
	if _, _, _, err := runForTest(t, "edge-tokens", "create", "edge-eu-1", "--data", dir); err == nil || ExitCode(err) != ExitFailure {
		t.Fatalf("a second live token of the same name: %v", err)
	}
	out, _, _, err = runForTest(t, "edge-tokens", "list", "--data", dir)
	if err != nil || !strings.Contains(out, "edge-eu-1") || strings.Contains(out, token) || !strings.Contains(out, token[:len(edgemodel.EdgeTokenPrefix)+4]) {
		t.Fatalf("list: %v\n%s", err, out)
	}
	if _, _, _, err := runForTest(t, "edge-tokens", "revoke", "edge-eu-1", "--data", dir); err != nil {
		t.Fatal(err)
	}
	if err := check(); edgemodel.CodeOf(err) != edgemodel.CodeUnauthorized {
		t.Fatalf("the revoked token: %v", err)
	}
	out, _, _, err = runForTest(t, "edge-tokens", "list", "--json", "--data", dir)
	var list struct {
		EdgeTokens []struct {
			Name      string  `json:"name"`
			RevokedAt *string `json:"revokedAt"`
		} `json:"edgeTokens"`
	}
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list.EdgeTokens) != 1 || list.EdgeTokens[0].RevokedAt == nil {
		t.Fatalf("list --json: %v %s", err, out)
	}
	if _, _, _, err := runForTest(t, "edge-tokens", "create", "--data", dir); ExitCode(err) != ExitUsage {
		t.Fatalf("create without a name: %v", err)
	}
}
