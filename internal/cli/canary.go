package cli

import (
	"context"
	"fmt"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/views"
)

// canaryGroup is `svc deployments canary ...` (docs/API.md, "Canary").
var canaryGroup = cliGroup{summary: "try a second target on a share of a deployment's sessions", verbs: []cliVerb{
	{"set", "set (or replace) a deployment's canary", runCanarySet},
	{"compare", "a canary's two arms side by side: calls, errors, latency, TTFT, tokens, feedback", runCanaryCompare},
	{"list", "the deployment's canaries, running and past, with their outcome", runCanaryList},
	{"promote", "make the canary the deployment's target, in one change", runCanaryPromote},
	{"end", "end the canary: every session on the target again", runCanaryEnd},
}}

func runDeploymentsCanary(c *cli, args []string) error {
	return c.dispatch("deployments canary", canaryGroup, args)
}

func runCanarySet(c *cli, args []string) error {
	cmd := c.newCommand("svc deployments canary set DEPLOYMENT --target T [--percent N] [--mode split|shadow]",
		"Sets a deployment's canary. --target takes the forms of svc deployments update --target,\n"+
			"checkpoint:<step> keeping the deployment's job. split answers N% of the sessions with the\n"+
			"canary, each session on one arm for all its turns (--percent is required); shadow answers every\n"+
			"call with the target and records the canary's answer to a copy of each (--percent is not needed).")
	target := cmd.String("target", "", "final[:<jobId>] | checkpoint:[<jobId>:]<step> | base:<model>")
	percent := cmd.Int("percent", 0, "share of sessions, 1 to 99 (split mode)")
	mode := cmd.String("mode", cloudapi.CanarySplit, "split or shadow")
	pos, err := c.parse(cmd, args, 1, false)
	if err != nil {
		return err
	}
	if *target == "" {
		return cmd.fail("--target is required")
	}
	if *percent == 0 && *mode != cloudapi.CanaryShadow {
		return cmd.fail("--percent is required in split mode (1 to 99); a --mode shadow canary copies every call and needs none")
	}
	cl, err := c.scoped()
	if err != nil {
		return err
	}
	cur, err := c.deployment(cl, pos[0])
	if err != nil {
		return err
	}
	t, err := cloudapi.ParseTarget(*target, cur.Target)
	if err != nil {
		return err
	}
	d, err := cl.SetCanary(c.ctx, cur.ID, cloudapi.Canary{Target: t, Percent: *percent, Mode: *mode})
	if err != nil {
		return err
	}
	return c.printDeployment(d)
}

func runCanaryPromote(c *cli, args []string) error {
	var override string
	return canaryChangeWith(c, args, "svc deployments canary promote DEPLOYMENT [--override REASON]",
		"Makes the canary's target the deployment's target and ends the canary, in one change. Under a\n"+
			"promotion gate it needs a passing eval of the canary's target (svc evals create), or --override\n"+
			"with the reason, which the canary history keeps.",
		func(cmd *command) {
			cmd.StringVar(&override, "override", "", "promote past the promotion gate, recording this reason")
		},
		func(cl *cloudapi.Client, ctx context.Context, id string) (*cloudapi.Deployment, error) {
			if override != "" {
				return cl.PromoteCanaryOverride(ctx, id, override)
			}
			return cl.PromoteCanary(ctx, id)
		})
}

func runCanaryEnd(c *cli, args []string) error {
	return canaryChange(c, args, "svc deployments canary end DEPLOYMENT",
		"Ends the canary: the deployment's target answers every session again.", (*cloudapi.Client).EndCanary)
}

// canaryChange runs a canary command that takes only the deployment: it looks the deployment up by id
// or slug, makes the change and prints the deployment after it.
func canaryChange(c *cli, args []string, usage, doc string, change func(*cloudapi.Client, context.Context, string) (*cloudapi.Deployment, error)) error {
	return canaryChangeWith(c, args, usage, doc, nil, change)
}

// canaryChangeWith is canaryChange with flags of its own (flags registers them, when set).
func canaryChangeWith(c *cli, args []string, usage, doc string, flags func(*command), change func(*cloudapi.Client, context.Context, string) (*cloudapi.Deployment, error)) error {
	cmd := c.newCommand(usage, doc)
	if flags != nil {
		flags(cmd)
	}
	cl, pos, err := c.scopedArgs(cmd, args, 1, false)
	if err != nil {
		return err
	}
	cur, err := c.deployment(cl, pos[0])
	if err != nil {
		return err
	}
	if cur.Canary == nil {
		// Said here in the CLI's words: the API's own message names its PATCH.
		return fmt.Errorf("%s has no canary: start one with svc deployments canary set %s --target T --percent N", cur.Slug, pos[0])
	}
	d, err := change(cl, c.ctx, cur.ID)
	if err != nil {
		return err
	}
	return c.printDeployment(d)
}

