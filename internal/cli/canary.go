package cli

import (
	"context"
	"fmt"

	"github.com/svcdev/svc/cloudapi"
)

// canaryGroup is `svc deployments canary ...` (docs/API.md, "Canary").
var canaryGroup = cliGroup{summary: "try a second target on a share of a deployment's sessions", verbs: []cliVerb{
	{"set", "set (or replace) a deployment's canary", runCanarySet},
	{"compare", "the two arms side by side: calls, errors, latency, TTFT, tokens", runCanaryCompare},
	{"promote", "make the canary the deployment's target, in one change", runCanaryPromote},
	{"end", "end the canary: every session on the target again", runCanaryEnd},
}}

func runDeploymentsCanary(c *cli, args []string) error {
	return c.dispatch("deployments canary", canaryGroup, args)
}

func runCanarySet(c *cli, args []string) error {
	cmd := c.newCommand("svc deployments canary set DEPLOYMENT --target T --percent N [--mode split|shadow]",
		"Sets a deployment's canary. --target takes the forms of svc deployments update --target,\n"+
			"checkpoint:<step> keeping the deployment's job. split answers N% of the sessions with the\n"+
			"canary, each session on one arm for all its turns; shadow answers every call with the target\n"+
			"and records the canary's answer to a copy.")
	target := cmd.String("target", "", "final[:<jobId>] | checkpoint:[<jobId>:]<step> | base:<model>")
	percent := cmd.Int("percent", 0, "share of sessions, 1 to 99")
	mode := cmd.String("mode", cloudapi.CanarySplit, "split or shadow")
	pos, err := c.parse(cmd, args, 1, false)
	if err != nil {
		return err
	}
	if *target == "" || *percent == 0 {
		return cmd.fail("--target and --percent are required")
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
	return canaryChange(c, args, "svc deployments canary promote DEPLOYMENT",
		"Makes the canary's target the deployment's target and ends the canary, in one change.", (*cloudapi.Client).PromoteCanary)
}

func runCanaryEnd(c *cli, args []string) error {
	return canaryChange(c, args, "svc deployments canary end DEPLOYMENT",
		"Ends the canary: the deployment's target answers every session again.", (*cloudapi.Client).EndCanary)
}

// canaryChange runs a canary command that takes only the deployment: it looks the deployment up by id
// or slug, makes the change and prints the deployment after it.
func canaryChange(c *cli, args []string, usage, doc string, change func(*cloudapi.Client, context.Context, string) (*cloudapi.Deployment, error)) error {
	cmd := c.newCommand(usage, doc)
	cl, pos, err := c.scopedArgs(cmd, args, 1, false)
	if err != nil {
		return err
	}
	cur, err := c.deployment(cl, pos[0])
	if err != nil {
		return err
	}
	d, err := change(cl, c.ctx, cur.ID)
	if err != nil {
		return err
	}
	return c.printDeployment(d)
}

func runCanaryCompare(c *cli, args []string) error {
	cmd := c.newCommand("svc deployments canary compare DEPLOYMENT [--days N]",
		"Shows the arms of a deployment's canary side by side over the last 24 hours (--days: longer).")
	days := cmd.Int("days", 1, "how many days back, 1 to 400")
	pos, err := c.parse(cmd, args, 1, false)
	if err != nil {
		return err
	}
	opts, err := usageWindow(cmd, *days)
	if err != nil {
		return err
	}
	cl, id, err := c.scopedDeployment(pos[0])
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
	rows := [][]string{{"ARM", "TARGET", "REQUESTS", "ERRORS", "LATENCY P50", "P95", "TTFT P50", "P95", "TOKENS IN", "TOKENS OUT"}}
	for _, a := range u.Arms {
		s := a.Totals
		rows = append(rows, []string{a.Arm, a.Target, itoa64(s.Requests), itoa64(s.Errors),
			fmtMs(s.LatencyP50Ms), fmtMs(s.LatencyP95Ms), fmtMs(s.TTFTP50Ms), fmtMs(s.TTFTP95Ms),
			itoa64(s.PromptTokens), itoa64(s.CompletionTokens)})
	}
	if len(u.Arms) == 0 {
		fmt.Fprintln(c.stdout, "No calls answered under a canary in this range.")
		return nil
	}
	return c.table(rows)
}

// fmtCanary is a deployment's canary on one line, "none" without one.
func fmtCanary(cn *cloudapi.Canary) string {
	if cn == nil {
		return "none"
	}
	return fmt.Sprintf("%s, %d%% %s  [%s]", cn.Target.Summary(), cn.Percent, cn.Mode, cn.Target.Shorthand())
}
