package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/views"
)

func runRunsList(c *cli, args []string) error {
	cmd := c.newCommand("svc runs list DEPLOYMENT [--status ok|error|refused] [--key KEY] [--arm primary|canary|shadow] [--surface chat|messages|responses|…] [--since 24h] [--until T] [--limit N] [--cursor C]",
		"Lists a deployment's recorded runs, newest first, one page at a time, those that pass the filters.\n"+
			"DEPLOYMENT is its id or its slug; KEY a key's id or its label. --since and --until take a time (RFC 3339),\n"+
			"a date (2026-11-20, local time) or a duration before now (90m, 12h, 7d).\n"+
			"Calls refused before they reach a model (a wrong key: 401, a disabled endpoint: 404) are not runs:\n"+
			"svc usage counts them.")
	limit := cmd.Int("limit", 0, "page size (0: the server's default)")
	cursor := cmd.String("cursor", "", "the next cursor printed by the previous page (give the same filters)")
	status := cmd.String("status", "", "ok (answered), error (failed) or refused (turned away by svc with 429: a rate limit, a budget, a busy model)")
	key := cmd.String("key", "", "the runs of one key, by id or label")
	arm := cmd.String("arm", "", "primary (the callers' calls the primary answered), canary (the canary's, shadow copies included) or shadow (the copies)")
	surface := cmd.String("surface", "", "the route the calls came in by: chat, messages, responses, embeddings or completions (the API judges it)")
	since := cmd.String("since", "", "runs made since this time, date or duration ago")
	until := cmd.String("until", "", "runs made before this time or duration ago, or up to the end of this date")
	pos, err := c.parse(cmd, args, 1, false)
	if err != nil {
		return err
	}
	if *limit < 0 {
		return cmd.fail("--limit must not be negative")
	}
	switch *status {
	case "", "ok", "error", "refused":
	default:
		return cmd.fail("--status must be ok, error or refused (got %q)", *status)
	}
	switch *arm {
	case "", cloudapi.ArmPrimary, cloudapi.ArmCanary, cloudapi.ArmShadow:
	default:
		return cmd.fail("--arm must be primary, canary or shadow (got %q)", *arm)
	}
	opts := cloudapi.ListRunsOptions{Limit: *limit, Cursor: *cursor, Status: *status, Arm: *arm, Surface: *surface}
	now := time.Now()
	if opts.Since, err = timeOrAgo(*since, now, false); err != nil {
		return cmd.fail("--since: %v", err)
	}
	if opts.Until, err = timeOrAgo(*until, now, true); err != nil {
		return cmd.fail("--until: %v", err)
	}
	cl, id, err := c.scopedDeployment(pos[0])
	if err != nil {
		return err
	}
	if *key != "" {
		if opts.KeyID, err = c.keyByIDOrLabel(cl, id, pos[0], *key); err != nil {
			return err
		}
	}
	page, err := cl.ListRuns(c.ctx, id, opts)
	if err != nil {
		return err
	}
	if c.asJSON {
		return c.printJSON(page)
	}
	rows := [][]string{{"ID", "STATUS", "ARM", "SURFACE", "MODEL", "REPLICA", "LATENCY", "TOKENS IN/OUT", "FEEDBACK", "CREATED", "EXPIRES"}}
	for _, r := range page.Runs {
		feedback := "-"
		if r.Feedback != nil {
			feedback = views.FeedbackWord(r.Feedback.Score)
		}
		status := r.Status
		if r.Status != "ok" && r.StatusCode != 0 {
			status += " " + strconv.Itoa(r.StatusCode)
		}
		rows = append(rows, []string{r.ID, status, armOf(r), orDash(r.Surface), r.Model, orDash(r.Replica), strconv.FormatInt(r.LatencyMs, 10) + " ms",
			fmt.Sprintf("%d/%d", r.PromptTokens, r.CompletionTokens), feedback, fmtTime(r.CreatedAt), fmtTimePtr(r.ExpiresAt)})
	}
	if err := c.table(rows); err != nil {
		return err
	}
	if page.NextCursor != "" {
		more := []string{"svc runs list", pos[0]}
		for _, f := range []struct{ name, v string }{{"status", *status}, {"key", *key}, {"arm", *arm}, {"surface", *surface}, {"since", *since}, {"until", *until}} {
			if f.v != "" {
				more = append(more, "--"+f.name, shellWord(f.v))
			}
		}
		if *limit > 0 {
			more = append(more, "--limit", strconv.Itoa(*limit))
		}
		fmt.Fprintf(c.stdout, "\nmore: %s --cursor %s\n", strings.Join(more, " "), page.NextCursor)
	}
	return nil
}

