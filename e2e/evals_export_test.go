package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/dataset"
	"github.com/svcdev/svc/internal/mockupstream"
	"github.com/svcdev/svc/internal/server"
)

// A shadow canary needs no share: the form leaves it empty and starts one; a split canary without a
// share is refused under the field; at a laptop's and a phone's width.
func TestShadowCanaryWithoutAShare(t *testing.T) {
	atWidths(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		cl, err := e.local.ScopedClient(ctx)
		e.must(err)
		d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{
			Slug: "shadowed", Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
		})
		e.must(err)
		e.open("#/endpoints/" + d.ID + "/canary")
		_, err = e.testid("canary-model").SelectOption(playwright.SelectOptionValues{Values: &[]string{"sim-qwen2.5-7b-instruct"}})
		e.must(err)
		e.must(e.testid("canary-percent").Fill(""))
		e.must(e.testid("canary-submit").Click())
		e.must(expect.Locator(e.testid("canary-percent-error")).ToContainText("a shadow canary needs none"))
		e.must(expect.Locator(e.testid("canary-percent")).ToBeFocused())

		e.must(e.testid("canary-mode-shadow").Check())
		e.must(e.testid("canary-percent").Fill(""))
		e.must(e.testid("canary-submit").Click())
		e.must(expect.Locator(e.testid("canary-summary")).ToHaveText("Canary (shadow): Base model: sim-qwen2.5-7b-instruct answers a copy of every call"))
		got, err := cl.GetDeployment(ctx, d.ID)
		e.must(err)
		if got.Canary == nil || got.Canary.Mode != cloudapi.CanaryShadow || got.Canary.Target.Model != "sim-qwen2.5-7b-instruct" {
			t.Fatalf("the canary upstream: %+v", got.Canary)
		}
		e.snap("shadow-started")
	})
}

// A judged eval: its pairs filtered by verdict keep the filter in the address (a reload shows the same
// pairs), and its "Export the judged pairs" link saves the preference lines the judge ranked, ties
// left out; at a laptop's and a phone's width.
func TestJudgedEvalFiltersAndExport(t *testing.T) {
	// The judge prefers the answer that repeats "question": the echo's, on the calls that say it.
	judge := httptest.NewServer(mockupstream.Judge("question"))
	defer judge.Close()
	models := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(models, []byte(`models:
  - name: sim-base
    runtime: simulator
    public: true
    simulator: {mode: echo}
  - name: sim-lorem
    runtime: simulator
    public: true
    simulator: {mode: lorem}
  - name: judge
    runtime: openai
    public: true
    upstreamUrl: `+judge.URL+`/v1
    upstreamModel: judge
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, w := range journeyWidths {
		t.Run(fmt.Sprintf("%dpx", w), func(t *testing.T) {
			e := newEnvServing(t, nil, func(cfg *server.Config) { cfg.ModelsFile = models })
			e.width = w
			e.must(e.page.SetViewportSize(w, 900))
			ctx := context.Background()
			cl, err := e.local.ScopedClient(ctx)
			e.must(err)
			d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{
				Slug: "judged", AuthMode: cloudapi.AuthNone, Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-base"},
			})
			e.must(err)
			const calls = 6 // half say "question" (the recorded answer wins), half do not (a tie)
			for i := range calls {
				text := fmt.Sprintf("question %d", i)
				if i%2 == 1 {
					text = fmt.Sprintf("hello %d", i)
				}
				req, _ := http.NewRequest(http.MethodPost, e.api.BaseURL+"/e/judged/v1/chat/completions",
					strings.NewReader(fmt.Sprintf(`{"messages":[{"role":"user","content":%q}]}`, text)))
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				e.must(err)
				resp.Body.Close()
			}
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				e.api.Flush()
				page, err := cl.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{Status: "ok"})
				e.must(err)
				if len(page.Runs) == calls {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d runs stored, want %d", len(page.Runs), calls)
				}
			}
			ev, err := cl.CreateEval(ctx, d.ID, cloudapi.CreateEvalRequest{Candidate: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-lorem"},
				Judge: &cloudapi.EvalJudge{Model: "judge", Rubric: "prefer the answer that repeats the question"}})
			e.must(err)

			e.open("#/endpoints/" + d.ID + "/evals?eval=" + ev.ID)
			detail := e.testid("eval-detail")
			e.must(expect.Locator(detail).ToHaveAttribute("data-state", "done", playwright.LocatorAssertionsToHaveAttributeOptions{Timeout: playwright.Float(30000)}))
			e.must(expect.Locator(e.testid("eval-pair")).ToHaveCount(calls))

			// The verdict filter: the pairs the recorded answer won, kept in the address.
			_, err = e.testid("eval-filter-verdict").SelectOption(playwright.SelectOptionValues{Values: &[]string{"baseline"}})
			e.must(err)
			e.must(expect.Locator(e.testid("eval-pairs-shown")).ToHaveText(fmt.Sprintf("%d of %d pairs shown.", calls/2, calls)))
			e.must(expect.Page(e.page).ToHaveURL(e.url + "#/endpoints/" + d.ID + "/evals?eval=" + ev.ID + "&verdict=baseline"))
			e.snap("eval-filtered")
			_, err = e.page.Reload()
			e.must(err)
			e.must(expect.Locator(e.testid("eval-filter-verdict")).ToHaveValue("baseline"))
			e.must(expect.Locator(e.testid("eval-pair")).ToHaveCount(calls / 2))
			e.must(expect.Locator(e.testid("eval-pairs-shown")).ToHaveText(fmt.Sprintf("%d of %d pairs shown.", calls/2, calls)))

			// Export: the judged pairs as preference lines, the recorded answer preferred.
			download, err := e.page.ExpectDownload(func() error { return e.testid("eval-export").Click() })
			e.must(err)
			if got, want := download.SuggestedFilename(), ev.ID+"-preferences.jsonl"; got != want {
				t.Errorf("the download is named %q, want %q", got, want)
			}
			path, err := download.Path()
			e.must(err)
			f, err := os.Open(path)
			e.must(err)
			defer f.Close()
			var lines []string
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
			e.must(sc.Err())
			if len(lines) != calls/2 {
				t.Fatalf("%d lines saved, want %d (the ties left out)", len(lines), calls/2)
			}
			for _, l := range lines {
				if err := dataset.ValidatePreferenceLine([]byte(l)); err != nil {
					t.Fatalf("not a preference line: %v\n%s", err, l)
				}
				var p struct {
					Preferred []struct{ Content string } `json:"preferred_output"`
				}
				e.must(json.Unmarshal([]byte(l), &p))
				if !strings.HasPrefix(p.Preferred[0].Content, "question") {
					t.Fatalf("the judge preferred the recorded answer, the line prefers %q", p.Preferred[0].Content)
				}
			}
		})
	}
}
