package studio_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/handlers/studio"
	"github.com/svcdev/svc/internal/dataset"
	"github.com/svcdev/svc/internal/server"
)

// exportWorld is a real svc server (SQLite in a temp folder) with two anonymous identities, each with
// an endpoint, and a studio of the first on a loopback port.
type exportWorld struct {
	t       *testing.T
	studio  *studio.Server
	url     string
	mine    *cloudapi.Deployment
	theirs  *cloudapi.Deployment
	browser *http.Client // with a cookie jar, as a browser
	sdk     *cloudapi.Client
	api     *server.Server
	key     string // mine's key
}

func newExportWorld(t *testing.T) *exportWorld {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	logger := slog.New(slog.DiscardHandler)
	api, err := server.Start(ctx, server.Config{Addr: "127.0.0.1:0", DataDir: filepath.Join(dir, "data"), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Close() })
	local := func(name string) *cloudapi.Local {
		return &cloudapi.Local{APIBaseURL: api.BaseURL, CredentialsPath: filepath.Join(dir, name, "credentials.json"),
			StatePath: cloudapi.StatePath(filepath.Join(dir, name, "project"))}
	}
	deploy := func(l *cloudapi.Local, slug string) (*cloudapi.Client, *cloudapi.Deployment, string) {
		cl, err := l.ScopedClient(ctx)
		if err != nil {
			t.Fatal(err)
		}
		d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: slug,
			Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"}})
		if err != nil {
			t.Fatal(err)
		}
		k, err := cl.IssueDeploymentKey(ctx, d.ID, "ci")
		if err != nil {
			t.Fatal(err)
		}
		// A failed run (bad input), then two answered ones.
		for _, body := range []string{`{"messages": "not a list"}`, `{"messages": [{"role": "user", "content": "first ` + slug + `"}]}`,
			`{"messages": [{"role": "user", "content": "second ` + slug + `"}]}`} {
			req, _ := http.NewRequest(http.MethodPost, api.BaseURL+"/e/"+slug+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+k.Plaintext)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		return cl, d, k.Plaintext
	}
	me := local("me")
	sdk, mine, key := deploy(me, "exp-mine")
	_, theirs, _ := deploy(local("them"), "exp-theirs")
	api.Flush()

	st, err := studio.New(studio.Options{APIBaseURL: api.BaseURL, CredentialsPath: me.CredentialsPath, StatePath: me.StatePath, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = st.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = st.Shutdown(ctx)
	})
	jar, _ := cookiejar.New(nil)
	return &exportWorld{t: t, studio: st, url: "http://" + l.Addr().String(), mine: mine, theirs: theirs,
		browser: &http.Client{Jar: jar, Timeout: 30 * time.Second}, sdk: sdk, api: api, key: key}
}

type answer struct {
	status int
	header http.Header
	body   string
}

// do sends a request to the studio; headers as name, value pairs.
func (w *exportWorld) do(c *http.Client, method, path string, form url.Values, headers ...string) answer {
	w.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, w.url+path, body)
	if err != nil {
		w.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func (a answer) code(t *testing.T) string {
	t.Helper()
	var env struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(a.body), &env); err != nil {
		t.Fatalf("not an error envelope (%d): %s", a.status, a.body)
	}
	return env.Error.Code
}

// The Export's download link streams the API's export as <slug>-runs.jsonl, only under the session
// the page set (a link cannot send the CSRF header, and a cookie from another launch is refused); the
// form's POST checks the filters by the API's rule and the deployment first, so that its errors are
// answered before any download; the counts of the API's trailers are read from the download's result;
// another project's deployment is the studio's 404 on every step.
func TestRunExportDownload(t *testing.T) {
	w := newExportWorld(t)
	csrf := w.studio.CSRFToken()
	link := "/api/deployments/" + w.mine.ID + "/runs/export?since=168h"

	// No session yet: refused, as a script without the token is.
	if a := w.do(w.browser, "GET", link, nil); a.status != http.StatusForbidden || a.code(t) != "csrf" {
		t.Fatalf("download without a session: %d %s", a.status, a.body)
	}
	page := w.do(w.browser, "GET", "/", nil)
	if page.status != http.StatusOK {
		t.Fatalf("page: %d", page.status)
	}
	cookie := page.header.Get("Set-Cookie")
	if !strings.Contains(cookie, "HttpOnly") || !strings.Contains(cookie, "SameSite=Strict") || !strings.HasPrefix(cookie, "svc_studio_") {
		t.Errorf("session cookie %q", cookie)
	}
	// Another launch's cookie is no session.
	stale := &http.Client{}
	name, _, _ := strings.Cut(cookie, "=")
	if a := w.do(stale, "GET", link, nil, "Cookie", name+"=0123456789abcdef"); a.status != http.StatusForbidden {
		t.Errorf("download with a stale cookie: %d %s", a.status, a.body)
	}

	// The form's POST: the link to follow, then the file, then its counts.
	a := w.do(w.browser, "POST", "/api/deployments/"+w.mine.ID+"/runs/export", url.Values{"since": {"168h"}, "status": {"ok"}}, "X-CSRF-Token", csrf)
	var started struct{ URL, Download, File string }
	if a.status != http.StatusOK || json.Unmarshal([]byte(a.body), &started) != nil || started.File != "exp-mine-runs.jsonl" {
		t.Fatalf("start: %d %s", a.status, a.body)
	}
	if u, err := url.Parse(started.URL); err != nil || u.Path != "/api/deployments/"+w.mine.ID+"/runs/export" ||
		u.Query().Get("since") != "168h" || u.Query().Get("status") != "ok" || u.Query().Get("download") != started.Download {
		t.Errorf("download link %q", started.URL)
	}
	got := w.do(w.browser, "GET", started.URL, nil)
	if got.status != http.StatusOK || got.header.Get("Content-Disposition") != `attachment; filename="exp-mine-runs.jsonl"` ||
		!strings.HasPrefix(got.header.Get("Content-Type"), "application/jsonl") {
		t.Fatalf("download: %d %v %s", got.status, got.header, got.body)
	}
	// The same lines as the SDK reads from the API.
	x, err := w.sdk.ExportRuns(context.Background(), w.mine.ID, cloudapi.ExportOptions{Since: time.Now().Add(-168 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := io.ReadAll(x)
	x.Close()
	if got.body != string(want) || strings.Count(got.body, "\n") != 2 {
		t.Errorf("downloaded\n%s\nthe API's export\n%s", got.body, want)
	}
	for i, q := range []string{"first exp-mine", "second exp-mine"} {
		line := strings.Split(got.body, "\n")[i]
		if !strings.Contains(line, q) {
			t.Errorf("line %d: %s", i+1, line)
		}
	}
	res := w.do(w.browser, "GET", "/api/deployments/"+w.mine.ID+"/runs/export/"+started.Download, nil, "X-CSRF-Token", csrf)
	var result struct {
		Done    bool
		Written int
		Skipped map[string]int
		Summary string
	}
	if res.status != http.StatusOK || json.Unmarshal([]byte(res.body), &result) != nil || !result.Done || result.Written != 2 || result.Skipped["failed"] != 1 ||
		result.Summary != "Saved 2 runs in exp-mine-runs.jsonl; 1 left out: 1 failed." {
		t.Errorf("result: %d %s", res.status, res.body)
	}
	// The page's result fragment says the same.
	res = w.do(w.browser, "GET", "/api/deployments/"+w.mine.ID+"/runs/export/"+started.Download, nil, "X-CSRF-Token", csrf, "HX-Request", "true", "HX-Target", "export-result")
	if !strings.Contains(res.body, `data-testid="export-done"`) || !strings.Contains(res.body, "1 left out: 1 failed.") {
		t.Errorf("result fragment: %s", res.body)
	}

	// Bad filters, before any download: 400 naming them, under the button for the page.
	for _, c := range []struct {
		form url.Values
		says string
	}{
		{url.Values{"minScore": {"5"}}, "minScore must be -1, 0 or 1"},
		{url.Values{"since": {"a week"}}, "Since must be a duration"},
		{url.Values{"status": {"some"}}, "status must be"},
		{url.Values{"reasoning": {"yes"}}, "reasoning must be"},
	} {
		a := w.do(w.browser, "POST", "/api/deployments/"+w.mine.ID+"/runs/export", c.form, "X-CSRF-Token", csrf)
		if a.status != http.StatusBadRequest || a.code(t) != "invalid_request" || !strings.Contains(a.body, c.says) {
			t.Errorf("%v: %d %s", c.form, a.status, a.body)
		}
		h := w.do(w.browser, "POST", "/api/deployments/"+w.mine.ID+"/runs/export", c.form, "X-CSRF-Token", csrf, "HX-Request", "true", "HX-Target", "export-result")
		if h.header.Get("Svc-Status") != "400" || h.header.Get("HX-Retarget") != "" || !strings.Contains(h.body, `data-code="invalid_request"`) {
			t.Errorf("%v for the page: %v %s", c.form, h.header, h.body)
		}
		if d := w.do(w.browser, "GET", "/api/deployments/"+w.mine.ID+"/runs/export?"+c.form.Encode(), nil); d.status != http.StatusBadRequest {
			t.Errorf("%v on the link: %d %s", c.form, d.status, d.body)
		}
	}

	// Another project's endpoint: the studio's 404 at every step, with nothing of it.
	for _, a := range []answer{
		w.do(w.browser, "POST", "/api/deployments/"+w.theirs.ID+"/runs/export", url.Values{}, "X-CSRF-Token", csrf),
		w.do(w.browser, "GET", "/api/deployments/"+w.theirs.ID+"/runs/export", nil),
		w.do(w.browser, "GET", "/api/deployments/"+w.theirs.ID+"/runs/export/"+started.Download, nil, "X-CSRF-Token", csrf),
	} {
		if a.status != http.StatusNotFound || a.code(t) != "not_found" || strings.Contains(a.body, "exp-theirs") || a.header.Get("Content-Disposition") != "" {
			t.Errorf("another project's: %d %v %s", a.status, a.header, a.body)
		}
	}
	// The result route is the page's: it needs the token.
	if a := w.do(w.browser, "GET", "/api/deployments/"+w.mine.ID+"/runs/export/"+started.Download, nil); a.status != http.StatusForbidden {
		t.Errorf("result without the token: %d", a.status)
	}
}

// A link followed after its endpoint was deleted answers the 404 (the browser reports a failed
// download), and the page reads that error as the download's result, under the button.
func TestRunExportDownloadErrorsReachThePage(t *testing.T) {
	w := newExportWorld(t)
	csrf := w.studio.CSRFToken()
	w.do(w.browser, "GET", "/", nil)
	a := w.do(w.browser, "POST", "/api/deployments/"+w.mine.ID+"/runs/export", url.Values{}, "X-CSRF-Token", csrf)
	var started struct{ URL, Download string }
	if err := json.Unmarshal([]byte(a.body), &started); err != nil {
		t.Fatalf("start: %d %s", a.status, a.body)
	}
	if err := w.sdk.DeleteDeployment(context.Background(), w.mine.ID); err != nil {
		t.Fatal(err)
	}
	if d := w.do(w.browser, "GET", started.URL, nil); d.status != http.StatusNotFound || d.header.Get("Content-Disposition") != "" {
		t.Fatalf("download of a deleted endpoint: %d %v", d.status, d.header)
	}
	res := w.do(w.browser, "GET", "/api/deployments/"+w.mine.ID+"/runs/export/"+started.Download, nil,
		"X-CSRF-Token", csrf, "HX-Request", "true", "HX-Target", "export-result")
	if res.header.Get("Svc-Status") != "404" || !strings.Contains(res.body, `data-code="not_found"`) {
		t.Errorf("result: %v %s", res.header, res.body)
	}
}

// exported is what one Export of the form downloaded: the file's name and lines, and the summary the
// page then shows.
type exported struct {
	file, body, summary string
}

// export sends the Export form with these filters, follows its download link as the page does and
// reads the download's result.
func (w *exportWorld) export(form url.Values) exported {
	w.t.Helper()
	csrf := w.studio.CSRFToken()
	a := w.do(w.browser, "POST", "/api/deployments/"+w.mine.ID+"/runs/export", form, "X-CSRF-Token", csrf)
	var started struct{ URL, Download, File string }
	if a.status != http.StatusOK || json.Unmarshal([]byte(a.body), &started) != nil {
		w.t.Fatalf("start %v: %d %s", form, a.status, a.body)
	}
	got := w.do(w.browser, "GET", started.URL, nil)
	if got.status != http.StatusOK || got.header.Get("Content-Disposition") != `attachment; filename="`+started.File+`"` {
		w.t.Fatalf("download %v: %d %v %s", form, got.status, got.header, got.body)
	}
	res := w.do(w.browser, "GET", "/api/deployments/"+w.mine.ID+"/runs/export/"+started.Download, nil, "X-CSRF-Token", csrf)
	var result struct{ Summary string }
	if json.Unmarshal([]byte(res.body), &result) != nil {
		w.t.Fatalf("result %v: %d %s", form, res.status, res.body)
	}
	return exported{started.File, got.body, result.Summary}
}

// sdkExport is the API's export through the SDK, as the CLI reads it.
func (w *exportWorld) sdkExport(o cloudapi.ExportOptions) string {
	w.t.Helper()
	x, err := w.sdk.ExportRuns(context.Background(), w.mine.ID, o)
	if err != nil {
		w.t.Fatal(err)
	}
	defer x.Close()
	b, _ := io.ReadAll(x)
	return string(b)
}

// The Export form has the API's and the CLI's filters: the format (preference pairs of a shadow canary
// saved as <slug>-preferences.jsonl and counted as pairs), until (a date includes its day; a duration
// is before now) and the arm; each download holds the lines the SDK reads with the same options, and
// bad values are 400 naming the filter before any download.
func TestRunExportFilters(t *testing.T) {
	w := newExportWorld(t)
	ctx := context.Background()
	w.do(w.browser, "GET", "/", nil)
	// A shadow canary (lorem answers, the primary echoes), then two calls: two pairs.
	if _, err := w.sdk.SetCanary(ctx, w.mine.ID, cloudapi.Canary{Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-qwen2.5-7b-instruct"},
		Percent: 10, Mode: cloudapi.CanaryShadow}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"shadowed one", "shadowed two"} {
		req, _ := http.NewRequest(http.MethodPost, w.api.BaseURL+"/e/exp-mine/v1/chat/completions",
			strings.NewReader(`{"messages": [{"role": "user", "content": "`+q+`"}]}`))
		req.Header.Set("Authorization", "Bearer "+w.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	var runs []cloudapi.RunSummary
	for deadline := time.Now().Add(10 * time.Second); ; {
		w.api.Flush()
		page, err := w.sdk.ListRuns(ctx, w.mine.ID, cloudapi.ListRunsOptions{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if runs = page.Runs; len(runs) >= 7 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The first pair ranked (the primary's answer preferred), the second left unranked.
	var copyOfOne string
	for _, r := range runs {
		if r.ShadowOf != "" {
			p, err := w.sdk.GetRun(ctx, w.mine.ID, r.ShadowOf)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(p.Request), "shadowed one") {
				copyOfOne = r.ID
				w.setFeedback(p.ID, 1)
				w.setFeedback(r.ID, -1)
			}
		}
	}
	if len(runs) != 7 || copyOfOne == "" {
		t.Fatalf("%d runs (want 3 before the canary, 2 calls and their 2 copies), copy of the first call %q", len(runs), copyOfOne)
	}

	pref := w.export(url.Values{"format": {"preference-jsonl"}, "since": {"24h"}})
	if want := w.sdkExport(cloudapi.ExportOptions{Format: cloudapi.ExportPreference, Since: time.Now().Add(-24 * time.Hour)}); pref.body != want ||
		strings.Count(pref.body, "\n") != 1 || !strings.Contains(pref.body, "shadowed one") || strings.Contains(pref.body, "shadowed two") {
		t.Errorf("preference download\n%s\nthe API's\n%s", pref.body, want)
	}
	if line, _, _ := strings.Cut(pref.body, "\n"); dataset.ValidatePreferenceLine([]byte(line)) != nil {
		t.Errorf("not a preference line: %s (%v)", line, dataset.ValidatePreferenceLine([]byte(line)))
	}
	if pref.file != "exp-mine-preferences.jsonl" || pref.summary != "Saved 1 pair in exp-mine-preferences.jsonl; 1 left out: 1 unranked pairs." {
		t.Errorf("preference export: %q, %q", pref.file, pref.summary)
	}

	canary := w.export(url.Values{"arm": {"canary"}})
	if want := w.sdkExport(cloudapi.ExportOptions{Arm: cloudapi.ArmCanary}); canary.body != want || strings.Count(canary.body, "\n") != 2 ||
		canary.summary != "Saved 2 runs in exp-mine-runs.jsonl; none left out." {
		t.Errorf("canary arm: %q\n%s\nthe API's\n%s", canary.summary, canary.body, want)
	}
	primary := w.export(url.Values{"arm": {"primary"}})
	if strings.Count(primary.body, "\n") != 4 || primary.summary != "Saved 4 runs in exp-mine-runs.jsonl; 1 left out: 1 failed." {
		t.Errorf("primary arm: %q\n%s", primary.summary, primary.body)
	}

	// until: today's date includes today's runs; yesterday's leaves them all out; a duration ago too.
	today, yesterday := time.Now().Format(time.DateOnly), time.Now().AddDate(0, 0, -1).Format(time.DateOnly)
	if all := w.export(url.Values{"until": {today}}); all.body != w.sdkExport(cloudapi.ExportOptions{}) || strings.Count(all.body, "\n") != 4 {
		t.Errorf("until today: %q\n%s", all.summary, all.body)
	}
	for _, until := range []string{yesterday, "1h"} {
		if none := w.export(url.Values{"until": {until}}); none.body != "" || none.summary != "Saved 0 runs in exp-mine-runs.jsonl; none left out." {
			t.Errorf("until %s: %q\n%s", until, none.summary, none.body)
		}
	}

	// Calls made while the retention is none are not kept: the summary says how many were left out.
	none := cloudapi.RetentionNone
	if _, err := w.sdk.UpdateDeployment(ctx, w.mine.ID, cloudapi.UpdateDeploymentRequest{RunRetentionMode: &none}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, w.api.BaseURL+"/e/exp-mine/v1/chat/completions", strings.NewReader(`{"messages": [{"role": "user", "content": "not kept"}]}`))
	req.Header.Set("Authorization", "Bearer "+w.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	w.api.Flush()
	if got := w.export(url.Values{"since": {"24h"}}); strings.Count(got.body, "\n") != 4 ||
		got.summary != "Saved 4 runs in exp-mine-runs.jsonl; 2 left out: 1 failed, 1 without a transcript." {
		t.Errorf("after a call not kept: %q\n%s", got.summary, got.body)
	}

	csrf := w.studio.CSRFToken()
	for _, c := range []struct {
		form url.Values
		says string
	}{
		{url.Values{"format": {"csv"}}, "format must be"},
		{url.Values{"arm": {"both"}}, "arm must be"},
		{url.Values{"until": {"soon"}}, "Until must be a date"},
		{url.Values{"since": {"1h"}, "until": {"2h"}}, "since must be before until"},
	} {
		a := w.do(w.browser, "POST", "/api/deployments/"+w.mine.ID+"/runs/export", c.form, "X-CSRF-Token", csrf)
		if a.status != http.StatusBadRequest || a.code(t) != "invalid_request" || !strings.Contains(a.body, c.says) {
			t.Errorf("%v: %d %s", c.form, a.status, a.body)
		}
		if d := w.do(w.browser, "GET", "/api/deployments/"+w.mine.ID+"/runs/export?"+c.form.Encode(), nil); d.status != http.StatusBadRequest {
			t.Errorf("%v on the link: %d %s", c.form, d.status, d.body)
		}
	}
}

func (w *exportWorld) setFeedback(runID string, score int) {
	w.t.Helper()
	if _, err := w.sdk.SetRunFeedback(context.Background(), w.mine.ID, runID, cloudapi.SetRunFeedbackRequest{Score: score}); err != nil {
		w.t.Fatal(err)
	}
}
