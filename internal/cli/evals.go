package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/svcdev/svc/cloudapi"
)

// evalsGroup is `svc evals ...` (docs/API.md, "Evals").
var evalsGroup = cliGroup{summary: "replay a deployment's stored runs against a candidate target and compare", verbs: []cliVerb{
	{"create", "start an eval (--wait follows it to its summary)", runEvalsCreate},
	{"list", "list a deployment's evals, newest first", runEvalsList},
	{"get", "show an eval with its progress and summary (--watch follows it)", runEvalsGet},
	{"results", "the runs an eval replayed: both answers, checks, verdict", runEvalsResults},
	{"cancel", "stop an eval: no more runs are replayed", runEvalsCancel},
	{"export", "write an eval's judged pairs as preference lines (> prefs.jsonl)", runEvalsExport},
}}

// evalPoll is how often --wait and --watch read an eval's progress.
const evalPoll = time.Second

func runEvalsCreate(c *cli, args []string) error {
	cmd := c.newCommand("svc evals create DEPLOYMENT [--candidate T] [--since 7d] [--until T] [--arm primary|canary] [--status ok|all] [--min-score N] [--limit N] [--judge MODEL [--rubric TEXT]] [--concurrency N] [--wait]",
		"Replays a deployment's stored runs (those svc runs export would write with the same filters, the\n"+
			"oldest first) against a candidate target and compares the answers. --candidate takes the forms of\n"+
			"svc deployments update --target; by default the deployment's canary target. --judge names a model\n"+
			"svc serves that compares each pair (asked twice, the answers swapped). --wait prints a progress\n"+
			"line until the eval ends, then its summary.")
	candidate := cmd.String("candidate", "", "final[:<jobId>] | checkpoint:[<jobId>:]<step> | base:<model> (default: the canary's target)")
	since := cmd.String("since", "", "runs made since this time, date or duration ago")
	until := cmd.String("until", "", "runs made before this time or duration ago, or up to the end of this date")
	arm := cmd.String("arm", "", "primary or canary (default: the calls clients made)")
	status := cmd.String("status", "", "ok (complete answers, the default) or all (cut ones too)")
	minScore := cmd.String("min-score", "", "only runs whose feedback scored this or more (-1, 0 or 1; unscored count 0)")
	limit := cmd.Int("limit", 0, "at most this many runs (0: the server's default, 100)")
	judge := cmd.String("judge", "", "a model id svc serves that judges each pair")
	rubric := cmd.String("rubric", "", "what the judge prefers (with --judge)")
	concurrency := cmd.Int("concurrency", 0, "replays under way at once, across every server sharing the store (0: the server's default, 4)")
	wait := cmd.Bool("wait", false, "follow the eval until it ends, then print its summary")
	pos, err := c.parse(cmd, args, 1, false)
	if err != nil {
		return err
	}
	req := cloudapi.CreateEvalRequest{Runs: cloudapi.EvalRuns{Arm: *arm, Status: *status, Limit: *limit}, Concurrency: *concurrency}
	now := time.Now()
	for _, f := range []struct {
		name, v string
		into    **time.Time
		end     bool
	}{{"since", *since, &req.Runs.Since, false}, {"until", *until, &req.Runs.Until, true}} {
		if f.v == "" {
			continue
		}
		t, err := timeOrAgo(f.v, now, f.end)
		if err != nil {
			return cmd.fail("--%s: %v", f.name, err)
		}
		*f.into = &t
	}
	if *minScore != "" {
		n, err := strconv.Atoi(*minScore)
		if err != nil {
			return cmd.fail("--min-score must be -1, 0 or 1 (got %q)", *minScore)
		}
		req.Runs.MinScore = &n
	}
	if *judge != "" {
		req.Judge = &cloudapi.EvalJudge{Model: *judge, Rubric: *rubric}
	} else if *rubric != "" {
		return cmd.fail("--rubric goes with --judge")
	}
	cl, err := c.scoped()
	if err != nil {
		return err
	}
	cur, err := c.deployment(cl, pos[0])
	if err != nil {
		return err
	}
	switch {
	case *candidate != "":
		if req.Candidate, err = cloudapi.ParseTarget(*candidate, cur.Target); err != nil {
			return err
		}
	case cur.Canary != nil:
		req.Candidate = cur.Canary.Target
	default:
		return cmd.fail("--candidate is required: %s has no canary whose target to take", cur.Slug)
	}
	e, err := cl.CreateEval(c.ctx, cur.ID, req)
	if err != nil {
		return err
	}
	if *wait {
		if e, err = c.followEval(cl, cur.ID, e); err != nil {
			return err
		}
	}
	return c.printEval(e)
}

