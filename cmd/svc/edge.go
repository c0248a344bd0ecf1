package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/svcdev/svc/internal/cli"
	"github.com/svcdev/svc/internal/edgeproc"
	"github.com/svcdev/svc/internal/gctune"
)

// runEdge runs `svc edge` (docs/DEPLOY.md, "svc edge") until Ctrl-C or SIGTERM, then ships the runs it
// still holds and exits 0.
func runEdge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("edge", "Runs an edge alone: no database; deployments come from the control plane (svc server) named by\n"+
		"--control-plane, over its internal API with an edge token (svc edge-tokens create NAME on the\n"+
		"control-plane host), and runs go back to it in batches.")
	controlPlane := fs.String("control-plane", cli.Env("control-plane", ""), "base URL of the control plane, e.g. https://cp.internal:8080, or of several replicas of it, comma-separated: the edge moves to the next when one fails (env SVC_CONTROL_PLANE; required)")
	tokenEnv := fs.String("edge-token-env", cli.Env("edge-token-env", "SVC_EDGE_TOKEN"), "name of the environment variable holding the edge token (env SVC_EDGE_TOKEN_ENV); the token itself is never a flag")
	addr := fs.String("addr", cli.Env("addr", "127.0.0.1:8081"), "listen address of the edge (env SVC_ADDR)")
	domain := fs.String("endpoint-domain", cli.Env("endpoint-domain", ""), "parent domain of endpoint hosts, as given to the control plane (env SVC_ENDPOINT_DOMAIN; empty: localhost:<port>)")
	models := fs.String("models", cli.Env("models", ""), "models file, the same as the control plane's (env SVC_MODELS; empty: the built-in simulated catalog)")
	maxStale := fs.Duration("max-stale", envDuration("max-stale", 10*time.Minute), "how long cached deployments keep serving while the control plane is unreachable; then 503 (env SVC_MAX_STALE)")
	runBuffer := fs.Int("run-buffer", envInt("run-buffer", 100_000), "runs held for shipping at most; beyond it runs are dropped and counted (env SVC_RUN_BUFFER)")
	edgeCount := fs.Int("edge-count", envInt("edge-count", 1), "how many edges share the traffic: each enforces limit / edge-count of the rate limits and admits capacity / edge-count of each model with maxConcurrency (env SVC_EDGE_COUNT)")
	spoolDir := fs.String("spool-dir", cli.Env("spool-dir", defaultSpoolDir()), "folder for what the edge must survive a restart: runs not yet acknowledged by the control plane and the last confirmed snapshots; one per edge; none: memory only (env SVC_SPOOL_DIR)")
	var redisFlag string
	registerRedis(fs.FlagSet, &redisFlag)
	spoolMax := fs.Int("spool-max-mb", envInt("spool-max-mb", 1024), "size of the run spool at most, in MiB; beyond it runs are dropped and counted (env SVC_SPOOL_MAX_MB)")
	var opsf opsFlags
	opsf.register(fs.FlagSet, "the edge's address")
	if err := fs.parse(args, stdout); err != nil {
		return err
	}
	o, err := opsf.parse(stderr)
	if err != nil {
		return err
	}
	if *controlPlane == "" {
		return fs.fail("--control-plane is required: the base URL of the svc server this edge serves for")
	}
	token := os.Getenv(*tokenEnv)
	if token == "" {
		return &cli.UsageError{Msg: fmt.Sprintf("the environment variable %s holds no edge token; make one with svc edge-tokens create NAME on the control-plane host", *tokenEnv)}
	}
	// The default folder is a convenience: when it cannot be used the edge still starts (in memory
	// only, and says so); a folder the operator named must work.
	_, spoolFromEnv := os.LookupEnv("SVC_SPOOL_DIR")
	spoolChosen := spoolFromEnv
	fs.Visit(func(f *flag.Flag) { spoolChosen = spoolChosen || f.Name == "spool-dir" })
	if *spoolDir == "none" {
		*spoolDir = ""
	}
	if *spoolMax < 1 {
		return &cli.UsageError{Msg: "--spool-max-mb must be 1 or more"}
	}
	defer gctune.Start(gctune.DefaultFloor)()
	tracer, stopTracing, err := opsf.startTracing(ctx)
	if err != nil {
		return err
	}
	defer stopTracing()
	e, err := edgeproc.Start(ctx, edgeproc.Config{
		Addr: *addr, ControlPlane: *controlPlane, EdgeToken: token, EndpointDomain: *domain, ModelsFile: *models,
		MaxStale: *maxStale, RunBuffer: *runBuffer, EdgeCount: *edgeCount, TrustedProxies: o.proxies, EdgeCORSOrigins: o.origins,
		MetricsAddr: opsf.metricsAddr, Logger: o.log, Tracer: tracer, SpoolDir: *spoolDir, SpoolBytes: int64(*spoolMax) << 20, SpoolOptional: !spoolChosen,
		Redis: redisURL(redisFlag),
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "svc edge listening on %s\n  control plane: %s\n  endpoints:     <slug>.%s  (or /e/<slug>/v1)\n",
		e.Addr, *controlPlane, e.EndpointDomain)
	<-ctx.Done()
	fmt.Fprintln(stdout, "shutting down")
	return e.Close()
}

// defaultSpoolDir is the edge's folder in the OS's state folder: $XDG_STATE_HOME/svc-edge, else
// ~/.local/state/svc-edge on Unix systems, else the user cache folder (macOS, Windows). "" (no spool)
// when there is none (no home folder).
func defaultSpoolDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "svc-edge")
	}
	switch runtime.GOOS {
	case "darwin", "windows", "ios", "plan9":
		if d, err := os.UserCacheDir(); err == nil {
			return filepath.Join(d, "svc-edge")
		}
		return ""
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" && home != "/" {
		return filepath.Join(home, ".local", "state", "svc-edge")
	}
	return ""
}

// envDuration is the SVC_* variable of a duration flag, or def when unset or unreadable (the flag
// package then reports a bad --flag value itself).
func envDuration(flagName string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(cli.Env(flagName, "")); err == nil {
		return d
	}
	return def
}

// envInt is the SVC_* variable of an integer flag, or def.
func envInt(flagName string, def int) int {
	var n int
	if _, err := fmt.Sscan(cli.Env(flagName, ""), &n); err == nil {
		return n
	}
	return def
}
