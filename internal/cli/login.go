package cli

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io/fs"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/svcdev/svc/cloudapi"
)

func runLogin(c *cli, args []string) error {
	cmd := c.newCommand("svc login [--api URL] [--anonymous [--force]]",
		"Signs in to the API with an account and writes the tokens to ~/.svc/credentials.json (mode 0600).\n"+
			"It prints a sign-in URL (and tries to open it in a browser); after you sign in there, the\n"+
			"browser hands the answer back to this command on 127.0.0.1. Accounts are created on the\n"+
			"server host with `svc users add EMAIL`.\n\n"+
			"With --anonymous it mints an anonymous identity instead: no account needed; its project is\n"+
			"created on first use, it may keep 5 live endpoints, and they expire after 7 days. Signing in\n"+
			"later keeps them. Existing credentials for the same API are kept unless --force.")
	anonymous := cmd.Bool("anonymous", false, "mint an anonymous identity instead of signing in")
	force := cmd.Bool("force", false, "with --anonymous: mint a new identity even if credentials for this API exist")
	timeout := cmd.Duration("timeout", 5*time.Minute, "how long to wait for the sign-in in the browser")
	noBrowser := cmd.Bool("no-browser", false, "only print the sign-in URL; do not try to open a browser")
	if _, err := c.parse(cmd, args, 0, false); err != nil {
		return err
	}
	if *force && !*anonymous {
		return cmd.fail("--force goes with --anonymous; signing in always replaces the saved credentials")
	}
	l, err := c.local()
	if err != nil {
		return err
	}
	if *anonymous {
		return c.loginAnonymous(l, *force)
	}
	return c.loginOAuth(l, *timeout, !*noBrowser)
}

func (c *cli) loginAnonymous(l *cloudapi.Local, force bool) error {
	// Credentials(false) only returns credentials issued by this API; another server's are "missing".
	existing, err := l.Credentials(c.ctx, false)
	switch {
	case err == nil && !force:
		if c.asJSON {
			return c.printJSON(loginResult{l.CredentialsPath, existing.APIBaseURL, existing.Kind, "", false})
		}
		fmt.Fprintf(c.stdout, "Already signed in to %s (%s credentials in %s).\nRun `svc login --anonymous --force` to mint a new anonymous identity.\n",
			c.api, existing.Kind, l.CredentialsPath)
		return nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}
	tok, err := cloudapi.New(c.api, "").MintAnonymous(c.ctx)
	if err != nil {
		return err
	}
	creds := &cloudapi.Credentials{APIBaseURL: c.api, Kind: cloudapi.KindAnonymous, Token: tok.Token}
	if err := cloudapi.SaveCredentials(l.CredentialsPath, creds); err != nil {
		return err
	}
	if c.asJSON {
		return c.printJSON(loginResult{l.CredentialsPath, c.api, creds.Kind, "", true})
	}
	fmt.Fprintf(c.stdout, "Minted anonymous identity %s at %s.\nCredentials written to %s (readable by you only).\n",
		tok.Identity.ID, c.api, l.CredentialsPath)
	return nil
}

