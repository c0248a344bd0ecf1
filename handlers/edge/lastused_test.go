package edge_test

import (
	"context"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
)

// lastUsedAt starts empty, is set by an edge call with the key (and only that key), and reaches
// listDeploymentKeys once the recorder has flushed.
func TestLastUsedAtFollowsEdgeCalls(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d, used := e.deploy("last-used", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	idle, err := e.srv.Service.IssueKey(ctx, e.pr, d.ID, "idle")
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Second)
	if r := e.do("POST", "last-used", "/v1/chat/completions", used, chatBody("hi")); r.status != 200 {
		t.Fatalf("edge call: %d %s", r.status, r.body)
	}
	e.srv.Flush()
	keys, err := e.srv.Service.ListKeys(ctx, e.pr, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		switch k.ID {
		case idle.Key.ID:
			if k.LastUsedAt != nil {
				t.Fatalf("unused key has lastUsedAt %v", k.LastUsedAt)
			}
		default:
			if k.LastUsedAt == nil || k.LastUsedAt.Before(before) || k.LastUsedAt.After(time.Now()) {
				t.Fatalf("used key lastUsedAt = %v", k.LastUsedAt)
			}
		}
	}
}
