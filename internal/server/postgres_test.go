package server

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/db/storetest"
)

// On PostgreSQL svc server keeps nothing in --data (the session key is in the database), so a replica
// on a read-only file system starts and serves; only local artifacts are refused, and it says so.
func TestServerOnPostgreSQLNeedsNoWritableDataFolder(t *testing.T) {
	url := storetest.Postgres(t).NewDatabase(t)
	notAFolder := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notAFolder, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	srv, err := Start(context.Background(), Config{Addr: "127.0.0.1:0", DataDir: notAFolder, Database: url,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	sdk, err := cloudapi.New(srv.BaseURL, "").AnonymousProject(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sdk.CreateDeployment(ctx,
		cloudapi.CreateDeploymentRequest{Slug: "pg-only", Target: cloudapi.Target{Kind: "multi_model"}}); err != nil {
		t.Fatal(err)
	}
	for _, said := range []string{"store: PostgreSQL", "artifacts are refused"} {
		if !strings.Contains(logs.String(), said) {
			t.Errorf("the log does not say %q:\n%s", said, logs.String())
		}
	}
}
