// Package storetest runs the store's tests on both engines: a fresh SQLite file per test, and a fresh
// database per test on a real PostgreSQL server that it starts on a loopback port in a throw-away
// folder (as the postgres user when the tests run as root, which PostgreSQL refuses).
//
// A package whose tests should run on both engines calls Main from its TestMain: its tests run once
// on SQLite, then once more on PostgreSQL, and Open returns a database of the pass's engine. When the
// PostgreSQL binaries are missing the second pass is skipped, and says so (make test-deps installs
// them), unless SVC_TEST_DEPS=required (make test), which fails instead. StopFast and Start stop a
// server the way `pg_ctl stop -m fast` does and start it again, for outage tests.
// SVC_TEST_POSTGRES_URL names an existing server to use instead (its user must be allowed to create
// databases); SVC_TEST_ENGINES=sqlite skips the second pass.
package storetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/svcdev/svc/db"
)

var (
	pass       = db.SQLite // the engine of the current pass of Main
	mainActive bool
	mu         sync.Mutex
	shared     *Server // started by Main or by the first Postgres call under Main
	sharedErr  error
)

// Main runs the package's tests on SQLite, then again on PostgreSQL, and returns the exit code for
// os.Exit: func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }.
func Main(m *testing.M) int {
	mainActive = true
	defer func() {
		if shared != nil {
			shared.Stop()
		}
	}()
	code := m.Run()
	if os.Getenv("SVC_TEST_ENGINES") == "sqlite" {
		return code
	}
	srv, err := sharedServer()
	if err != nil {
		fmt.Fprintf(os.Stderr, "storetest: the tests ran on SQLite only; PostgreSQL: %v\n", err)
		if required() {
			return 1
		}
		return code
	}
	fmt.Fprintf(os.Stderr, "storetest: the same tests again, on PostgreSQL (%s)\n", srv.Version)
	pass = db.Postgres
	if c := m.Run(); c != 0 {
		code = c
	}
	return code
}

// Engine returns the engine of the current pass (SQLite outside Main).
func Engine() db.Engine { return pass }

// Open returns a fresh, migrated database of the current pass's engine, closed (and, on PostgreSQL,
// dropped) when the test ends.
func Open(t testing.TB) *sql.DB {
	t.Helper()
	if pass == db.Postgres {
		return Postgres(t).Open(t)
	}
	sqldb, err := db.Open(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sqldb.Close() })
	return sqldb
}

// Rebind rewrites a test's own SQL, written with ? placeholders, for the engine of sqldb (PostgreSQL
// numbers them: $1, $2, ...). The store's queries need none of this: each engine has its own.
func Rebind(sqldb *sql.DB, query string) string {
	if db.EngineOf(sqldb) != db.Postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Postgres returns a running PostgreSQL server, or skips the test when none can be started. Under
// Main the server is shared by the package's tests; otherwise the test gets its own.
func Postgres(t testing.TB) *Server {
	t.Helper()
	if !mainActive {
		srv, err := start()
		if err != nil {
			skipOrFail(t, err)
		}
		t.Cleanup(srv.Stop)
		return srv
	}
	srv, err := sharedServer()
	if err != nil {
		skipOrFail(t, err)
	}
	return srv
}

// PostgresOnly is Postgres for tests of what only PostgreSQL does (replicas): under Main they run in
// the PostgreSQL pass alone.
func PostgresOnly(t testing.TB) *Server {
	t.Helper()
	if mainActive && pass != db.Postgres {
		t.Skip("PostgreSQL only: runs in the PostgreSQL pass")
	}
	return Postgres(t)
}

func skipOrFail(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, errNoBinaries) && !required() {
		t.Skipf("PostgreSQL: %v", err)
	}
	t.Fatalf("PostgreSQL: %v", err)
}

func sharedServer() (*Server, error) {
	mu.Lock()
	defer mu.Unlock()
	if shared == nil && sharedErr == nil {
		shared, sharedErr = start()
	}
	return shared, sharedErr
}