// loginOAuth runs the authorization-code flow with PKCE and a loopback redirect (RFC 8252): the
// browser signs in at the server, which sends it back to a listener of this process on 127.0.0.1
// with a code; the code and the PKCE verifier, which never left this process, buy the tokens.
// golang.org/x/oauth2 builds the authorization URL, the PKCE pair and the code exchange.
func (c *cli) loginOAuth(l *cloudapi.Local, timeout time.Duration, openBrowser bool) error {
	base := strings.TrimRight(c.api, "/")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen on 127.0.0.1 for the sign-in answer: %w", err)
	}
	conf := &oauth2.Config{
		ClientID:    cloudapi.CLIClientID, // a public client: no secret, PKCE instead
		RedirectURL: fmt.Sprintf("http://127.0.0.1:%d/callback", ln.Addr().(*net.TCPAddr).Port),
		Endpoint: oauth2.Endpoint{
			AuthURL:   base + "/oauth/authorize",
			TokenURL:  base + "/oauth/token",
			AuthStyle: oauth2.AuthStyleInParams,
		},
	}
	verifier := oauth2.GenerateVerifier()
	state := oauth2.GenerateVerifier() // 32 random bytes, base64url: unguessable, as a state must be
	authURL := conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier))

	type answer struct {
		code string
		err  error
	}
	answers := make(chan answer, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /callback", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		// An answer with another state was not asked for by this login (a stale tab, or a page
		// trying to slip its own code in): refuse it and keep waiting.
		if q.Get("state") != state {
			callbackPage(w, http.StatusBadRequest, "This answer does not belong to the running svc login (state differs). Start again from the terminal.")
			return
		}
		var a answer
		switch {
		case q.Get("error") != "":
			a.err = fmt.Errorf("the server refused the sign-in: %s: %s", q.Get("error"), q.Get("error_description"))
			callbackPage(w, http.StatusOK, "Sign-in failed: "+q.Get("error_description")+". See the terminal.")
		case q.Get("code") == "":
			a.err = errors.New("the server answered without a code")
			callbackPage(w, http.StatusBadRequest, "The answer had no code. See the terminal.")
		default:
			a.code = q.Get("code")
			callbackPage(w, http.StatusOK, "Signed in. You can close this tab and go back to the terminal.")
		}
		select {
		case answers <- a:
		default: // an answer was already taken; later ones change nothing
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	fmt.Fprintf(c.stdout, "Open this URL in a browser to sign in to %s:\n\n  %s\n\nWaiting up to %s for the sign-in…\n", base, authURL, timeout)
	if openBrowser {
		tryOpenBrowser(authURL)
	}
	var a answer
	select {
	case a = <-answers:
	case <-time.After(timeout):
		return fmt.Errorf("no sign-in within %s; run `svc login` again (--timeout waits longer)", timeout)
	case <-c.ctx.Done():
		return c.ctx.Err()
	}
	if a.err != nil {
		return a.err
	}
	// The library's default client has no timeout; a server that accepts and never answers must not
	// hang the login.
	exchangeCtx := context.WithValue(c.ctx, oauth2.HTTPClient, &http.Client{Timeout: 30 * time.Second})
	tok, err := conf.Exchange(exchangeCtx, a.code, oauth2.VerifierOption(verifier))
	if err != nil {
		return tokenError(err)
	}
	creds := &cloudapi.Credentials{APIBaseURL: c.api, Kind: cloudapi.KindOAuth, Token: tok.AccessToken, RefreshToken: tok.RefreshToken}
	if !tok.Expiry.IsZero() {
		exp := tok.Expiry.UTC()
		creds.ExpiresAt = &exp
	}
	me, err := cloudapi.New(base, tok.AccessToken).Me(c.ctx)
	if err != nil {
		return err
	}
	previous, _ := cloudapi.LoadCredentials(l.CredentialsPath)
	claimed, claimErr := claimAnonymous(c.ctx, base, tok.AccessToken, previous)
	if claimed != nil {
		// The claimed org is now one of the user's.
		if me, err = cloudapi.New(base, tok.AccessToken).Me(c.ctx); err != nil {
			return err
		}
	}
	if err := cloudapi.SaveCredentials(l.CredentialsPath, creds); err != nil {
		return err
	}
	if c.asJSON {
		return c.printJSON(loginResult{l.CredentialsPath, c.api, creds.Kind, me.Identity.Email, true})
	}
	fmt.Fprintf(c.stdout, "Signed in to %s as %s.\nCredentials written to %s (readable by you only).\n", base, me.Identity.Email, l.CredentialsPath)
	switch {
	case claimed != nil && claimed.OrgSlug != "":
		fmt.Fprintf(c.stdout, "Kept what you made anonymously: org %s, project %s, %d endpoint(s), which no longer expire.\n",
			claimed.OrgSlug, claimed.ProjectSlug, claimed.Endpoints)
	case claimErr != nil:
		fmt.Fprintf(c.stdout, "The anonymous identity's endpoints could not be kept (%v); they stay anonymous and expire as before.\n", claimErr)
	}
	if len(me.Orgs) == 0 {
		fmt.Fprintln(c.stdout, "Next: svc orgs create ORG; svc projects create --org ORG PROJECT; svc use --org ORG --project PROJECT")
	} else if !l.HasState() {
		fmt.Fprintln(c.stdout, "Next: pick this folder's project with svc use --org ORG --project PROJECT (svc orgs list shows yours)")
	}
	return nil
}

// claimAnonymous hands the endpoints of the anonymous credentials being replaced (for this same API)
// to the user who just signed in, so that signing in keeps them. Nothing to claim is (nil, nil).
func claimAnonymous(ctx context.Context, base, accessToken string, previous *cloudapi.Credentials) (*cloudapi.Claim, error) {
	if previous == nil || previous.Kind != cloudapi.KindAnonymous || strings.TrimRight(previous.APIBaseURL, "/") != base {
		return nil, nil
	}
	return cloudapi.New(base, accessToken).ClaimAnonymous(ctx, previous.Token)
}

// callbackPage is what the browser shows after being sent back to the CLI.
func callbackPage(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>svc login</title></head>"+
		"<body style=\"font-family: system-ui, sans-serif; margin: 3rem auto; max-width: 32rem\"><h1>svc login</h1><p>%s</p></body></html>",
		html.EscapeString(msg))
}

// tryOpenBrowser starts the desktop's URL opener when there is one. Failing is fine: the URL is
// printed, and on a machine without a desktop the user opens it by hand.
func tryOpenBrowser(u string) {
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return
	}
	cmd := exec.CommandContext(context.Background(), path, u)
	if cmd.Start() == nil {
		go cmd.Wait() // reap it; its outcome does not matter
	}
}

// tokenError reports a refused code exchange like every other answer of the service: as a
// *cloudapi.Error with the RFC 6749 code (invalid_grant, …) and the server's description.
func tokenError(err error) error {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.Response == nil {
		return fmt.Errorf("trade the sign-in code for tokens: %w", err)
	}
	ce := &cloudapi.Error{Status: re.Response.StatusCode, Code: re.ErrorCode, Message: re.ErrorDescription}
	if ce.Code == "" {
		ce.Code = fmt.Sprintf("http_%d", ce.Status)
	}
	if ce.Message == "" {
		ce.Message = "the server refused the sign-in code: " + strings.TrimSpace(string(re.Body))
	}
	return ce
}

// loginResult is what `svc login --json` prints: never the token itself.
type loginResult struct {
	CredentialsPath string `json:"credentialsPath"`
	APIBaseURL      string `json:"apiBaseUrl"`
	Kind            string `json:"kind"`
	Email           string `json:"email,omitempty"`
	Minted          bool   `json:"minted"`
}
