// Package cli is the svc command line for people and scripts: sign-in, orgs and projects, the
// deployments, keys, runs, jobs and models commands (each a thin layer over the cloudapi SDK), and
// the accounts of a server host.
package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/svcdev/svc/cloudapi"
)

// defaultAPIBaseURL is the management API of `svc server` started with no flags
// (docs/ARCHITECTURE.md, "Processes").
const defaultAPIBaseURL = "http://localhost:8080"

// cliGroup is one subcommand of svc with its verbs, e.g. "deployments" with list, get, create...
type cliGroup struct {
	summary string
	verbs   []cliVerb
}

// cliVerb is one action of a group. run receives the arguments after the verb.
type cliVerb struct {
	name, summary string
	run           func(c *cli, args []string) error
}

// cliGroups is the whole CLI surface, one entry per subcommand, readable top to bottom.
var cliGroups = map[string]cliGroup{
	"login": {summary: "sign in (or --anonymous): write ~/.svc/credentials.json", verbs: []cliVerb{
		{"", "sign in with an account in the browser, or mint an anonymous identity", runLogin},
	}},
	"orgs": {summary: "orgs of a signed-in user", verbs: []cliVerb{
		{"create", "create an org (you become its member)", runOrgsCreate},
		{"list", "list your orgs and their projects", runOrgsList},
	}},
	"projects": {summary: "projects of an org", verbs: []cliVerb{
		{"create", "create a project in one of your orgs", runProjectsCreate},
	}},
	"use": {summary: "pick this folder's project: write .svc/state.json", verbs: []cliVerb{
		{"", "write .svc/state.json for one of your projects", runUse},
	}},
	"models": {summary: "the model catalog", verbs: []cliVerb{
		{"list", "list the catalog's models", runModelsList},
		{"get", "show one model, with its replicas' health and load", runModelsGet},
	}},
	"jobs": {summary: "training jobs whose adapters deployments serve", verbs: []cliVerb{
		{"list", "list the project's jobs", runJobsList},
		{"get", "show one job", runJobsGet},
		{"create", "register a training job", runJobsCreate},
		{"update", "add checkpoints, set the status or the final adapter", runJobsUpdate},
	}},
	"deployments": {summary: "inference endpoints", verbs: []cliVerb{
		{"list", "list the project's deployments", runDeploymentsList},
		{"get", "show one deployment", runDeploymentsGet},
		{"create", "create a deployment", runDeploymentsCreate},
		{"update", "enable, disable, change auth, retention, target or rate limits", runDeploymentsUpdate},
		{"delete", "delete a deployment with its keys and runs", runDeploymentsDelete},
		{"bulk", "enable, disable or delete many deployments", runDeploymentsBulk},
		{"canary", "set, compare, promote or end a canary (svc deployments canary --help)", runDeploymentsCanary},
	}},
	"keys": {summary: "API keys of a deployment", verbs: []cliVerb{
		{"list", "list a deployment's keys, with when each was last used", runKeysList},
		{"issue", "issue a key (its plaintext is shown once)", runKeysIssue},
		{"revoke", "revoke a key", runKeysRevoke},
		{"update", "change a key's rate limits", runKeysUpdate},
	}},
	"runs": {summary: "recorded requests of a deployment", verbs: []cliVerb{
		{"list", "list a deployment's runs, newest first", runRunsList},
		{"get", "show one run with its request and response", runRunsGet},
		{"feedback", "give feedback on a run (1, -1 or 0)", runRunsFeedback},
		{"export", "write runs as a fine-tuning dataset (JSONL) to standard output", runRunsExport},
	}},
	"evals": evalsGroup,
	"users": {summary: "accounts of this server (run on the server host)", verbs: []cliVerb{
		{"add", "add a user who signs in with svc login", runUsersAdd},
	}},
	"usage": {summary: "calls, errors, tokens and latency of a deployment, by hour or day", verbs: []cliVerb{
		{"", "show a deployment's usage", runUsage},
	}},
	"edge-tokens": {summary: "tokens of svc edge processes (run on the control-plane host)", verbs: []cliVerb{
		{"create", "make an edge token (its plaintext is shown once)", runEdgeTokensCreate},
		{"list", "list the edge tokens", runEdgeTokensList},
		{"revoke", "revoke an edge token", runEdgeTokensRevoke},
	}},
}