func runCanaryCompare(c *cli, args []string) error {
	cmd := c.newCommand("svc deployments canary compare DEPLOYMENT [CANARY] [--days N]",
		"Shows the arms of a canary side by side, counting only the calls made under it: CANARY is a\n"+
			"canary id (svc deployments canary list), by default the running canary, else the last one.\n"+
			"--days N instead shows every call made under a canary in the last N days, by arm.")
	days := cmd.Int("days", 0, "every canary's calls of the last N days (1 to 400), by arm")
	pos, err := c.parse(cmd, args, 1, true)
	if err != nil {
		return err
	}
	if len(pos) > 2 {
		return cmd.fail("at most DEPLOYMENT and CANARY")
	}
	if *days != 0 {
		return canaryCompareDays(c, cmd, pos[0], *days)
	}
	cl, id, err := c.scopedDeployment(pos[0])
	if err != nil {
		return err
	}
	var r *cloudapi.CanaryRecord
	if len(pos) == 2 {
		if r, err = cl.GetCanary(c.ctx, id, pos[1]); err != nil {
			return err
		}
	} else {
		list, err := cl.ListCanaries(c.ctx, id)
		if err != nil {
			return err
		}
		if len(list) == 0 {
			fmt.Fprintln(c.stdout, "This deployment never had a canary.")
			return nil
		}
		r = &list[0] // the running canary, else the last: the list is newest first
	}
	if c.asJSON {
		return c.printJSON(r)
	}
	fmt.Fprintln(c.stdout, canaryLine(r))
	arms := make([]armFigures, len(r.Compare))
	for i, a := range r.Compare {
		arms[i] = armFigures{a.Arm, a.Target, a.ArmStats}
	}
	return c.armTable(arms, "No calls answered under this canary yet.")
}

// armFigures is one arm of a comparison: its name, its target and its figures.
type armFigures struct {
	arm, target string
	stats       cloudapi.ArmStats
}

// armTable prints arms under armHeader, or none when there are none.
func (c *cli) armTable(arms []armFigures, none string) error {
	if len(arms) == 0 {
		fmt.Fprintln(c.stdout, none)
		return nil
	}
	rows := [][]string{armHeader}
	for _, a := range arms {
		rows = append(rows, armRow(a.arm, a.target, a.stats))
	}
	return c.table(rows)
}

var armHeader = []string{"ARM", "TARGET", "REQUESTS", "ERRORS", "LATENCY P50", "P95", "TTFT P50", "P95", "TOKENS IN", "TOKENS OUT", "GOOD/BAD"}

func armRow(arm, target string, s cloudapi.ArmStats) []string {
	return []string{arm, target, itoa64(s.Requests), itoa64(s.Errors),
		views.LatencyMs(s.LatencyP50Ms, s.LatencyErrorPct), views.LatencyMs(s.LatencyP95Ms, s.LatencyErrorPct),
		views.LatencyMs(s.TTFTP50Ms, s.TTFTErrorPct), views.LatencyMs(s.TTFTP95Ms, s.TTFTErrorPct),
		itoa64(s.PromptTokens), itoa64(s.CompletionTokens), itoa64(s.Feedback.Up) + "/" + itoa64(s.Feedback.Down)}
}

// canaryLine is a canary of the history on one line: its id, mode and target, start, and outcome.
func canaryLine(r *cloudapi.CanaryRecord) string {
	line := fmt.Sprintf("canary %s: %s, started %s", r.ID, fmtCanary(&r.Canary), r.StartedAt.UTC().Format("2006-01-02 15:04 UTC"))
	if r.EndedAt != nil {
		line += fmt.Sprintf(", %s %s", r.Outcome, r.EndedAt.UTC().Format("2006-01-02 15:04 UTC"))
	} else {
		line += ", " + r.Outcome
	}
	return line
}

// canaryCompareDays is compare --days: every call made under a canary in the range, by arm and target.
func canaryCompareDays(c *cli, cmd *command, deployment string, days int) error {
	opts, err := usageWindow(cmd, days)
	if err != nil {
		return err
	}
	cl, id, err := c.scopedDeployment(deployment)
	if err != nil {
		return err
	}
	u, err := cl.GetDeploymentUsageByArm(c.ctx, id, opts)
	if err != nil {
		return err
	}
	if c.asJSON {
		return c.printJSON(u)
	}
	arms := make([]armFigures, len(u.Arms))
	for i, a := range u.Arms {
		arms[i] = armFigures{a.Arm, a.Target, a.Totals}
	}
	return c.armTable(arms, "No calls answered under a canary in this range.")
}

func runCanaryList(c *cli, args []string) error {
	cmd := c.newCommand("svc deployments canary list DEPLOYMENT",
		"Lists a deployment's canaries, newest first: the running one and the past ones, each with its\n"+
			"outcome (promoted, ended, replaced) and its calls per arm.")
	cl, pos, err := c.scopedArgs(cmd, args, 1, false)
	if err != nil {
		return err
	}
	cur, err := c.deployment(cl, pos[0])
	if err != nil {
		return err
	}
	list, err := cl.ListCanaries(c.ctx, cur.ID)
	if err != nil {
		return err
	}
	if c.asJSON {
		return c.printJSON(cloudapi.CanaryList{Canaries: list})
	}
	if len(list) == 0 {
		fmt.Fprintln(c.stdout, "This deployment never had a canary.")
		return nil
	}
	rows := [][]string{{"ID", "MODE", "TARGET", "STARTED (UTC)", "OUTCOME", "PRIMARY CALLS", "CANARY CALLS"}}
	for i := range list {
		r := &list[i]
		calls := func(arm string) string {
			if a := r.Arm(arm); a != nil {
				return itoa64(a.Requests)
			}
			return "0"
		}
		rows = append(rows, []string{r.ID, r.Mode, r.Target.Shorthand(), r.StartedAt.UTC().Format("2006-01-02 15:04"), r.Outcome,
			calls(cloudapi.ArmPrimary), calls(cloudapi.ArmCanary)})
	}
	return c.table(rows)
}

// fmtCanary is a deployment's canary on one line, "none" without one.
func fmtCanary(cn *cloudapi.Canary) string {
	if cn == nil {
		return "none"
	}
	return fmt.Sprintf("%s, %s  [%s]", cn.Target.Summary(), cn.Share(), cn.Target.Shorthand())
}