// followEval reads an eval's progress until it ends, printing a line on stderr whenever it moves.
func (c *cli) followEval(cl *cloudapi.Client, deploymentID string, e *cloudapi.Eval) (*cloudapi.Eval, error) {
	last := ""
	for {
		line := progressLine(e)
		if line != last {
			fmt.Fprintln(c.stderr, line)
			last = line
		}
		if e.Finished() {
			return e, nil
		}
		select {
		case <-c.ctx.Done():
			return nil, c.ctx.Err()
		case <-time.After(evalPoll):
		}
		var err error
		if e, err = cl.GetEval(c.ctx, deploymentID, e.ID); err != nil {
			return nil, err
		}
	}
}

// progressLine is an eval's progress in one line: "eval_… running: 34/120 replayed, 1 failed (28%)".
func progressLine(e *cloudapi.Eval) string {
	p := e.Progress
	pct := 100
	if p.Total > 0 {
		pct = 100 * (p.Done + p.Failed) / p.Total
	}
	return fmt.Sprintf("%s %s: %d/%d replayed, %d failed (%d%%)", e.ID, e.State, p.Done, p.Total, p.Failed, pct)
}

func runEvalsList(c *cli, args []string) error {
	cmd := c.newCommand("svc evals list DEPLOYMENT [--limit N] [--cursor C]", "Lists a deployment's evals, newest first.")
	limit := cmd.Int("limit", 0, "page size (0: the server's default)")
	cursor := cmd.String("cursor", "", "the next cursor printed by the previous page")
	pos, err := c.parse(cmd, args, 1, false)
	if err != nil {
		return err
	}
	cl, id, err := c.scopedDeployment(pos[0])
	if err != nil {
		return err
	}
	page, err := cl.ListEvals(c.ctx, id, cloudapi.ListOptions{Limit: *limit, Cursor: *cursor})
	if err != nil {
		return err
	}
	if c.asJSON {
		return c.printJSON(page)
	}
	rows := [][]string{{"ID", "STATE", "CANDIDATE", "PROGRESS", "IDENTICAL", "PASSED", "CREATED"}}
	for _, e := range page.Evals {
		identical, passed := "-", "-"
		if s := e.Summary; s != nil {
			identical = fmt.Sprintf("%d/%d", s.Identical, s.Pairs)
			passed = fmtBool(s.Passed, "yes", "no")
		}
		rows = append(rows, []string{e.ID, e.State, e.Candidate.Shorthand(),
			fmt.Sprintf("%d/%d (%d failed)", e.Progress.Done, e.Progress.Total, e.Progress.Failed), identical, passed, fmtTime(e.CreatedAt)})
	}
	return c.tablePage(rows, page.NextCursor)
}

func runEvalsGet(c *cli, args []string) error {
	cmd := c.newCommand("svc evals get DEPLOYMENT EVAL [--watch]", "Shows an eval: its candidate, progress and, once done, its summary. --watch prints a progress\nline until it ends.")
	watch := cmd.Bool("watch", false, "follow the eval until it ends")
	pos, err := c.parse(cmd, args, 2, false)
	if err != nil {
		return err
	}
	cl, id, err := c.scopedDeployment(pos[0])
	if err != nil {
		return err
	}
	e, err := cl.GetEval(c.ctx, id, pos[1])
	if err != nil {
		return err
	}
	if *watch {
		if e, err = c.followEval(cl, id, e); err != nil {
			return err
		}
	}
	return c.printEval(e)
}

func runEvalsResults(c *cli, args []string) error {
	cmd := c.newCommand("svc evals results DEPLOYMENT EVAL [--limit N] [--cursor C]",
		"Lists the runs an eval replayed, in their order: the source run, whether the answers are identical,\n"+
			"the checks each side passed, the judge's verdict and both answers (--json for the whole of them).")
	limit := cmd.Int("limit", 0, "page size (0: the server's default)")
	cursor := cmd.String("cursor", "", "the next cursor printed by the previous page")
	pos, err := c.parse(cmd, args, 2, false)
	if err != nil {
		return err
	}
	cl, id, err := c.scopedDeployment(pos[0])
	if err != nil {
		return err
	}
	page, err := cl.EvalResults(c.ctx, id, pos[1], cloudapi.ListOptions{Limit: *limit, Cursor: *cursor})
	if err != nil {
		return err
	}
	if c.asJSON {
		return c.printJSON(page)
	}
	rows := [][]string{{"RUN", "IDENTICAL", "CHECKS (BASELINE/CANDIDATE)", "VERDICT", "BASELINE", "CANDIDATE"}}
	for _, r := range page.Results {
		verdict := "-"
		if r.Verdict != nil {
			verdict = *r.Verdict
		}
		var checks []string
		for _, ch := range r.Checks {
			checks = append(checks, fmt.Sprintf("%s %s/%s", ch.Name, passMark(ch.Baseline), passMark(ch.Candidate)))
		}
		cand := short(r.CandidateAnswer)
		if r.Error != "" {
			cand = "error: " + short(r.Error)
		}
		rows = append(rows, []string{r.RunID, fmtBool(r.Identical, "yes", "no"), strings.Join(checks, ", "), verdict, short(r.BaselineAnswer), cand})
	}
	return c.tablePage(rows, page.NextCursor)
}