// Run runs the CLI command name (deployments, keys, runs, evals, usage, jobs, models, login, orgs,
// projects, use, users, edge-tokens) and returns handled=false for any other name. It does not print its error:
// main prints it with Report. Errors are presented for people: a cloud error as a sentence followed by
// its code and status ("… (slug_taken, HTTP 409)"), a server that cannot be reached as such. --help
// prints usage on stdout and is not an error. ExitCode turns the error into the process's exit code.
func Run(ctx context.Context, name string, args []string, stdin io.Reader, stdout, stderr io.Writer) (handled bool, err error) {
	g, ok := cliGroups[name]
	if !ok {
		return false, nil
	}
	c := &cli{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr}
	err = c.dispatch(name, g, args)
	if errors.Is(err, errHelpShown) {
		return true, nil
	}
	return true, c.present(err)
}

// Report prints a failed command's error on w, first and alone: "error: <message>", and after a
// mistake on the command line one line saying where the usage is, rather than the usage itself.
func Report(w io.Writer, err error) {
	if err == nil {
		return
	}
	fmt.Fprintln(w, "error:", err)
	var ue *UsageError
	if errors.As(err, &ue) && ue.Help != "" {
		fmt.Fprintf(w, "run '%s --help' for usage\n", ue.Help)
	}
}

// cli is the state of one CLI invocation.
type cli struct {
	ctx            context.Context
	stdin          io.Reader
	stdout, stderr io.Writer

	// Global flags, registered on every verb's FlagSet.
	api    string
	asJSON bool

	// Overrides for tests; empty means the user's home and the working directory.
	credentialsPath string
	projectDir      string
}

// errHelpShown stops a command after its usage was printed for --help.
var errHelpShown = errors.New("help shown")

// Exit codes of every svc command, listed by `svc --help`.
const (
	ExitOK      = 0 // done; --help too
	ExitFailure = 1 // the service refused or failed, or a local file, the network or a listener did
	ExitUsage   = 2 // a mistake on the command line: unknown command or flag, missing argument
)

// UsageError is a mistake on the command line: Report prints it with a hint naming the command whose
// --help shows the usage (Help, e.g. "svc keys issue"; none when empty), and it exits with ExitUsage.
type UsageError struct {
	Msg, Help string
}

func (e *UsageError) Error() string { return e.Msg }

// ExitCode is the exit code of a command that returned err: ExitUsage for a UsageError,
// ExitOK for nil or a --help (flag.ErrHelp), ExitFailure for anything else, including every
// *cloudapi.Error.
func ExitCode(err error) int {
	var ue *UsageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp), errors.Is(err, errHelpShown):
		return ExitOK
	case errors.As(err, &ue):
		return ExitUsage
	}
	return ExitFailure
}

// Env returns the SVC_* environment variable of a flag (SVC_STUDIO_ADDR for studio-addr), or def.
func Env(flagName, def string) string {
	if v, ok := os.LookupEnv("SVC_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))); ok {
		return v
	}
	return def
}

func (c *cli) dispatch(name string, g cliGroup, args []string) error {
	// login and use have a single, unnamed verb: their flags follow the group name directly.
	if len(g.verbs) == 1 && g.verbs[0].name == "" {
		return g.verbs[0].run(c, args)
	}
	if len(args) == 0 {
		return &UsageError{Msg: "missing command: svc " + name + " " + verbNames(g), Help: "svc " + name}
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(c.stdout, groupUsage(name, g))
		return errHelpShown
	}
	for _, v := range g.verbs {
		if v.name == args[0] {
			return v.run(c, args[1:])
		}
	}
	return &UsageError{Msg: fmt.Sprintf("unknown command %q%s; the commands are %s", "svc "+name+" "+args[0], suggestVerb(name, g, args[0]), verbNames(g)), Help: "svc " + name}
}

