// Package studio is the local studio: a loopback HTTP server that renders the templ views and
// turns every UI action into a cloudapi SDK call, never touching the database.
package studio

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/svcdev/svc/internal/bodydeadline"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
)

// Options configures a studio.
type Options struct {
	// APIBaseURL is the cloud management API, e.g. http://localhost:8080.
	APIBaseURL string
	// CredentialsPath is ~/.svc/credentials.json; StatePath is ./.svc/state.json.
	CredentialsPath string
	StatePath       string
	Logger          *slog.Logger
	// HTTPClient is used for the cloud API and for the playground's edge calls; nil means a
	// client with a sane timeout.
	HTTPClient *http.Client
	// Port is the port the studio is reached on, for the Host check. Serve fills it in from its
	// listener; set it only when serving Handler() some other way.
	Port int
	// ListPageSize is how many endpoints the list shows at first and adds with each "Show more"
	// (default 50).
	ListPageSize int
	// BodyReadTimeout is how long a request body may take to arrive (default 1 minute, like the
	// server's listener).
	BodyReadTimeout time.Duration
}

// Server is one studio launch. Its CSRF token and session live as long as the process.
type Server struct {
	local      *cloudapi.Local
	apiBaseURL string
	log        *slog.Logger
	http       *http.Client
	csrf       string
	session    string // the value of the session cookie, for download links (run_export.go)
	downloads  downloads
	port       atomic.Int64
	echo       *echo.Echo
	srv        *http.Server
	pageSize   int
}

// New builds a studio; it does not listen yet (see Serve).
func New(opts Options) (*Server, error) {
	if opts.APIBaseURL == "" {
		return nil, errors.New("studio: APIBaseURL is required")
	}
	if opts.CredentialsPath == "" || opts.StatePath == "" {
		return nil, errors.New("studio: CredentialsPath and StatePath are required")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 90 * time.Second}
	}
	token, err := newToken()
	if err != nil {
		return nil, err
	}
	session, err := newToken()
	if err != nil {
		return nil, err
	}
	base := strings.TrimRight(opts.APIBaseURL, "/")
	s := &Server{
		local: &cloudapi.Local{
			APIBaseURL:      base,
			CredentialsPath: opts.CredentialsPath,
			StatePath:       opts.StatePath,
			HTTPClient:      hc,
		},
		apiBaseURL: base,
		log:        log,
		http:       hc,
		csrf:       token,
		session:    session,
		pageSize:   opts.ListPageSize,
	}
	if s.pageSize <= 0 {
		s.pageSize = defaultListPageSize
	}
	s.port.Store(int64(opts.Port))
	s.echo = s.routes()
	// Built here rather than in Serve so that Shutdown never races with Serve.
	s.srv = &http.Server{
		// Bodies get a minute to arrive, like on the server's listener; answers are not limited.
		Handler:           bodydeadline.Wrap(cmp.Or(opts.BodyReadTimeout, time.Minute), s.echo),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return s, nil
}

// newToken is the per-launch CSRF token: 32 bytes from crypto/rand, hex-encoded.
func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("studio: CSRF token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Serve answers on l until Shutdown. It refuses a listener that is not on a loopback address,
// because the studio holds the user's cloud credentials.
func (s *Server) Serve(l net.Listener) error {
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok || !addr.IP.IsLoopback() {
		return fmt.Errorf("studio: refusing to serve on %s: the studio listens on loopback only", l.Addr())
	}
	s.port.Store(int64(addr.Port))
	err := s.srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops Serve, letting requests in flight finish until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.srv.Shutdown(ctx)
}