func runEvalsCancel(c *cli, args []string) error {
	cmd := c.newCommand("svc evals cancel DEPLOYMENT EVAL", "Stops an eval: no more runs are replayed; those under way finish.")
	cl, pos, err := c.scopedArgs(cmd, args, 2, false)
	if err != nil {
		return err
	}
	d, err := c.deployment(cl, pos[0])
	if err != nil {
		return err
	}
	e, err := cl.CancelEval(c.ctx, d.ID, pos[1])
	if err != nil {
		return err
	}
	return c.printEval(e)
}

func runEvalsExport(c *cli, args []string) error {
	cmd := c.newCommand("svc evals export DEPLOYMENT EVAL > prefs.jsonl",
		"Writes an eval's judged pairs to standard output as OpenAI preference lines: for each pair the judge\n"+
			"ranked, the source run's conversation, the answer it preferred and the other. Ties are left out; what\n"+
			"was written and left out goes to standard error. The eval needs a judge.")
	pos, err := c.parse(cmd, args, 2, false)
	if err != nil {
		return err
	}
	cl, id, err := c.scopedDeployment(pos[0])
	if err != nil {
		return err
	}
	x, err := cl.ExportEval(c.ctx, id, pos[1])
	if err != nil {
		return err
	}
	return c.writeExport(x, true)
}

func (c *cli) printEval(e *cloudapi.Eval) error {
	if c.asJSON {
		return c.printJSON(e)
	}
	pairs := []string{
		"id", e.ID,
		"state", e.State,
		"candidate", e.Candidate.Summary() + "  [" + e.Candidate.Shorthand() + "]",
		"baseline", e.Baseline.Summary() + "  [" + e.Baseline.Shorthand() + "]",
		"progress", fmt.Sprintf("%d/%d replayed, %d failed", e.Progress.Done, e.Progress.Total, e.Progress.Failed),
		"created", fmtTime(e.CreatedAt),
		"finished", fmtTimePtr(e.FinishedAt),
	}
	if e.Judge != nil {
		pairs = append(pairs, "judge", e.Judge.Model)
	}
	if e.Error != "" {
		pairs = append(pairs, "error", e.Error)
	}
	if s := e.Summary; s != nil {
		pairs = append(pairs,
			"identical", fmt.Sprintf("%d of %d pairs", s.Identical, s.Pairs),
			"checks", fmt.Sprintf("baseline %d passed, %d failed; candidate %d passed, %d failed",
				s.Checks.Baseline.Passed, s.Checks.Baseline.Failed, s.Checks.Candidate.Passed, s.Checks.Candidate.Failed))
		if len(s.Regressed) > 0 {
			pairs = append(pairs, "regressed", strings.Join(s.Regressed, ", "))
		}
		if j := s.Judged; j != nil {
			pairs = append(pairs, "judged", fmt.Sprintf("%d wins, %d ties, %d losses: win rate %.2f (95%% %.2f–%.2f)",
				j.Wins, j.Ties, j.Losses, j.WinRate, j.WinRateLow, j.WinRateHigh))
		}
		if a := s.Agreement; a != nil {
			pairs = append(pairs, "agreement", fmt.Sprintf("the judge agrees with recorded feedback on %d of %d runs", a.Agree, a.Runs))
		}
		pairs = append(pairs, "passed", fmtBool(s.Passed, "yes", "no"))
	}
	return c.fields(pairs...)
}

func passMark(ok bool) string { return fmtBool(ok, "pass", "FAIL") }

// short is an answer on one line, at most 60 characters.
func short(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 60 {
		return string(r[:59]) + "…"
	}
	return s
}

// tablePage writes rows as a table, then the cursor of the next page when there is one.
func (c *cli) tablePage(rows [][]string, next string) error {
	if err := c.table(rows); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(c.stdout, "next: --cursor %s\n", next)
	}
	return nil
}
