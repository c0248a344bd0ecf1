package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
)

// A studio-only user sees when an anonymous endpoint was made and when it is deleted, in the list and
// on the overview; the overview's SDK base URL, copied with its Copy button, works in the openai npm
// package, and a note says which URL SDKs take; at a laptop's and a phone's width.
func TestOverviewSaysExpiryAndGivesAnSDKURL(t *testing.T) {
	atWidths(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		cl, err := e.local.ScopedClient(ctx)
		e.must(err)
		d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{
			Slug: "dated", AuthMode: cloudapi.AuthNone, Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
		})
		e.must(err)
		if d.ExpiresAt == nil {
			t.Fatal("an anonymous identity's endpoint has no expiry")
		}
		created, expires := d.CreatedAt.UTC().Format("Jan 2, 15:04 UTC"), d.ExpiresAt.UTC().Format("Jan 2, 15:04 UTC")

		e.open("#/endpoints")
		dates := e.row("dated").GetByTestId("endpoint-dates")
		e.must(expect.Locator(dates).ToBeVisible())
		e.must(expect.Locator(dates).ToContainText("Created " + created))
		e.must(expect.Locator(dates).ToContainText("expires in 7 days"))
		e.snap("list-dates")

		e.open("#/endpoints/" + d.ID)
		e.must(expect.Locator(e.testid("created")).ToHaveText(created))
		e.must(expect.Locator(e.testid("expires")).ToContainText(expires + " (in 7 days)"))
		e.must(expect.Locator(e.testid("expires")).ToContainText("svc login keeps it"))
		// A week off is no emergency: no notice on the page.
		e.must(expect.Locator(e.testid("expiry-notice")).ToHaveCount(0))
		e.must(expect.Locator(e.testid("url-note")).ToContainText("SDK base URL"))
		e.must(expect.Locator(e.testid("sdk-url")).ToHaveText(e.api.BaseURL + "/e/dated/v1"))
		e.must(e.testid("copy-sdk-url").Click())
		base := e.clipboard()
		if base != e.api.BaseURL+"/e/dated/v1" {
			t.Fatalf("Copy put %q on the clipboard", base)
		}
		e.snap("overview-dates")
		// Pasted as the baseURL of OpenAI's SDK, it answers.
		out := runNodeScript(t, `import OpenAI from "openai";
const client = new OpenAI({ baseURL: process.argv[2], apiKey: "not-needed" });
const r = await client.chat.completions.create({ model: "sim-llama-3.1-8b-instruct", messages: [{ role: "user", content: "Hello!" }] });
console.log(r.choices[0].message.content);
`, base)
		if strings.TrimSpace(out) != "Hello!" {
			t.Fatalf("the SDK with the copied URL printed %q", out)
		}
	})
}

// runNodeScript runs an ES module with the repository's node_modules, with args, and returns its output.
func runNodeScript(t *testing.T, script string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(repoRoot, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "script.mjs"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"script.mjs"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node script.mjs: %v\n%s", err, out)
	}
	return string(out)
}
