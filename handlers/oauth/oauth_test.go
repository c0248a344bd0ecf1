package oauth_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/oauth2"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/handlers/api"
	"github.com/svcdev/svc/handlers/oauth"
	"github.com/svcdev/svc/internal/core"
)

func addUser(t *testing.T, svc *core.Service, email string) {
	t.Helper()
	if _, err := svc.CreateUser(context.Background(), email, password); err != nil {
		t.Fatal(err)
	}
}

// login runs the whole flow for a user and returns the tokens, traded with golang.org/x/oauth2 as
// `svc login` trades them.
func login(t *testing.T, base, email string) *oauth2.Token {
	t.Helper()
	cb := newCallback(t)
	f := newFlow(base, cb.redirectURI())
	code := newBrowser(t).code(f, cb, email, password)
	conf := &oauth2.Config{ClientID: cloudapi.CLIClientID, RedirectURL: f.redirectURI,
		Endpoint: oauth2.Endpoint{TokenURL: base + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
	tok, err := conf.Exchange(context.Background(), code, oauth2.VerifierOption(f.verifier))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestSignInGivesTokensThatWorkOnTheAPI(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	addUser(t, srv.Service, "Ann@Example.com")
	cb := newCallback(t)
	f := newFlow(srv.BaseURL, cb.redirectURI())
	b := newBrowser(t)

	// The page sets the session cookie with the flags that keep it away from scripts and other sites.
	resp, page := b.get(f.authorizeURL())
	cookie := resp.Header.Get("Set-Cookie")
	for _, want := range []string{"HttpOnly", "SameSite=Lax", "Path=/oauth"} {
		if !strings.Contains(cookie, want) {
			t.Errorf("session cookie %q lacks %s", cookie, want)
		}
	}
	if strings.Contains(cookie, "Secure") {
		t.Errorf("session cookie on an http base URL is Secure, so the browser would drop it: %q", cookie)
	}
	if resp.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(page, `href="/oauth/app.css"`) {
		t.Errorf("sign-in page: X-Frame-Options=%q, stylesheet linked=%v", resp.Header.Get("X-Frame-Options"), strings.Contains(page, "/oauth/app.css"))
	}
	if css, body := b.get(srv.BaseURL + "/oauth/app.css"); css.StatusCode != 200 || !strings.Contains(body, ".card") {
		t.Errorf("stylesheet: %d", css.StatusCode)
	}
	// Email case does not matter: ann@example.com is the account added as Ann@Example.com.
	code := b.code(f, cb, "ann@example.com", password)

	status, body, hdr := postToken(t, srv.BaseURL, exchangeForm(f, code))
	if status != 200 || body["token_type"] != "Bearer" || body["expires_in"] != float64(3600) || body["refresh_token"] == "" || body["access_token"] == "" {
		t.Fatalf("token answer: %d %v", status, body)
	}
	if hdr.Get("Cache-Control") != "no-store" {
		t.Errorf("token answer Cache-Control = %q, want no-store", hdr.Get("Cache-Control"))
	}

	me, err := cloudapi.New(srv.BaseURL, body["access_token"].(string)).Me(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if me.Identity.Kind != core.KindUser || me.Identity.Email != "ann@example.com" {
		t.Fatalf("/v1/me = %+v, want the signed-in user", me.Identity)
	}
	// The refresh token is not a bearer token.
	if _, err := cloudapi.New(srv.BaseURL, body["refresh_token"].(string)).Me(context.Background()); !isStatus(err, 401) {
		t.Fatalf("refresh token as bearer: %v, want 401", err)
	}

	// The browser remembers the sign-in: a second login needs a click, not the password.
	f2 := newFlow(srv.BaseURL, cb.redirectURI())
	_, page = b.get(f2.authorizeURL())
	if !strings.Contains(page, "Continue as ann@example.com") {
		t.Fatalf("second visit does not offer to continue:\n%s", page)
	}
	form := f2.params()
	form.Set("csrf_token", scrapeCSRF(t, page))
	form.Set("continue", "1")
	if resp, _ := b.post(b.hc, srv.BaseURL+"/oauth/authorize", form); resp.StatusCode != 200 {
		t.Fatalf("continue: %d", resp.StatusCode)
	}
	got := cb.received()
	if q := got[len(got)-1]; q.Get("state") != f2.state || q.Get("code") == "" {
		t.Fatalf("continue did not bring a code: %v", q)
	}
}

func TestSessionKeyIsKeptInTheDataFolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key, err := oauth.SessionKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(dir, "session.key"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("session.key: %v, mode %v; want 0600", err, info.Mode().Perm())
	}
	again, err := oauth.SessionKey(dir)
	if err != nil || string(again) != string(key) {
		t.Fatal("a restart made a new session key, which would sign everyone out")
	}
	if other, _ := oauth.SessionKey(t.TempDir()); string(other) == string(key) {
		t.Fatal("two data folders share a session key")
	}
}

func TestWrongPasswordShowsAnErrorAndNoCode(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	addUser(t, srv.Service, "ann@example.com")
	cb := newCallback(t)
	for _, c := range []struct{ email, pw string }{{"ann@example.com", "wrong password!"}, {"nobody@example.com", password}} {
		f := newFlow(srv.BaseURL, cb.redirectURI())
		resp, page := newBrowser(t).signIn(f, c.email, c.pw)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(page, "Wrong email or password.") {
			t.Errorf("%s: %d, page lacks the error:\n%s", c.email, resp.StatusCode, page)
		}
		if !strings.Contains(page, `value="`+c.email+`"`) {
			t.Errorf("%s: the email was not kept in the form", c.email)
		}
	}
	if got := cb.received(); len(got) != 0 {
		t.Fatalf("a failed sign-in reached the callback: %v", got)
	}
}

// Not parallel: its bcrypt work would slow the parallel tests' browsers past their timeouts.
func TestRepeatedWrongPasswordsAreSlowedDown(t *testing.T) {
	srv := startServer(t)
	addUser(t, srv.Service, "ann@example.com")
	cb := newCallback(t)
	b := newBrowser(t)
	for i := 0; i < core.DefaultLimits.SignInFreeFailures; i++ {
		if resp, _ := b.signIn(newFlow(srv.BaseURL, cb.redirectURI()), "ann@example.com", "wrong password!"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d", i+1, resp.StatusCode)
		}
	}
	// The next failure starts the growing delay; during it even the right password is refused.
	b.signIn(newFlow(srv.BaseURL, cb.redirectURI()), "ann@example.com", "wrong password!")
	resp, page := b.signIn(newFlow(srv.BaseURL, cb.redirectURI()), "ann@example.com", password)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(page, "Too many failed sign-in attempts") {
		t.Fatalf("right password during the delay: %d, Retry-After %q\n%s", resp.StatusCode, resp.Header.Get("Retry-After"), page)
	}
	if got := cb.received(); len(got) != 0 {
		t.Fatalf("a refused sign-in reached the callback: %v", got)
	}
}

func TestFormWithoutTheSessionsCSRFTokenIsRefused(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	addUser(t, srv.Service, "ann@example.com")
	cb := newCallback(t)
	f := newFlow(srv.BaseURL, cb.redirectURI())
	b := newBrowser(t)
	b.get(f.authorizeURL()) // the session exists, but the form comes from elsewhere
	form := f.params()
	form.Set("email", "ann@example.com")
	form.Set("password", password)
	for _, tok := range []string{"", "forged-token"} {
		form.Set("csrf_token", tok)
		resp, page := b.post(b.noFollow(), srv.BaseURL+"/oauth/authorize", form)
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Location") != "" || !strings.Contains(page, "expired") {
			t.Fatalf("csrf_token %q: %d, Location %q", tok, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if len(cb.received()) != 0 {
		t.Fatal("a forged form reached the callback")
	}
}

func TestOnlyLoopbackRedirectsOfTheCLIAreServed(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	addUser(t, srv.Service, "ann@example.com")
	b := newBrowser(t)
	bad := []string{
		"https://evil.example/callback",
		"http://evil.example:8080/callback",
		"http://127.0.0.1.evil.example:8080/callback",
		"http://127.0.0.1@evil.example:8080/callback",
		"http://127.0.0.1/callback", // no port: not what a loopback client listens on
		"http://10.0.0.1:8080/callback",
	}
	for _, uri := range bad {
		f := newFlow(srv.BaseURL, uri)
		resp, err := b.noFollow().Get(f.authorizeURL())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
			t.Errorf("GET with redirect_uri %s: %d Location %q, want 400 and no redirect", uri, resp.StatusCode, resp.Header.Get("Location"))
		}
		// Nor does a hand-made POST with a password get a code sent there.
		form := f.params()
		form.Set("email", "ann@example.com")
		form.Set("password", password)
		resp2, page := b.post(b.noFollow(), srv.BaseURL+"/oauth/authorize", form)
		if resp2.StatusCode != http.StatusBadRequest || resp2.Header.Get("Location") != "" || !strings.Contains(page, "not allowed") {
			t.Errorf("POST with redirect_uri %s: %d Location %q", uri, resp2.StatusCode, resp2.Header.Get("Location"))
		}
	}

	// Another client id is refused the same way.
	f := newFlow(srv.BaseURL, "http://127.0.0.1:9/callback")
	q := f.params()
	q.Set("client_id", "someone-else")
	resp, page := b.get(srv.BaseURL + "/oauth/authorize?" + q.Encode())
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "Unknown client_id") {
		t.Errorf("unknown client: %d", resp.StatusCode)
	}

	// A valid loopback redirect with a bad PKCE method gets the error sent back to the CLI.
	q = f.params()
	q.Set("code_challenge_method", "plain")
	resp, err := b.noFollow().Get(srv.BaseURL + "/oauth/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || loc.Host != "127.0.0.1:9" || loc.Query().Get("error") != "invalid_request" || loc.Query().Get("state") != f.state {
		t.Errorf("plain PKCE: %d Location %q, want the error at the loopback redirect", resp.StatusCode, loc)
	}
}

func TestCodesAreSingleUseAndBound(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	addUser(t, srv.Service, "ann@example.com")
	cb := newCallback(t)
	b := newBrowser(t)
	fresh := func() (*flow, string) {
		f := newFlow(srv.BaseURL, cb.redirectURI())
		return f, b.code(f, cb, "ann@example.com", password)
	}

	f, code := fresh()
	form := exchangeForm(f, code)
	form.Set("code_verifier", newFlow("", "").verifier) // well-formed, but not this flow's
	status, body, _ := postToken(t, srv.BaseURL, form)
	wantInvalidGrant(t, "wrong verifier", status, body)
	// A failed attempt burns the code: the right verifier is too late now.
	status, body, _ = postToken(t, srv.BaseURL, exchangeForm(f, code))
	wantInvalidGrant(t, "right verifier after a wrong one", status, body)

	f, code = fresh()
	form = exchangeForm(f, code)
	form.Set("redirect_uri", cb.srv.URL+"/other")
	status, body, _ = postToken(t, srv.BaseURL, form)
	wantInvalidGrant(t, "wrong redirect_uri", status, body)

	f, code = fresh()
	if status, body, _ = postToken(t, srv.BaseURL, exchangeForm(f, code)); status != 200 {
		t.Fatalf("first exchange: %d %v", status, body)
	}
	status, body, _ = postToken(t, srv.BaseURL, exchangeForm(f, code))
	wantInvalidGrant(t, "code reuse", status, body)

	f, code = fresh()
	form = exchangeForm(f, code)
	form.Set("client_id", "someone-else")
	if status, body, _ = postToken(t, srv.BaseURL, form); status != 401 || body["error"] != "invalid_client" {
		t.Fatalf("other client: %d %v", status, body)
	}

	status, body, _ = postToken(t, srv.BaseURL, url.Values{"grant_type": {"password"}})
	if status != 400 || body["error"] != "unsupported_grant_type" {
		t.Fatalf("password grant: %d %v", status, body)
	}
}

// clock is a settable time source for code expiry.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func TestExpiredCodeIsRefused(t *testing.T) {
	t.Parallel()
	// The same routes as `svc server`, assembled here so that the test controls the clock of codes.
	dir := t.TempDir()
	sqldb, err := db.Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := core.New(core.Options{DB: sqldb, Logger: quiet})
	key, err := oauth.SessionKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Now()}
	e := echo.New()
	api.New(api.Options{Service: svc}).Register(e)
	oauth.New(oauth.Options{Service: svc, SessionKey: key, Logger: quiet, Now: clk.Now}).Register(e)
	hs := httptest.NewServer(e)
	t.Cleanup(func() { hs.Close(); sqldb.Close() })
	addUser(t, svc, "ann@example.com")

	cb := newCallback(t)
	b := newBrowser(t)
	f := newFlow(hs.URL, cb.redirectURI())
	code := b.code(f, cb, "ann@example.com", password)
	clk.Add(61 * time.Second)
	status, body, _ := postToken(t, hs.URL, exchangeForm(f, code))
	wantInvalidGrant(t, "code after 61 s", status, body)

	f = newFlow(hs.URL, cb.redirectURI())
	code = b.code(f, cb, "ann@example.com", password)
	clk.Add(59 * time.Second)
	if status, body, _ = postToken(t, hs.URL, exchangeForm(f, code)); status != 200 {
		t.Fatalf("code after 59 s: %d %v", status, body)
	}
}

func TestRefreshRotatesTheRefreshToken(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	addUser(t, srv.Service, "ann@example.com")
	ctx := context.Background()
	first := login(t, srv.BaseURL, "ann@example.com")

	second, err := cloudapi.RefreshToken(ctx, srv.BaseURL, first.RefreshToken)
	if err != nil {
		t.Fatal(err)
	}
	if second.RefreshToken == first.RefreshToken || second.AccessToken == first.AccessToken || second.ExpiresIn != 3600 {
		t.Fatalf("refresh did not give a new pair: %+v", second)
	}
	if me, err := cloudapi.New(srv.BaseURL, second.AccessToken).Me(ctx); err != nil || me.Identity.Email != "ann@example.com" {
		t.Fatalf("new access token: %v %+v", err, me)
	}
	status, body, _ := postToken(t, srv.BaseURL, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {first.RefreshToken}})
	wantInvalidGrant(t, "the rotated-away refresh token", status, body)
	var ae *cloudapi.Error
	if _, err := cloudapi.RefreshToken(ctx, srv.BaseURL, first.RefreshToken); !errors.As(err, &ae) || ae.Code != cloudapi.CodeInvalidGrant {
		t.Fatalf("SDK refresh with the old token: %v, want invalid_grant", err)
	}
	if _, err := cloudapi.RefreshToken(ctx, srv.BaseURL, second.RefreshToken); err != nil {
		t.Fatalf("the new refresh token: %v", err)
	}
}

