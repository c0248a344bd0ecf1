package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
)

func runDeploymentsList(c *cli, args []string) error {
	cmd := c.newCommand("svc deployments list", "Lists the deployments of the project named in .svc/state.json.")
	if _, err := c.parse(cmd, args, 0, false); err != nil {
		return err
	}
	ds, err := listScoped(c, (*cloudapi.Client).ListDeployments)
	if err != nil {
		return err
	}
	if c.asJSON {
		return c.printJSON(ds)
	}
	rows := [][]string{{"ID", "SLUG", "TARGET", "CANARY", "AUTH", "STATUS", "RETENTION", "URL"}}
	for _, d := range ds {
		canary := "-"
		if cn := d.Canary; cn != nil {
			canary = cn.Target.Shorthand() + " " + cn.Share()
		}
		rows = append(rows, []string{d.ID, d.Slug, d.Target.Summary(), canary, d.AuthMode,
			fmtBool(d.Enabled, "enabled", "disabled"), fmtRetention(d.RunRetentionMode, d.RunRetentionDays), d.URL})
	}
	return c.table(rows)
}

func runDeploymentsGet(c *cli, args []string) error {
	cmd := c.newCommand("svc deployments get DEPLOYMENT", "Shows one deployment. DEPLOYMENT is its id or its slug.")
	cl, pos, err := c.scopedArgs(cmd, args, 1, false)
	if err != nil {
		return err
	}
	d, err := c.deployment(cl, pos[0])
	if err != nil {
		return err
	}
	return c.printDeployment(d)
}

func runDeploymentsCreate(c *cli, args []string) error {
	cmd := c.newCommand("svc deployments create --slug SLUG --target TARGET [--auth MODE] [--retention R] [--budget-tokens N --budget-period day|month]",
		"Creates a deployment. TARGET is final:<jobId>, checkpoint:<jobId>:<step>, base:<model> or multi.")
	slug := cmd.String("slug", "", "subdomain: 2-50 of a-z, 0-9 and -, no leading or trailing -")
	target := cmd.String("target", "", "final:<jobId> | checkpoint:<jobId>:<step> | base:<model> | multi")
	auth := cmd.String("auth", "", "fixed_api_key (server default) or none")
	retention := cmd.String("retention", "", "days:N (1-365, server default days:7) | unlimited | none")
	budget := cmd.budgetFlags()
	queueTimeout := cmd.String("queue-timeout-ms", "", "how long a call may wait for its model's turn, in ms (default: the model's queueTimeoutMs)")
	if _, err := c.parse(cmd, args, 0, false); err != nil {
		return err
	}
	b, removed, err := budget.set(cmd)
	if err != nil {
		return err
	}
	if removed {
		return cmd.fail("--budget-tokens none removes a budget (svc deployments update); a new deployment without a budget needs no flag")
	}
	if *slug == "" || *target == "" {
		return cmd.fail("--slug and --target are required")
	}
	// Creation has no current target, so the forms that mean "the current job" are refused here.
	t, err := cloudapi.ParseTarget(*target, cloudapi.Target{})
	if err != nil {
		return err
	}
	req := cloudapi.CreateDeploymentRequest{Slug: *slug, Target: t, AuthMode: *auth, Budget: b}
	if *queueTimeout != "" {
		q, err := parseQueueTimeout(cmd, *queueTimeout)
		if err != nil {
			return err
		}
		v, _ := q.Get()
		if v == nil {
			return cmd.fail("a new deployment waits as its model says without --queue-timeout-ms; model is for svc deployments update")
		}
		req.QueueTimeoutMs = v
	}
	if *retention != "" {
		mode, days, err := parseRetention(*retention)
		if err != nil {
			return cmd.fail("%v", err)
		}
		req.RunRetentionMode, req.RunRetentionDays = mode, days
	}
	cl, err := c.scoped()
	if err != nil {
		return err
	}
	d, err := cl.CreateDeployment(c.ctx, req)
	if err != nil {
		return err
	}
	return c.printDeployment(d)
}

