// Package e2e drives the studio in Debian's Chromium through playwright-go, against the real server.
package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/handlers/studio"
	"github.com/svcdev/svc/internal/server"
)

const chromiumPath = "/usr/lib/chromium/chromium"

var (
	repoRoot string
	shotDir  string
	browser  playwright.Browser // one browser for every test; one context per test
	expect   = playwright.NewPlaywrightAssertions(10_000)
	// skipReason is set when the browser cannot run here; `make test` installs what is needed.
	skipReason string
)

func TestMain(m *testing.M) {
	if os.Getenv(fakeReplicaEnv) != "" {
		serveFakeReplica() // this binary started again as a fleet's replica (fleet_test.go)
		return
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if repoRoot, err = findRepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	shotDir = filepath.Join(repoRoot, "test-artifacts", "screenshots")
	if err := os.MkdirAll(shotDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	driverDir, err := driverDirectory()
	if err != nil {
		return runWithout(m, err.Error())
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		return runWithout(m, "Debian chromium is not installed")
	}
	pw, err := playwright.Run(&playwright.RunOptions{DriverDirectory: driverDir, SkipInstallBrowsers: true, Verbose: false})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: start the playwright driver:", err)
		return 1
	}
	defer pw.Stop()
	browser, err = pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
		ExecutablePath: playwright.String(chromiumPath), // the /usr/bin wrapper prints a shell warning
		Headless:       playwright.Bool(true),
		Args: []string{
			"--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
			"--disable-component-update", "--disable-sync", "--no-first-run",
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: launch chromium:", err)
		return 1
	}
	defer browser.Close()
	return m.Run()
}

// runWithout runs the tests with every browser test skipped for want of what `make test-deps` installs,
// naming it; under `make test` (SVC_TEST_DEPS=required), which has just installed it, the run fails
// instead, so that the README's one command never passes with the journeys skipped.
func runWithout(m *testing.M, missing string) int {
	if os.Getenv("SVC_TEST_DEPS") == "required" {
		fmt.Fprintf(os.Stderr, "e2e: %s, although `make test` ran `make test-deps`\n", missing)
		return 1
	}
	skipReason = missing + ": run `make test-deps` (npm packages, Chromium) to run them"
	return m.Run()
}

// findRepoRoot walks up to the folder holding go.mod.
func findRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the test folder")
		}
		dir = parent
	}
}