// required reports whether missing PostgreSQL binaries fail the tests instead of skipping them:
// SVC_TEST_DEPS=required, as `make test` sets it after installing them.
func required() bool { return os.Getenv("SVC_TEST_DEPS") == "required" }

var errNoBinaries = errors.New("the PostgreSQL server's binaries (initdb, postgres) are not installed; run make test-deps (Debian's postgresql package)")

// Server is a PostgreSQL server for tests.
type Server struct {
	Version string
	admin   string // URL of the server's maintenance database, as a user that may create databases
	dir     string // throw-away folder ("" for an external server)
	cmd     *exec.Cmd
	exited  chan struct{}
	dbs     atomic.Int64
	once    sync.Once
	bin     string              // the binaries' folder, to start the server again (Restart)
	data    string              // its data folder
	port    int                 // its port, the same after a restart
	cred    *syscall.Credential // the user it runs as (nil: this process's)
	stopped bool                // stopped by StopFast, not yet started again
}

// URL returns the connection URL of database name on the server.
func (s *Server) URL(name string) string {
	u, err := url.Parse(s.admin)
	if err != nil {
		panic(err) // checked when the server started
	}
	u.Path = "/" + name
	return u.String()
}

// NewDatabase creates an empty database (the template's copy: migrated) and returns its URL; it is
// dropped when the test ends.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), s.dbs.Add(1))
	if err := s.exec("CREATE DATABASE " + name + " TEMPLATE svc_template STRATEGY FILE_COPY"); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() { _ = s.exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)") })
	return s.URL(name)
}

// NewEmptyDatabase creates a database without svc's schema and returns its URL; it is dropped when
// the test ends.
func (s *Server) NewEmptyDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("e%d_%d", os.Getpid(), s.dbs.Add(1))
	if err := s.exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() { _ = s.exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)") })
	return s.URL(name)
}

// Exec runs a statement on the server's maintenance database, as its superuser.
func (s *Server) Exec(t testing.TB, stmt string, args ...any) {
	t.Helper()
	if err := s.exec(stmt, args...); err != nil {
		t.Fatal(err)
	}
}

// Open returns a fresh database on the server, opened with db.OpenPostgres, closed and dropped when
// the test ends.
func (s *Server) Open(t testing.TB) *sql.DB {
	t.Helper()
	sqldb, err := db.OpenPostgres(context.Background(), s.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sqldb.Close() })
	return sqldb
}

func (s *Server) exec(stmt string, args ...any) error {
	conn, err := sql.Open("pgx", s.admin)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = conn.ExecContext(ctx, stmt, args...)
	return err
}

// Stop stops the server (fast shutdown) and removes its folder.
func (s *Server) Stop() {
	s.once.Do(func() {
		if s.cmd == nil {
			return
		}
		if s.stopped {
			os.RemoveAll(s.dir)
			return
		}
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.exited:
		case <-time.After(15 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
		os.RemoveAll(s.dir)
	})
}

// StopFast stops the server as `pg_ctl stop -m fast` does, keeping its data folder and port, so that
// a test sees the database go away under load; Start brings it back. Not for an external server.
func (s *Server) StopFast(t testing.TB) {
	t.Helper()
	if s.cmd == nil {
		t.Skip("SVC_TEST_POSTGRES_URL names an external server, which the tests do not stop")
	}
	if err := s.Halt(); err != nil {
		t.Fatal(err)
	}
}

// Halt is StopFast outside a test (cmd/svcbench's outage): an error for an external server.
func (s *Server) Halt() error {
	if s.cmd == nil {
		return fmt.Errorf("storetest: an external server is not stopped")
	}
	ctl := exec.Command(filepath.Join(s.bin, "pg_ctl"), "stop", "-D", s.data, "-m", "fast", "-w", "-t", "30")
	ctl.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	if out, err := ctl.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl stop -m fast: %v: %s", err, out)
	}
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("postgres did not exit after pg_ctl stop")
	}
	s.stopped = true
	return nil
}