func runDeploymentsUpdate(c *cli, args []string) error {
	cmd := c.newCommand("svc deployments update DEPLOYMENT [--enable | --disable] [--auth MODE] [--retention R] [--target T [--override REASON]] [--rpm N|none] [--tpm N|none] [--budget-tokens N|none --budget-period day|month] [--queue-timeout-ms N|model] [--promote-gate MIN[:HOURS]|none]",
		"Changes only the settings given. DEPLOYMENT is its id or its slug. --target also takes the\n"+
			"shorthands final and checkpoint:<step>, which keep the deployment's current job. --rpm and\n"+
			"--tpm set the rate limits (none: unlimited); --budget-tokens and --budget-period the token\n"+
			"budget (none: no budget). --promote-gate 0.5:72 makes a new target need a done\n"+
			"eval of it, at most 72 hours old, whose win rate's lower bound is 0.5 or more and which regressed\n"+
			"no check (svc evals); --override REASON changes the target past the gate, recorded.")
	enable := cmd.Bool("enable", false, "serve again")
	disable := cmd.Bool("disable", false, "stop serving (the edge answers 404; the slug stays reserved)")
	auth := cmd.String("auth", "", "fixed_api_key or none")
	retention := cmd.String("retention", "", "days:N (1-365) | unlimited | none")
	target := cmd.String("target", "", "final[:<jobId>] | checkpoint:[<jobId>:]<step> | base:<model> | multi")
	limits := cmd.limitFlags()
	gate := cmd.String("promote-gate", "", "MIN[:HOURS]: a new target needs an eval with a win rate's lower bound of MIN (0 to 1) at most HOURS old (0: any); none removes the gate")
	override := cmd.String("override", "", "with --target: change the target past the promotion gate, recording this reason")
	budget := cmd.budgetFlags()
	queueTimeout := cmd.String("queue-timeout-ms", "", "how long a call may wait for its model's turn, in ms; model: the model's queueTimeoutMs")
	pos, err := c.parse(cmd, args, 1, false)
	if err != nil {
		return err
	}
	var req cloudapi.UpdateDeploymentRequest
	if req.Limits, err = limits.update(cmd); err != nil {
		return err
	}
	if *gate != "" {
		if req.PromoteGate, err = parseGate(*gate); err != nil {
			return cmd.fail("--promote-gate: %v", err)
		}
	}
	if *override != "" {
		if *target == "" {
			return cmd.fail("--override goes with --target")
		}
		req.Override = &cloudapi.Override{Reason: *override}
	}
	if req.Budget, err = budget.update(cmd); err != nil {
		return err
	}
	if *queueTimeout != "" {
		if req.QueueTimeoutMs, err = parseQueueTimeout(cmd, *queueTimeout); err != nil {
			return err
		}
	}
	switch {
	case *enable && *disable:
		return cmd.fail("--enable and --disable exclude each other")
	case *enable, *disable:
		req.Enabled = enable
	}
	if *auth != "" {
		req.AuthMode = auth
	}
	if *retention != "" {
		mode, days, err := parseRetention(*retention)
		if err != nil {
			return cmd.fail("%v", err)
		}
		req.RunRetentionMode = &mode
		if mode == cloudapi.RetentionDays {
			req.RunRetentionDays = &days
		}
	}
	if req == (cloudapi.UpdateDeploymentRequest{}) && *target == "" {
		return cmd.fail("nothing to update: give at least one of --enable, --disable, --auth, --retention, --target, --rpm, --tpm, --budget-tokens, --queue-timeout-ms, --promote-gate")
	}
	cl, err := c.scoped()
	if err != nil {
		return err
	}
	cur, err := c.deployment(cl, pos[0])
	if err != nil {
		return err
	}
	if *target != "" {
		// The same resolution as RetargetDeployment, but sent in one PATCH with the other changes.
		t, err := cloudapi.ParseTarget(*target, cur.Target)
		if err != nil {
			return err
		}
		req.Target = &t
	}
	d, err := cl.UpdateDeployment(c.ctx, cur.ID, req)
	if err != nil {
		return err
	}
	return c.printDeployment(d)
}

func runDeploymentsDelete(c *cli, args []string) error {
	cmd := c.newCommand("svc deployments delete DEPLOYMENT", "Deletes a deployment with its keys and stored runs. DEPLOYMENT is its id or its slug.")
	cl, pos, err := c.scopedArgs(cmd, args, 1, false)
	if err != nil {
		return err
	}
	d, err := c.deployment(cl, pos[0])
	if err != nil {
		return err
	}
	if err := cl.DeleteDeployment(c.ctx, d.ID); err != nil {
		return err
	}
	if c.asJSON {
		return c.printJSON(map[string]any{"id": d.ID, "slug": d.Slug, "deleted": true})
	}
	fmt.Fprintf(c.stdout, "deleted %s (%s)\n", d.Slug, d.ID)
	return nil
}

func runDeploymentsBulk(c *cli, args []string) error {
	cmd := c.newCommand("svc deployments bulk --action enable|disable|delete DEPLOYMENT...",
		"Applies one action to many deployments. Exits non-zero if any of them failed.")
	action := cmd.String("action", "", "enable, disable or delete")
	ids, err := c.parse(cmd, args, 1, true)
	if err != nil {
		return err
	}
	if *action == "" {
		return cmd.fail("--action is required")
	}
	cl, err := c.scoped()
	if err != nil {
		return err
	}
	results, err := cl.BulkDeployments(c.ctx, cloudapi.BulkRequest{IDs: ids, Action: *action})
	if err != nil {
		return err
	}
	failed := 0
	rows := [][]string{{"ID", "RESULT"}}
	for _, r := range results {
		res := "ok"
		if !r.OK {
			failed++
			res = "failed"
			if r.Error != nil {
				res = fmt.Sprintf("%s (%s, HTTP %d)", r.Error.Message, r.Error.Code, r.Error.Status)
			}
		}
		rows = append(rows, []string{r.ID, res})
	}
	if c.asJSON {
		err = c.printJSON(results)
	} else {
		err = c.table(rows)
	}
	if err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d deployments failed", failed, len(results))
	}
	return nil
}