// verbNames lists the commands of a group: "list | get | create".
func verbNames(g cliGroup) string {
	names := make([]string, len(g.verbs))
	for i, v := range g.verbs {
		names[i] = v.name
	}
	return strings.Join(names, " | ")
}

func groupUsage(name string, g cliGroup) string {
	var b strings.Builder
	fmt.Fprintf(&b, "svc %s: %s\n\nUsage:\n  svc %s <command> [flags]\n\nCommands:\n", name, g.summary, name)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, v := range g.verbs {
		fmt.Fprintf(tw, "  %s\t%s\n", v.name, v.summary)
	}
	tw.Flush()
	fmt.Fprintf(&b, "\nRun 'svc %s <command> --help' for the flags of a command.\n", name)
	return b.String()
}

// command is the FlagSet of one verb with its usage text.
type command struct {
	*flag.FlagSet
	synopsis string // e.g. "svc keys issue DEPLOYMENT --label LABEL"
	about    string
}

// name is the command without its arguments, as typed: "svc keys issue" of "svc keys issue DEPLOYMENT
// --label LABEL".
func (cmd *command) name() string {
	words := strings.Fields(cmd.synopsis)
	n := 0
	for n < len(words) && words[n] == strings.ToLower(words[n]) && !strings.ContainsAny(words[n][:1], "-[") {
		n++
	}
	return strings.Join(words[:n], " ")
}

// newCommand returns a FlagSet with the global flags --api and --json already registered.
func (c *cli) newCommand(synopsis, about string) *command {
	cmd := newLocalCommand(synopsis, about)
	api := os.Getenv("SVC_API")
	if api == "" {
		api = defaultAPIBaseURL
	}
	cmd.StringVar(&c.api, "api", api, "management API base URL (env SVC_API)")
	cmd.BoolVar(&c.asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

// DatabaseFlag registers --database on fs: what svc server stores its data in, read from
// SVC_DATABASE_URL so that a password need not show in a process list.
func DatabaseFlag(fs *flag.FlagSet) *string {
	return fs.String("database", os.Getenv("SVC_DATABASE_URL"), "the database: a postgres:// URL (PostgreSQL 15 or newer, for replicas) or the path of a SQLite file (env SVC_DATABASE_URL; default: svc.db in --data)")
}

// newLocalCommand returns a FlagSet without the global flags, for commands that call no API.
func newLocalCommand(synopsis, about string) *command {
	fs := flag.NewFlagSet(synopsis, flag.ContinueOnError)
	// Errors and usage are printed by Run, not by the flag package, so they all look alike.
	fs.SetOutput(io.Discard)
	return &command{FlagSet: fs, synopsis: synopsis, about: about}
}

func (cmd *command) usage() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "Usage:\n  %s\n\n%s\n\nFlags:\n", cmd.synopsis, cmd.about)
	cmd.SetOutput(&b)
	cmd.PrintDefaults()
	cmd.SetOutput(io.Discard)
	return b.String()
}

// parse parses flags placed anywhere among the positional arguments (the flag package alone stops at
// the first positional one, and `svc keys issue DEP --label ci` must work) and checks the count of
// positional arguments: exactly want, or at least want when variadic.
//
// A negative number standing alone ("-1", a SCORE) is a positional argument, never a flag: no flag of
// svc is named by digits, and `svc runs feedback DEP RUN -1` must not need "--". The value of a flag
// (`--min-score -1`) stays the flag's.
func (c *cli) parse(cmd *command, args []string, want int, variadic bool) ([]string, error) {
	args = markNegatives(cmd.FlagSet, args)
	pos, err := c.parseMarked(cmd, args, want, variadic)
	for i, p := range pos {
		pos[i] = strings.TrimPrefix(p, negativeMark)
	}
	return pos, err
}

