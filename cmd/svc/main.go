// Command svc is the one binary of the service: `svc server` (the cloud side), `svc dev` (studio plus an
// embedded server, for a laptop), `svc studio` (the studio against a remote cloud), `svc edge` (an
// edge alone, in front of a control plane) and the CLI (package cli). This file only parses the top level and wires the parts together.
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
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/handlers/studio"
	"github.com/svcdev/svc/internal/cli"
	"github.com/svcdev/svc/internal/clientip"
	"github.com/svcdev/svc/internal/gctune"
	"github.com/svcdev/svc/internal/server"
	"github.com/svcdev/svc/internal/tracing"
	"github.com/svcdev/svc/internal/version"
)

const usage = `svc: self-hostable inference endpoints.

Usage:
  svc dev         run the studio and an embedded server on this machine (start here)
  svc server      run the cloud side: management API, edge, sweeper
  svc studio      run the studio against a remote cloud (--api URL)
  svc edge        run an edge alone, in front of a control plane (svc server), for scaling out
  svc users add   add an account to a server (run on the server host)
  svc edge-tokens create | list | revoke   tokens of edges (run on the control-plane host)
  svc login       sign in (or --anonymous) for the CLI and the studio
  svc orgs | projects | use   create orgs and projects; pick this folder's project
  svc deployments | keys | runs | evals | usage | jobs | models   manage the service from the command line
  svc version     print the version of this binary (also --version)

The CLI and the studio share one identity and one project: ~/.svc/credentials.json, and
.svc/state.json in the folder the command runs in. CLI commands call the API named by --api or
SVC_API (default http://localhost:8080, where svc dev serves it).

Exit codes:
  0  success (--help too)
  1  failure: the service refused or failed (its message is printed), or a file or the network did
  2  usage error: unknown command or flag, missing or extra argument

Run "svc <command> --help" for the flags of a command.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		cli.Report(os.Stderr, err)
	}
	os.Exit(cli.ExitCode(err))
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return nil
	}
	if args[0] == "--version" || args[0] == "-version" || args[0] == "version" {
		fmt.Fprintln(stdout, "svc", version.String())
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
	case "edge":
		return runEdge(ctx, rest, stdout, stderr)
	}
	if handled, err := cli.Run(ctx, name, rest, stdin, stdout, stderr); handled {
		return err
	}
	return &cli.UsageError{Msg: fmt.Sprintf("unknown command %q%s", name, cli.Suggest(name, "server", "dev", "studio", "edge")), Help: "svc"}
}

// serverFlags are the flags of `svc server`, shared by the embedded server of `svc dev`.
type serverFlags struct {
	addr, data, baseURL, endpointDomain, models, artifacts, redis string
	database                                                      *string
	ops                                                           opsFlags
	spoolMax                                                      int // --spool-max-mb
	evalLease                                                     time.Duration
}

// names of the flags register adds; `svc dev --api` refuses them, as no embedded server runs then.
var serverFlagNames = []string{"addr", "data", "database", "base-url", "endpoint-domain", "models", "redis", "spool-max-mb", "eval-lease"}

func (f *serverFlags) register(fs *flag.FlagSet, defaultData string) {
	fs.StringVar(&f.addr, "addr", cli.Env("addr", "127.0.0.1:8080"), "listen address of the API and the edge; its host is also the base URL's unless --base-url says otherwise (env SVC_ADDR)")
	fs.StringVar(&f.data, "data", cli.Env("data", defaultData), "folder of the SQLite database (env SVC_DATA)")
	f.database = cli.DatabaseFlag(fs)
	fs.StringVar(&f.baseURL, "base-url", cli.Env("base-url", ""), "public base URL of the management API (env SVC_BASE_URL; empty: http://<host of --addr>:<port>, localhost for 127.0.0.1)")
	fs.StringVar(&f.endpointDomain, "endpoint-domain", cli.Env("endpoint-domain", ""), "parent domain of endpoint hosts (env SVC_ENDPOINT_DOMAIN; empty: <host of --addr>:<port>, localhost for 127.0.0.1)")
	fs.StringVar(&f.models, "models", cli.Env("models", ""), "models file listing base models and runtimes (env SVC_MODELS; empty: a built-in simulated catalog)")
	fs.StringVar(&f.artifacts, "artifacts-dir", cli.Env("artifacts-dir", ""), "the only folder file:// and plain-path adapter artifacts may be in (env SVC_ARTIFACTS_DIR; default <data>/artifacts)")
	registerRedis(fs, &f.redis)
	fs.IntVar(&f.spoolMax, "spool-max-mb", envInt("spool-max-mb", 1024), "size of the recorder's spool (<data>/recorder-spool) at most, in MiB: it keeps runs while the database does not take them; beyond it runs are dropped and counted (env SVC_SPOOL_MAX_MB)")
	fs.DurationVar(&f.evalLease, "eval-lease", envDuration("eval-lease", 30*time.Second), "how long an eval worker's claim on a run to replay holds without renewal: a replica that dies leaves its runs to the others after it (env SVC_EVAL_LEASE)")
	f.ops.register(fs, "the base URL host")
}

// config is the server's configuration, with the one logger of the process; a bad flag value is a
// usage error.
func (f *serverFlags) config(stderr io.Writer) (server.Config, error) {
	o, err := f.ops.parse(stderr)
	if err != nil {
		return server.Config{}, err
	}
	if f.spoolMax < 1 {
		return server.Config{}, &cli.UsageError{Msg: "--spool-max-mb must be 1 or more"}
	}
	if f.evalLease < time.Second {
		return server.Config{}, &cli.UsageError{Msg: "--eval-lease must be 1s or more"}
	}
	return server.Config{SpoolMaxBytes: int64(f.spoolMax) << 20, Addr: f.addr, DataDir: f.data, Database: *f.database, BaseURL: f.baseURL, EndpointDomain: f.endpointDomain, ModelsFile: f.models,
		ArtifactsDir: f.artifacts, TrustedProxies: o.proxies, Logger: o.log, MetricsAddr: f.ops.metricsAddr, EdgeCORSOrigins: o.origins,
		Redis: redisURL(f.redis), EvalLease: f.evalLease}, nil
}

// registerRedis adds --redis (svc server, svc dev, svc edge). Its environment variable is
// SVC_REDIS_URL, the place for a URL that holds a password: a flag value shows in process lists (and
// a default would show in --help), so the variable is read after parsing, by redisURL.
func registerRedis(fs *flag.FlagSet, into *string) {
	fs.StringVar(into, "redis", "", "count rate limits and sign-in and mint throttles in Redis, shared by every process given the same URL, e.g. redis://redis:6379/0 (env SVC_REDIS_URL, the place for a URL with a password; default: in this process)")
}

// redisURL is --redis, else SVC_REDIS_URL.
func redisURL(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	return os.Getenv("SVC_REDIS_URL")
}

// opsFlags are the operating flags of every process that serves endpoints (`svc server`, `svc dev`,
// `svc edge`): client addresses, metrics, CORS and logs.
type opsFlags struct {
	trustedProxies, metricsAddr, corsOrigins, logFormat, logLevel, otlpEndpoint string
}

func (f *opsFlags) register(fs *flag.FlagSet, metricsHost string) {
	fs.StringVar(&f.trustedProxies, "trusted-proxies", cli.Env("trusted-proxies", ""), "comma-separated CIDRs or addresses of proxies whose X-Forwarded-For is believed, for limits and logs (env SVC_TRUSTED_PROXIES; default none)")
	fs.StringVar(&f.metricsAddr, "metrics-addr", cli.Env("metrics-addr", ""), "serve /metrics on this address instead of on "+metricsHost+" (env SVC_METRICS_ADDR)")
	fs.StringVar(&f.corsOrigins, "edge-cors-origins", cli.Env("edge-cors-origins", ""), "comma-separated origins that browsers may call endpoints from, or * (env SVC_EDGE_CORS_ORIGINS; default: CORS off)")
	fs.StringVar(&f.logFormat, "log-format", cli.Env("log-format", "text"), "log format: text or json (env SVC_LOG_FORMAT)")
	fs.StringVar(&f.logLevel, "log-level", cli.Env("log-level", "info"), "log level: debug (one line per edge request), info, warn or error (env SVC_LOG_LEVEL)")
	fs.StringVar(&f.otlpEndpoint, "otlp-endpoint", cli.Env("otlp-endpoint", ""), "send OpenTelemetry traces to this OTLP/HTTP endpoint, e.g. http://otel-collector:4318 (env SVC_OTLP_ENDPOINT, or OTEL_EXPORTER_OTLP_ENDPOINT; default: tracing off)")
}

// startTracing starts the exporter of traces when --otlp-endpoint or OTEL_EXPORTER_OTLP_ENDPOINT asks
// for it (nil: tracing off); stop exports what is left, for up to 5 s.
func (f *opsFlags) startTracing(ctx context.Context) (t *tracing.Tracer, stop func(), err error) {
	t, err = tracing.New(ctx, tracing.Config{Endpoint: f.otlpEndpoint, Service: "svc", Version: version.String()})
	if err != nil {
		return nil, nil, &cli.UsageError{Msg: err.Error()}
	}
	return t, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		t.Shutdown(ctx)
	}, nil
}

// ops is what the operating flags say, read.
type ops struct {
	log     *slog.Logger // the one logger of the process, passed down to every part
	proxies *clientip.Resolver
	origins []string
}

// parse reads the operating flags; a bad value is a usage error.
func (f *opsFlags) parse(stderr io.Writer) (ops, error) {
	var o ops
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return o, &cli.UsageError{Msg: fmt.Sprintf("--log-level %q: use debug, info, warn or error", f.logLevel)}
	}
	opts := &slog.HandlerOptions{Level: level}
	switch f.logFormat {
	case "text":
		o.log = slog.New(slog.NewTextHandler(stderr, opts))
	case "json":
		o.log = slog.New(slog.NewJSONHandler(stderr, opts))
	default:
		return o, &cli.UsageError{Msg: fmt.Sprintf("--log-format %q: use text or json", f.logFormat)}
	}
	proxies, err := clientip.Parse(f.trustedProxies)
	if err != nil {
		return o, &cli.UsageError{Msg: "--trusted-proxies: " + err.Error()}
	}
	o.proxies = proxies
	for _, origin := range strings.Split(f.corsOrigins, ",") {
		if origin = strings.TrimSpace(origin); origin != "" {
			o.origins = append(o.origins, origin)
		}
	}
	return o, nil
}

// flagSet is the FlagSet of a command that runs a process (server, dev, studio).
type flagSet struct {
	*flag.FlagSet
	name, summary string
}

func newFlagSet(name, summary string) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse prints usage and errors itself
	return &flagSet{FlagSet: fs, name: name, summary: summary}
}

func (fs *flagSet) usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: svc %s [flags]\n\n%s\n\nFlags:\n", fs.name, fs.summary)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// parse parses args like every other svc command: --help prints the usage on stdout and returns
// flag.ErrHelp (exit 0); a mistake returns a usage error (exit 2), which main reports with a hint at
// --help rather than with the whole usage.
func (fs *flagSet) parse(args []string, stdout io.Writer) error {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.usage(stdout)
		return err
	case err == nil && fs.NArg() > 0:
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err != nil {
		return fs.fail(cli.FlagAsTyped(err.Error(), args))
	}
	return nil
}

// fail is a mistake on the command line of this command.
func (fs *flagSet) fail(msg string) error {
	return &cli.UsageError{Msg: msg, Help: "svc " + fs.name}
}

func logger(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func runServer(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f serverFlags
	fs := newFlagSet("server", "Runs the management API and the edge on one listener, the run recorder and the sweeper.")
	f.register(fs.FlagSet, "data")
	if err := fs.parse(args, stdout); err != nil {
		return err
	}
	cfg, err := f.config(stderr)
	if err != nil {
		return err
	}
	defer gctune.Start(gctune.DefaultFloor)() // a process-wide setting: it belongs to the command
	tracer, stopTracing, err := f.ops.startTracing(ctx)
	if err != nil {
		return err
	}
	defer stopTracing()
	cfg.Tracer = tracer
	srv, err := server.Start(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "svc server listening on %s\n  API:       %s/v1\n  endpoints: %s\n", srv.Addr, srv.BaseURL, endpoints(srv))
	<-ctx.Done()
	fmt.Fprintln(stdout, "shutting down")
	return srv.Close()
}

// endpoints says where a server's endpoints are: on their own hosts, and by the path form on the base
// URL that every client can resolve; by the path form alone where the endpoint domain is an address.
func endpoints(srv *server.Server) string {
	path := srv.BaseURL + "/e/<slug>/v1"
	host := server.EndpointURL(srv.BaseURL, srv.EndpointDomain)("<slug>")
	if strings.Contains(host, "/e/") {
		return host + "/v1"
	}
	return host + "  (or " + path + ")"
}

// runDev is the README's one command. Ctrl-C ends it with exit code 0: stopping it is how it is used.
func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f serverFlags
	home, err := os.UserHomeDir()
	if err != nil {
		return err
	}
	fs := newFlagSet("dev", "Runs the studio on 127.0.0.1 and, unless --api names a remote cloud, an embedded server with\n"+
		"SQLite and the simulator runtime. The studio reads ~/.svc/credentials.json and the .svc/state.json\n"+
		"of the folder it runs in, as the CLI does.")
	f.register(fs.FlagSet, filepath.Join(home, ".svc", "dev"))
	studioAddr := fs.String("studio-addr", cli.Env("studio-addr", "127.0.0.1:0"), "listen address of the studio (env SVC_STUDIO_ADDR; port 0 picks a free port)")
	// Not read from SVC_API: the CLI commands use that variable to find the API, and a shell that set
	// it for them must not silently turn `svc dev` into a studio without its server.
	apiURL := fs.String("api", "", "base URL of a remote cloud; when given no embedded server is started (flag only)")
	if err := fs.parse(args, stdout); err != nil {
		return err
	}
	if *apiURL != "" {
		var clash []string
		fs.Visit(func(fl *flag.Flag) {
			for _, n := range serverFlagNames {
				if fl.Name == n {
					clash = append(clash, "--"+n)
				}
			}
		})
		if len(clash) > 0 {
			return fs.fail(fmt.Sprintf("--api runs no embedded server, so %v would have no effect; drop one or the other", clash))
		}
	}
	cfg, err := f.config(stderr)
	if err != nil {
		return err
	}
	log := cfg.Logger
	base := *apiURL
	if base == "" {
		defer gctune.Start(gctune.DefaultFloor)()
		tracer, stopTracing, err := f.ops.startTracing(ctx)
		if err != nil {
			return err
		}
		defer stopTracing()
		cfg.Tracer = tracer
		srv, err := server.Start(ctx, cfg)
		if err != nil {
			return err
		}
		defer srv.Close()
		base = srv.BaseURL
		fmt.Fprintf(stdout, "embedded server on %s (data in %s)\n  API:       %s/v1\n  endpoints: %s\n", srv.Addr, f.data, srv.BaseURL, endpoints(srv))
	} else {
		fmt.Fprintf(stdout, "no embedded server: the studio uses the API at %s\n", base)
	}
	return serveStudio(ctx, base, *studioAddr, log, stdout)
}

func runStudio(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("studio", "Runs the studio on 127.0.0.1 against a remote cloud. It reads ~/.svc/credentials.json and the\n"+
		".svc/state.json of the folder it runs in, as the CLI does.")
	apiURL := fs.String("api", cli.Env("api", "http://localhost:8080"), "base URL of the cloud management API (env SVC_API)")
	studioAddr := fs.String("studio-addr", cli.Env("studio-addr", "127.0.0.1:0"), "listen address of the studio (env SVC_STUDIO_ADDR; port 0 picks a free port)")
	if err := fs.parse(args, stdout); err != nil {
		return err
	}
	return serveStudio(ctx, *apiURL, *studioAddr, logger(stderr), stdout)
}

// serveStudio serves the studio until ctx ends (Ctrl-C), then stops it and returns nil.
func serveStudio(ctx context.Context, apiBase, addr string, log *slog.Logger, stdout io.Writer) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return &cli.UsageError{Msg: fmt.Sprintf("--studio-addr %q: %v", addr, err)}
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return &cli.UsageError{Msg: fmt.Sprintf("--studio-addr %q: the studio listens on loopback only (it holds your credentials)", addr)}
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
	fmt.Fprintf(stdout, "studio: http://127.0.0.1:%d/#/endpoints\n  project folder: %s (its .svc/state.json is the studio's project)\n",
		ln.Addr().(*net.TCPAddr).Port, wd)
	errc := make(chan error, 1)
	go func() { errc <- st.Serve(ln) }()
	select {
	case <-ctx.Done():
		fmt.Fprintln(stdout, "shutting down")
		return st.Shutdown(context.Background())
	case err := <-errc:
		return err
	}
}