func (c *cli) printDeployment(d *cloudapi.Deployment) error {
	if c.asJSON {
		return c.printJSON(d)
	}
	return c.fields(
		"id", d.ID,
		"slug", d.Slug,
		"url", d.URL,
		"target", d.Target.Summary()+"  ["+d.Target.Shorthand()+"]",
		"auth", d.AuthMode,
		"status", fmtBool(d.Enabled, "enabled", "disabled"),
		"retention", fmtRetention(d.RunRetentionMode, d.RunRetentionDays),
		"limits", fmtLimits(d.Limits),
		"budget", fmtBudget(d.Budget),
		"queue", fmtQueueTimeout(d.QueueTimeoutMs),
		"canary", fmtCanary(d.Canary),
		"gate", fmtGate(d.PromoteGate),
		"created", fmtTime(d.CreatedAt),
		"updated", fmtTime(d.UpdatedAt),
		"expires", fmtTimePtr(d.ExpiresAt),
	)
}

// parseGate reads a promotion gate: MIN[:HOURS], or none to remove it.
func parseGate(s string) (cloudapi.GateUpdate, error) {
	if s == "none" {
		return cloudapi.GateUpdate{Remove: true}, nil
	}
	minS, hoursS, _ := strings.Cut(s, ":")
	g := cloudapi.PromoteGate{}
	var err error
	if g.MinWinRate, err = strconv.ParseFloat(minS, 64); err != nil || g.MinWinRate < 0 || g.MinWinRate > 1 {
		return cloudapi.GateUpdate{}, fmt.Errorf("MIN must be a number from 0 to 1 (got %q); the form is MIN[:HOURS] or none", minS)
	}
	if hoursS != "" {
		if g.MaxAgeHours, err = strconv.ParseFloat(hoursS, 64); err != nil || g.MaxAgeHours < 0 {
			return cloudapi.GateUpdate{}, fmt.Errorf("HOURS must be a number of 0 or more (got %q)", hoursS)
		}
	}
	return cloudapi.GateUpdate{Gate: &g}, nil
}

// parseQueueTimeout reads --queue-timeout-ms: milliseconds (1 to core.MaxQueueTimeoutMs), or model for
// the model's own.
func parseQueueTimeout(cmd *command, s string) (cloudapi.LimitChange, error) {
	if strings.EqualFold(strings.TrimSpace(s), "model") {
		return cloudapi.NoLimit(), nil
	}
	n, err := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(s), ",", ""))
	if err != nil || n < 1 || n > core.MaxQueueTimeoutMs {
		return cloudapi.LimitChange{}, cmd.fail("--queue-timeout-ms must be a whole number of milliseconds from 1 to %s, or model for the model's (got %q)", thousands(core.MaxQueueTimeoutMs), s)
	}
	return cloudapi.LimitTo(n), nil
}

// fmtQueueTimeout reads "waits at most 5000 ms", or "waits as the model says" when the deployment sets
// no queueTimeoutMs.
func fmtQueueTimeout(ms *int) string {
	if ms == nil {
		return "waits as the model says"
	}
	return "waits at most " + strconv.Itoa(*ms) + " ms"
}

// parseRetention reads days:N, unlimited or none.
func parseRetention(s string) (mode string, days int, err error) {
	switch s {
	case cloudapi.RetentionUnlimited, cloudapi.RetentionNone:
		return s, 0, nil
	}
	if n, ok := strings.CutPrefix(s, "days:"); ok {
		d, err := strconv.Atoi(n)
		if err == nil && d >= 1 && d <= 365 {
			return cloudapi.RetentionDays, d, nil
		}
	}
	return "", 0, fmt.Errorf("invalid --retention %q: use days:N with N from 1 to 365, unlimited or none", s)
}

func fmtRetention(mode string, days int) string {
	switch mode {
	case cloudapi.RetentionDays:
		return fmt.Sprintf("%d days", days)
	case cloudapi.RetentionNone:
		return "don't store"
	}
	return mode
}

// fmtGate is a promotion gate in a few words.
func fmtGate(g *cloudapi.PromoteGate) string {
	if g == nil {
		return "none"
	}
	age := "any age"
	if g.MaxAgeHours > 0 {
		age = "at most " + strconv.FormatFloat(g.MaxAgeHours, 'f', -1, 64) + " h old"
	}
	return fmt.Sprintf("an eval with win rate ≥ %s (lower bound), no check regressed, %s", strconv.FormatFloat(g.MinWinRate, 'f', -1, 64), age)
}