// negativeMark is put before a negative number standing alone among the arguments, so that the flag
// package reads it as positional; parse takes it off again.
const negativeMark = "\x00"

// markNegatives returns args with each negative number that stands alone (not the value of the flag
// before it, and before any "--") marked with negativeMark.
func markNegatives(fs *flag.FlagSet, args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if _, err := strconv.ParseFloat(a, 64); err == nil && strings.HasPrefix(a, "-") {
			if out == nil {
				out = slices.Clone(args)
			}
			out[i] = negativeMark + a
			continue
		}
		name, hasValue := strings.CutPrefix(a, "-")
		if !hasValue || strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(strings.TrimPrefix(name, "-"))
		if f == nil {
			continue
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		i++ // the flag's value, whatever it looks like
	}
	if out == nil {
		return args
	}
	return out
}

func (c *cli) parseMarked(cmd *command, args []string, want int, variadic bool) ([]string, error) {
	var pos []string
	for {
		if err := cmd.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(c.stdout, cmd.usage())
				return nil, errHelpShown
			}
			return nil, cmd.fail("%s%s", FlagAsTyped(err.Error(), args), suggestFlag(cmd.FlagSet, err.Error()))
		}
		rest := cmd.Args()
		if len(rest) == 0 {
			break
		}
		// After "--" everything is positional.
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	switch {
	case len(pos) < want:
		return nil, cmd.fail("missing arguments: %s", cmd.synopsis)
	case len(pos) > want && !variadic:
		return nil, cmd.fail("unexpected argument %q", strings.TrimPrefix(pos[want], negativeMark))
	}
	return pos, nil
}

// FlagAsTyped rewrites the flag package's error so that it quotes the flag as the user typed it: the
// package always writes one dash ("flag provided but not defined: -slugg"), which for `--slugg` reads
// as if the CLI had misread the line.
func FlagAsTyped(msg string, args []string) string {
	for _, marker := range []string{"not defined: -", "argument: -", "for flag -"} {
		i := strings.Index(msg, marker)
		if i < 0 {
			continue
		}
		start := i + len(marker) - 1 // at the dash
		end := start + 1
		for end < len(msg) && msg[end] != ' ' && msg[end] != ':' {
			end++
		}
		name := msg[start+1 : end]
		for _, a := range args {
			if a == "--" {
				break
			}
			typed, _, _ := strings.Cut(a, "=")
			if strings.TrimLeft(typed, "-") == name && strings.HasPrefix(typed, "-") {
				return msg[:start] + typed + msg[end:]
			}
		}
	}
	return msg
}

// fail is a mistake on the command line of cmd, reported with a hint at its usage.
func (cmd *command) fail(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...), Help: cmd.name()}
}

// local resolves credentials and scope the way the studio does, with the working directory as the
// project directory.
func (c *cli) local() (*cloudapi.Local, error) {
	credPath := c.credentialsPath
	if credPath == "" {
		p, err := cloudapi.DefaultCredentialsPath()
		if err != nil {
			return nil, err
		}
		credPath = p
	}
	dir := c.projectDir
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		dir = wd
	}
	return &cloudapi.Local{
		APIBaseURL:      c.api,
		CredentialsPath: credPath,
		StatePath:       cloudapi.StatePath(dir),
	}, nil
}

// scopedArgs parses a command's flags and its want positional arguments, then returns the client scoped
// to this folder's project: the opening of most project commands.
func (c *cli) scopedArgs(cmd *command, args []string, want int, variadic bool) (*cloudapi.Client, []string, error) {
	pos, err := c.parse(cmd, args, want, variadic)
	if err != nil {
		return nil, nil, err
	}
	cl, err := c.scoped()
	return cl, pos, err
}