// driverDirectory is .pwdriver as scripts/test-deps.sh sets it up (node and playwright-core 1.52.0 from
// node_modules), created here when missing so that no download is ever attempted.
func driverDirectory() (string, error) {
	dir := filepath.Join(repoRoot, ".pwdriver")
	if _, err := os.Stat(filepath.Join(dir, "package", "cli.js")); err == nil {
		if _, err := os.Stat(filepath.Join(dir, "node")); err == nil {
			return dir, nil
		}
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return "", fmt.Errorf("node is not installed")
	}
	if _, err := os.Stat(filepath.Join(repoRoot, "node_modules", "playwright-core", "cli.js")); err != nil {
		return "", fmt.Errorf("node_modules/playwright-core is missing")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for link, target := range map[string]string{"node": node, "package": "../node_modules/playwright-core"} {
		p := filepath.Join(dir, link)
		_ = os.Remove(p)
		if err := os.Symlink(target, p); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// env is one test's world: a fresh server (SQLite in a temp folder), a studio with its own
// credentials and state files, and a browser context.
type env struct {
	t   *testing.T
	api *server.Server
	// closeAPI stops the server once, whether a test or the cleanup asks first.
	closeAPI func() error
	dataDir  string // the server's, kept for restartAPI
	logger   *slog.Logger
	studio   *studio.Server
	url      string // the studio, http://127.0.0.1:<port>/
	local    *cloudapi.Local
	page     playwright.Page
	bctx     playwright.BrowserContext
	width    int // the viewport width of the journey (1280 unless atWidths says otherwise)

	dialogMu sync.Mutex
	dialogs  []string // messages of the confirm dialogs shown
	decline  int      // how many of the next confirm dialogs are dismissed rather than accepted

	// console holds what the page wrote to its console as errors or warnings, its uncaught script
	// errors and its CSP violations. Every test fails on any of them, the journeys through expected
	// errors (a taken slug, a refused value, an unknown endpoint, a stopped API) included: the studio
	// answers those in a way that neither Chromium nor htmx reports as a failure.
	consoleMu sync.Mutex
	console   []consoleLine
}

// consoleLine is one console message of the page.
type consoleLine struct {
	kind, text, url string
}

// reportCSP makes CSP violations visible as console errors (Chromium reports them to the page).
const reportCSP = `document.addEventListener("securitypolicyviolation", function (e) {
  console.error("CSP violation: " + e.violatedDirective + " blocked " + (e.blockedURI || "inline") + " (" + e.sample + ") at " + e.sourceFile + ":" + e.lineNumber + ":" + e.columnNumber);
});`

func (e *env) addConsole(l consoleLine) {
	e.consoleMu.Lock()
	defer e.consoleMu.Unlock()
	e.console = append(e.console, l)
}

// checkConsole fails the test on every console line so far; a line is reported once.
func (e *env) checkConsole() {
	e.t.Helper()
	e.consoleMu.Lock()
	defer e.consoleMu.Unlock()
	for _, l := range e.console {
		e.t.Errorf("console %s: %s (%s)", l.kind, l.text, l.url)
	}
	e.console = nil
}

func newEnv(t *testing.T) *env { return newEnvWith(t, nil) }

// newEnvWith is newEnv with the studio's options adjusted by tune.
func newEnvWith(t *testing.T, tune func(*studio.Options)) *env {
	t.Helper()
	return newEnvServing(t, tune, nil)
}

// newEnvServing is newEnvWith with the API server's configuration adjusted by tuneServer (a models
// file, say).
func newEnvServing(t *testing.T, tune func(*studio.Options), tuneServer func(*server.Config)) *env {
	t.Helper()
	if skipReason != "" {
		t.Skip("browser tests skipped: " + skipReason)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	cfg := server.Config{Addr: "127.0.0.1:0", DataDir: dataDir, Logger: logger}
	if tuneServer != nil {
		tuneServer(&cfg)
	}
	api, err := server.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	closeAPI := sync.OnceValue(api.Close)
	t.Cleanup(func() { _ = closeAPI() })

	local := &cloudapi.Local{
		APIBaseURL:      api.BaseURL,
		CredentialsPath: filepath.Join(dir, "home", ".svc", "credentials.json"),
		StatePath:       cloudapi.StatePath(filepath.Join(dir, "project")),
	}
	opts := studio.Options{
		APIBaseURL: local.APIBaseURL, CredentialsPath: local.CredentialsPath, StatePath: local.StatePath, Logger: logger,
	}
	if tune != nil {
		tune(&opts)
	}
	st, err := studio.New(opts)
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

	bctx, err := browser.NewContext(playwright.BrowserNewContextOptions{
		Viewport:    &playwright.Size{Width: 1280, Height: 900},
		Permissions: []string{"clipboard-read", "clipboard-write"},
	})
	if err != nil {
		t.Fatal(err)
	}
	page, err := bctx.NewPage()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, api: api, closeAPI: closeAPI, dataDir: dataDir, logger: logger, studio: st, url: "http://" + l.Addr().String() + "/",
		local: local, page: page, bctx: bctx, width: 1280}
	// Confirmations (delete, revoke, disable, auth none) are accepted unless a test asked to decline
	// the next ones, and remembered for assertions.
	page.OnDialog(func(d playwright.Dialog) {
		e.dialogMu.Lock()
		e.dialogs = append(e.dialogs, d.Message())
		decline := e.decline > 0
		if decline {
			e.decline--
		}
		e.dialogMu.Unlock()
		if decline {
			_ = d.Dismiss()
		} else {
			_ = d.Accept()
		}
	})
	if err := bctx.AddInitScript(playwright.Script{Content: playwright.String(reportCSP)}); err != nil {
		t.Fatal(err)
	}
	page.OnConsole(func(m playwright.ConsoleMessage) {
		if k := m.Type(); k == "error" || k == "warning" {
			l := consoleLine{kind: k, text: m.Text()}
			if loc := m.Location(); loc != nil {
				l.url = loc.URL
			}
			e.addConsole(l)
		}
	})
	page.OnPageError(func(err error) { e.addConsole(consoleLine{kind: "pageerror", text: err.Error()}) })
	t.Cleanup(func() {
		if t.Failed() {
			e.shotAt("FAILED", e.width)
		}
		_ = bctx.Close()
		e.checkConsole()
	})
	return e
}

// restartAPI starts the server again on the same address and data after closeAPI: the cloud is back.
func (e *env) restartAPI() {
	e.t.Helper()
	api, err := server.Start(context.Background(), server.Config{Addr: e.api.Addr.String(), DataDir: e.dataDir, Logger: e.logger})
	e.must(err)
	e.api, e.closeAPI = api, sync.OnceValue(api.Close)
	e.t.Cleanup(func() { _ = e.closeAPI() })
}

// lastDialog is the message of the last confirm dialog shown, "" when none was.
func (e *env) lastDialog() string {
	e.dialogMu.Lock()
	defer e.dialogMu.Unlock()
	if len(e.dialogs) == 0 {
		return ""
	}
	return e.dialogs[len(e.dialogs)-1]
}

// journeyWidths are the widths the journeys of atWidths run at: a laptop and a phone.
var journeyWidths = []int{1280, 390}

// atWidths runs a journey once per width of journeyWidths, each in a fresh env, as subtests.
func atWidths(t *testing.T, journey func(t *testing.T, e *env)) {
	for _, w := range journeyWidths {
		t.Run(fmt.Sprintf("%dpx", w), func(t *testing.T) {
			e := newEnv(t)
			e.width = w
			e.must(e.page.SetViewportSize(w, 900))
			journey(t, e)
		})
	}
}

// snap saves the page at the journey's width, and checks that nothing is wider than the window.
func (e *env) snap(name string) {
	e.t.Helper()
	e.shotAt(name, e.width)
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// shot saves the page at 1280 and at 390 px wide, as test-artifacts/screenshots/<test>-<name>-<w>.png.
func (e *env) shot(name string) {
	e.t.Helper()
	e.shotAt(name, 1280)
	e.shotAt(name, 390)
	e.must(e.page.SetViewportSize(1280, 900))
}

func (e *env) shotAt(name string, width int) {
	e.t.Helper()
	if err := e.page.SetViewportSize(width, 900); err != nil {
		e.t.Logf("resize: %v", err)
		return
	}
	file := fmt.Sprintf("%s-%s-%d", strings.TrimPrefix(e.t.Name(), "Test"), name, width)
	file = unsafeName.ReplaceAllString(file, "_") + ".png"
	if _, err := e.page.Screenshot(playwright.PageScreenshotOptions{
		Path: playwright.String(filepath.Join(shotDir, file)), FullPage: playwright.Bool(true),
	}); err != nil {
		e.t.Logf("screenshot %s: %v", file, err)
	}
	// Readable at this width means no sideways scrolling of the page.
	if w, err := e.page.Evaluate("() => document.documentElement.scrollWidth"); err == nil && name != "FAILED" {
		if n, ok := w.(int); !ok || n > width {
			e.t.Errorf("%s: the page is %v px wide in a %d px window", file, w, width)
		}
	}
}

func (e *env) must(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

// open loads the studio at a hash route and waits for its view.
func (e *env) open(hash string) {
	e.t.Helper()
	_, err := e.page.Goto(e.url + hash)
	e.must(err)
}

// section opens one section of the endpoint detail view by its tab (tab-overview, tab-keys, …) and
// waits until the tab bar marks it current, which app.js does once the section is swapped in. A click
// that lands on a view still being replaced (a loaded machine, just after open: the view's own swap
// arrives after it and marks its first section) is made again, three times at most.
func (e *env) section(name string) {
	e.t.Helper()
	e.must(expect.Locator(e.page.Locator(".tab[aria-current=page]")).ToHaveCount(1))
	tab := e.testid("tab-" + name)
	for try := 1; ; try++ {
		e.must(tab.Click())
		err := expect.Locator(tab).ToHaveAttribute("aria-current", "page",
			playwright.LocatorAssertionsToHaveAttributeOptions{Timeout: playwright.Float(4000)})
		if err == nil || try == 3 {
			e.must(err)
			return
		}
	}
}

func (e *env) testid(id string) playwright.Locator {
	return e.page.GetByTestId(id)
}
