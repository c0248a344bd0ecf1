// Command svc is the one binary of the service: `svc server` (the cloud side), `svc dev` (studio plus an
// embedded server, for a laptop), `svc studio` (the studio against a remote cloud) and the CLI.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/handlers/studio"
	"github.com/svcdev/svc/server"
)

const usage = `svc: self-hostable inference endpoints.

Usage:
  svc dev         run the studio and an embedded server on this machine (start here)
  svc server      run the cloud side: management API, edge, sweeper
  svc studio      run the studio against a remote cloud (--api URL)
  svc users add   add an account to a server (run on the server host)
  svc login       sign in (or --anonymous) for the CLI and the studio
  svc orgs | projects | use   create orgs and projects; pick this folder's project
  svc deployments | keys | runs | usage | jobs | models   manage the service from the command line

Run "svc <command> --help" for the flags of a command.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "error:", err)
		}
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return nil
	}
	name, rest := args[0], args[1:]
	switch name {
	case "server":
		return runServer(ctx, rest, stdout, stderr)
	case "dev":
		return runDev(ctx, rest, stdout, stderr)
	case "studio":
		return runStudio(ctx, rest, stdout, stderr)
	case "users":
		return runUsers(ctx, rest, os.Stdin, stdout, stderr)
	}
	if handled, err := runCLI(ctx, name, rest, stdout, stderr); handled {
		return err
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", name)
}

// env returns the SVC_* environment variable for a flag, or def.
func env(name, def string) string {
	if v, ok := os.LookupEnv("SVC_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))); ok {
		return v
	}
	return def
}

// serverFlags are the flags of `svc server`, shared by the embedded server of `svc dev`.
type serverFlags struct {
	addr, data, baseURL, endpointDomain, models string
}

func (f *serverFlags) register(fs *flag.FlagSet, defaultData string) {
	fs.StringVar(&f.addr, "addr", env("addr", "127.0.0.1:8080"), "listen address of the API and the edge (env SVC_ADDR)")
	fs.StringVar(&f.data, "data", env("data", defaultData), "folder of the SQLite database (env SVC_DATA)")
	fs.StringVar(&f.baseURL, "base-url", env("base-url", ""), "public base URL of the management API (env SVC_BASE_URL; default http://localhost:<port>)")
	fs.StringVar(&f.endpointDomain, "endpoint-domain", env("endpoint-domain", ""), "parent domain of endpoint hosts (env SVC_ENDPOINT_DOMAIN; default localhost:<port>)")
	fs.StringVar(&f.models, "models", env("models", ""), "models file listing base models and runtimes (env SVC_MODELS; default: a built-in simulated catalog)")
}

func (f *serverFlags) config(log *slog.Logger) server.Config {
	return server.Config{Addr: f.addr, DataDir: f.data, BaseURL: f.baseURL, EndpointDomain: f.endpointDomain, ModelsFile: f.models, Logger: log}
}

func newFlagSet(name, summary string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: svc %s [flags]\n\n%s\n\nFlags:\n", name, summary)
		fs.PrintDefaults()
	}
	return fs
}

func logger(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func runServer(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f serverFlags
	fs := newFlagSet("server", "Runs the management API and the edge on one listener, the run recorder and the sweeper.", stderr)
	f.register(fs, "data")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := logger(stderr)
	srv, err := server.Start(ctx, f.config(log))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "svc server listening on %s\n  API:       %s/v1\n  endpoints: %s  (or %s/e/<slug>/v1)\n",
		srv.Addr, srv.BaseURL, server.EndpointURL(srv.BaseURL, srv.EndpointDomain)("<slug>"), srv.BaseURL)
	<-ctx.Done()
	fmt.Fprintln(stdout, "shutting down")
	return srv.Close()
}

func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f serverFlags
	home, err := os.UserHomeDir()
	if err != nil {
		return err
	}
	fs := newFlagSet("dev", "Runs the studio on 127.0.0.1 and, unless --api names a remote cloud, an embedded server with SQLite and the simulator runtime.", stderr)
	f.register(fs, filepath.Join(home, ".svc", "dev"))
	studioAddr := fs.String("studio-addr", env("studio-addr", "127.0.0.1:0"), "listen address of the studio (env SVC_STUDIO_ADDR; default a free loopback port)")
	apiURL := fs.String("api", env("api", ""), "base URL of a remote cloud; when set no embedded server is started (env SVC_API)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := logger(stderr)
	base := *apiURL
	var srv *server.Server
	if base == "" {
		if srv, err = server.Start(ctx, f.config(log)); err != nil {
			return err
		}
		defer srv.Close()
		base = srv.BaseURL
		fmt.Fprintf(stdout, "embedded server on %s (data in %s)\n  API:       %s/v1\n  endpoints: %s  (or %s/e/<slug>/v1)\n",
			srv.Addr, f.data, srv.BaseURL, server.EndpointURL(srv.BaseURL, srv.EndpointDomain)("<slug>"), srv.BaseURL)
	}
	return serveStudio(ctx, base, *studioAddr, log, stdout)
}

func runStudio(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("studio", "Runs the studio on 127.0.0.1 against a remote cloud.", stderr)
	apiURL := fs.String("api", env("api", "http://localhost:8080"), "base URL of the cloud management API (env SVC_API)")
	studioAddr := fs.String("studio-addr", env("studio-addr", "127.0.0.1:0"), "listen address of the studio (env SVC_STUDIO_ADDR)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return serveStudio(ctx, *apiURL, *studioAddr, logger(stderr), stdout)
}

func serveStudio(ctx context.Context, apiBase, addr string, log *slog.Logger, stdout io.Writer) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--studio-addr %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--studio-addr %q: the studio listens on loopback only (it holds your credentials)", addr)
	}
	credPath, err := cloudapi.DefaultCredentialsPath()
	if err != nil {
		return err
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	st, err := studio.New(studio.Options{APIBaseURL: apiBase, CredentialsPath: credPath, StatePath: cloudapi.StatePath(wd), Logger: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("studio: listen on %s: %w", addr, err)
	}
	fmt.Fprintf(stdout, "studio: http://127.0.0.1:%d/#/endpoints\n", ln.Addr().(*net.TCPAddr).Port)
	errc := make(chan error, 1)
	go func() { errc <- st.Serve(ln) }()
	select {
	case <-ctx.Done():
		return st.Shutdown(context.Background())
	case err := <-errc:
		return err
	}
}