func TestUsersReachOnlyTheirOwnOrgsAndProjects(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	addUser(t, srv.Service, "ann@example.com")
	addUser(t, srv.Service, "bob@example.com")
	ctx := context.Background()
	ann := cloudapi.New(srv.BaseURL, login(t, srv.BaseURL, "ann@example.com").AccessToken)
	bob := cloudapi.New(srv.BaseURL, login(t, srv.BaseURL, "bob@example.com").AccessToken)

	org, err := ann.CreateOrg(ctx, "acme")
	if err != nil || org.Slug != "acme" || org.Projects == nil || len(org.Projects) != 0 {
		t.Fatalf("CreateOrg: %+v %v", org, err)
	}
	pr, err := ann.CreateProject(ctx, "acme", "web")
	if err != nil || pr.Slug != "web" || pr.ID == "" {
		t.Fatalf("CreateProject: %+v %v", pr, err)
	}
	me, _ := ann.Me(ctx)
	if len(me.Orgs) != 1 || me.Orgs[0].Slug != "acme" || len(me.Orgs[0].Projects) != 1 || me.Orgs[0].Projects[0].ID != pr.ID {
		t.Fatalf("ann's /v1/me = %+v", me.Orgs)
	}
	if _, err := ann.CreateProject(ctx, "acme", "web"); !isCode(err, 409, "slug_taken") {
		t.Errorf("same project twice: %v", err)
	}
	if _, err := ann.CreateOrg(ctx, "Not A Slug"); !isCode(err, 400, "invalid_slug") {
		t.Errorf("bad slug: %v", err)
	}
	if _, err := ann.CreateOrg(ctx, "anon-1234567890"); !isCode(err, 400, "reserved_slug") {
		t.Errorf("anon- slug: %v", err)
	}

	// Bob learns nothing about acme: its project and its routes are simply not found.
	if _, err := bob.CreateProject(ctx, "acme", "bobs"); !isCode(err, 404, "not_found") {
		t.Errorf("bob creating a project in acme: %v", err)
	}
	if _, err := bob.WithProject("acme", "web").ListDeployments(ctx); !isCode(err, 404, "not_found") {
		t.Errorf("bob listing acme/web: %v", err)
	}
	if _, err := bob.CreateOrg(ctx, "acme"); !isCode(err, 409, "slug_taken") {
		t.Errorf("bob taking acme: %v", err)
	}
	if me, _ := bob.Me(ctx); len(me.Orgs) != 0 {
		t.Errorf("bob sees orgs: %+v", me.Orgs)
	}
	if ds, err := ann.WithProject("acme", "web").ListDeployments(ctx); err != nil || len(ds) != 0 {
		t.Errorf("ann listing her project: %v %v", ds, err)
	}

	// Anonymous identities cannot create orgs or projects.
	anonTok, err := cloudapi.New(srv.BaseURL, "").MintAnonymous(ctx)
	if err != nil {
		t.Fatal(err)
	}
	anon := cloudapi.New(srv.BaseURL, anonTok.Token)
	if _, err := anon.CreateOrg(ctx, "anon-org"); !isCode(err, 403, "forbidden") {
		t.Errorf("anonymous CreateOrg: %v", err)
	}
	scope, err := anon.AnonymousScope(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := anon.CreateProject(ctx, scope.OrgSlug, "second"); !isCode(err, 403, "forbidden") {
		t.Errorf("anonymous CreateProject: %v", err)
	}
}

func isStatus(err error, status int) bool {
	var ae *cloudapi.Error
	return errors.As(err, &ae) && ae.Status == status
}

func isCode(err error, status int, code string) bool {
	var ae *cloudapi.Error
	return errors.As(err, &ae) && ae.Status == status && ae.Code == code
}