// shellWord quotes v for a shell when it holds anything but letters, digits and -_.:+
func shellWord(v string) string {
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:+", r)) {
			return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
		}
	}
	return v
}

// armOf is a run's canary arm as the ARM column says it: primary, canary, shadow (a copy the canary
// answered, never returned), or "-" for a run of no canary.
func armOf(r cloudapi.RunSummary) string {
	switch {
	case r.ShadowOf != "":
		return cloudapi.ArmShadow
	case r.Arm != "":
		return r.Arm
	}
	return "-"
}

// keyByIDOrLabel is the id of a deployment's key named by its id or its label (revoked keys too).
func (c *cli) keyByIDOrLabel(cl *cloudapi.Client, deploymentID, deployment, key string) (string, error) {
	keys, err := cl.ListDeploymentKeys(c.ctx, deploymentID)
	if err != nil {
		return "", err
	}
	for _, k := range keys {
		if k.ID == key {
			return k.ID, nil
		}
	}
	var found []string
	for _, k := range keys {
		if k.Label == key {
			found = append(found, k.ID)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", fmt.Errorf("%s has no key %q (by id or label): svc keys list %s shows them", deployment, key, deployment)
	}
	return "", fmt.Errorf("%s has %d keys labelled %q: give one's id (%s)", deployment, len(found), key, strings.Join(found, ", "))
}

func runRunsGet(c *cli, args []string) error {
	cmd := c.newCommand("svc runs get DEPLOYMENT RUN", "Shows one run with its recorded request and response.\nDEPLOYMENT is its id or its slug.")
	pos, err := c.parse(cmd, args, 2, false)
	if err != nil {
		return err
	}
	cl, id, err := c.scopedDeployment(pos[0])
	if err != nil {
		return err
	}
	r, err := cl.GetRun(c.ctx, id, pos[1])
	if err != nil {
		return err
	}
	if c.asJSON {
		return c.printJSON(r)
	}
	key := "-"
	if r.KeyID != nil {
		key = *r.KeyID
	}
	if err := c.fields(
		"id", r.ID,
		"deployment", r.DeploymentID,
		"key", key,
		"model", r.Model,
		"status", r.Status,
		"arm", armLine(r.RunSummary),
		"surface", orDash(r.Surface),
		"replica", orDash(r.Replica),
		"latency", strconv.FormatInt(r.LatencyMs, 10)+" ms",
		"queue wait", strconv.FormatInt(r.QueueMs, 10)+" ms",
		"tokens", fmt.Sprintf("%d prompt, %d completion", r.PromptTokens, r.CompletionTokens),
		"created", fmtTime(r.CreatedAt),
		"expires", fmtTimePtr(r.ExpiresAt),
		"feedback", feedbackLine(r.Feedback),
	); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "\nrequest:\n%s\n\nresponse:\n%s\n", indentJSON(r.Request), indentJSON(r.Response))
	return nil
}

// orDash is v, or "-" when it is empty.
func orDash(v string) string {
	if v == "" {
		return "-"
	}
	return v
}

// armLine is a run's arm for runs get: the ARM column's word, with the target it served and, for a
// shadow copy, the run it copies.
func armLine(r cloudapi.RunSummary) string {
	a := armOf(r)
	if a == "-" {
		return a
	}
	if r.ArmTarget != "" {
		a += " (" + r.ArmTarget + ")"
	}
	if r.ShadowOf != "" {
		a += ", a copy of " + r.ShadowOf
	}
	return a
}

// indentJSON pretty-prints a recorded body; anything that is not JSON is shown as it is.
func indentJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "(none)"
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "  ", "  "); err != nil {
		return "  " + string(raw)
	}
	return "  " + b.String()
}