// Start starts a server stopped by StopFast again, on the same port and data folder, and waits until
// it accepts connections.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
}

// Resume is Start outside a test.
func (s *Server) Resume() error {
	if !s.stopped {
		return fmt.Errorf("storetest: Start of a server that StopFast did not stop")
	}
	if err := s.launch(); err != nil {
		return err
	}
	s.stopped = false
	return nil
}

// StartServer starts a PostgreSQL server as the tests do (or connects to SVC_TEST_POSTGRES_URL), for a
// benchmark outside `go test` (cmd/svcbench); Stop stops it and removes its folder.
func StartServer() (*Server, error) { return start() }

// start starts a server (or connects to SVC_TEST_POSTGRES_URL) and makes the migrated template that
// NewDatabase copies.
func start() (*Server, error) {
	var s *Server
	if admin := os.Getenv("SVC_TEST_POSTGRES_URL"); admin != "" {
		if _, err := url.Parse(admin); err != nil {
			return nil, fmt.Errorf("SVC_TEST_POSTGRES_URL: %w", err)
		}
		s = &Server{admin: admin}
	} else {
		var err error
		if s, err = startLocal(); err != nil {
			return nil, err
		}
	}
	if err := s.makeTemplate(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) makeTemplate() error {
	_ = s.exec("DROP DATABASE IF EXISTS svc_template WITH (FORCE)")
	if err := s.exec("CREATE DATABASE svc_template"); err != nil {
		return fmt.Errorf("create the template database: %w", err)
	}
	tmpl, err := db.OpenPostgres(context.Background(), s.URL("svc_template"))
	if err != nil {
		return err
	}
	err = tmpl.QueryRow("SHOW server_version").Scan(&s.Version)
	tmpl.Close()
	return err
}

// binDir finds the newest installed PostgreSQL's binaries (PGBIN overrides).
func binDir() (string, error) {
	if d := os.Getenv("PGBIN"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errNoBinaries
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// startLocal runs initdb and postgres in a new folder under the system's temporary folder (a short
// path: the Unix socket's must fit in 107 bytes), listening on a free loopback port.
func startLocal() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "svcpg")
	if err != nil {
		return nil, err
	}
	cred, err := credential(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "svc", "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Env = append(os.Environ(), "LC_ALL=C")
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	for attempt := 0; ; attempt++ {
		s, err := run(bin, dir, data, cred)
		if err == nil || attempt == 4 {
			if err != nil {
				os.RemoveAll(dir)
			}
			return s, err
		}
	}
}

// run starts postgres on a free port and waits until it accepts connections.
func run(bin, dir, data string, cred *syscall.Credential) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bin: bin, data: data, port: port, cred: cred,
		admin: fmt.Sprintf("postgres://svc@127.0.0.1:%d/postgres?sslmode=disable", port)}
	if err := s.launch(); err != nil {
		return nil, err
	}
	return s, nil
}

// launch starts postgres on s's port and data folder and waits until it accepts connections.
func (s *Server) launch() error {
	logFile, err := os.OpenFile(filepath.Join(s.dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	if s.cred != nil {
		_ = os.Chown(logFile.Name(), int(s.cred.Uid), int(s.cred.Gid))
	}
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", s.data, "-p", strconv.Itoa(s.port), "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=300", "-c", "shared_buffers=32MB")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The server dies with the test process, even when a test's timeout panics past every cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGQUIT}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan struct{})
	s.cmd, s.exited = cmd, exited
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			b, _ := os.ReadFile(logFile.Name())
			return fmt.Errorf("postgres exited: %s", b)
		default:
		}
		if s.exec("SELECT 1") == nil {
			return nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			return errors.New("postgres did not accept connections within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// credential returns the postgres user's credential when running as root (and gives it dir), nil
// otherwise.
func credential(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("the tests run as root, which PostgreSQL refuses, and there is no postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