// scoped is a client for project routes: anonymous users get their project created on first use,
// signed-in users without .svc/state.json get missing_state.
func (c *cli) scoped() (*cloudapi.Client, error) {
	l, err := c.local()
	if err != nil {
		return nil, err
	}
	cl, err := l.ScopedClient(c.ctx)
	if err != nil {
		return nil, err
	}
	cl.UserAgent = "svc-cli"
	return cl, nil
}

// unscoped is a client for routes outside any project (the catalog).
func (c *cli) unscoped() (*cloudapi.Client, error) {
	l, err := c.local()
	if err != nil {
		return nil, err
	}
	cl, err := l.Client(c.ctx, true)
	if err != nil {
		return nil, err
	}
	cl.UserAgent = "svc-cli"
	return cl, nil
}

// hasState mirrors the studio's list rule: without .svc/state.json there is nothing to list, and
// listing must not create a project as a side effect. That holds for anonymous users, whose project
// the first create makes; a signed-in user gets missing_state, as create gives them, since an empty
// table would claim the project is empty.
func (c *cli) hasState() (bool, error) {
	l, err := c.local()
	if err != nil {
		return false, err
	}
	if l.HasState() {
		return true, nil
	}
	if creds, err := l.Credentials(c.ctx, false); err == nil && creds.Kind != cloudapi.KindAnonymous {
		return false, cloudapi.MissingStateError(l.StatePath)
	}
	fmt.Fprintf(c.stderr, "no project state (%s): nothing to list yet; the first create makes the project of an anonymous identity\n", l.StatePath)
	return false, nil
}

// deployment finds a deployment by id or, when no id matches, by slug: people remember slugs. A ref
// without "_" cannot be an id (ids are dep_…, slugs have no "_"), so it goes to the list at once and
// the server logs no 404 for a lookup that then succeeds.
func (c *cli) deployment(cl *cloudapi.Client, ref string) (*cloudapi.Deployment, error) {
	code := "not_found"
	if strings.Contains(ref, "_") {
		d, err := cl.GetDeployment(c.ctx, ref)
		var ae *cloudapi.Error
		if err == nil || !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
			return d, err
		}
		code = ae.Code
	}
	ds, err := cl.ListDeployments(c.ctx)
	if err != nil {
		return nil, err
	}
	for i := range ds {
		if ds[i].Slug == ref {
			return &ds[i], nil
		}
	}
	return nil, &cloudapi.Error{Status: http.StatusNotFound, Code: code,
		Message: fmt.Sprintf("no deployment %q in project %s/%s; give a deployment's id or slug (svc deployments list shows both)",
			ref, cl.OrgSlug, cl.ProjectSlug)}
}

// scopedDeployment is the client scoped to this folder's project and the id of the deployment ref
// names by id or slug: the opening of every command about one deployment.
func (c *cli) scopedDeployment(ref string) (*cloudapi.Client, string, error) {
	cl, err := c.scoped()
	if err != nil {
		return nil, "", err
	}
	d, err := c.deployment(cl, ref)
	if err != nil {
		return nil, "", err
	}
	return cl, d.ID, nil
}

// printJSON writes v indented, for --json and for scripts.
func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes aligned columns; the first row is the header.
func (c *cli) table(rows [][]string) error {
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// fields writes "name: value" lines, aligned.
func (c *cli) fields(pairs ...string) error {
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 1, ' ', 0)
	for i := 0; i+1 < len(pairs); i += 2 {
		fmt.Fprintf(tw, "%s:\t%s\n", pairs[i], pairs[i+1])
	}
	return tw.Flush()
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return fmtTime(*t)
}

func fmtBool(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}

// listScoped lists through the project of .svc/state.json, or returns an empty list without any request
// when there is no state file yet (as the studio does: no scope, nothing to list).
func listScoped[T any](c *cli, list func(*cloudapi.Client, context.Context) ([]T, error)) ([]T, error) {
	ok, err := c.hasState()
	if err != nil || !ok {
		return []T{}, err
	}
	cl, err := c.scoped()
	if err != nil {
		return nil, err
	}
	return list(cl, c.ctx)
}
