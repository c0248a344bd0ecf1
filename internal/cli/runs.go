package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/views"
)

func runRunsList(c *cli, args []string) error {
	cmd := c.newCommand("svc runs list DEPLOYMENT [--limit N] [--cursor C]", "Lists a deployment's recorded runs, newest first, one page at a time.\nDEPLOYMENT is its id or its slug.")
	limit := cmd.Int("limit", 0, "page size (0: the server's default)")
	cursor := cmd.String("cursor", "", "the next cursor printed by the previous page")
	pos, err := c.parse(cmd, args, 1, false)
	if err != nil {
		return err
	}
	if *limit < 0 {
		return cmd.fail("--limit must not be negative")
	}
	cl, id, err := c.scopedDeployment(pos[0])
	if err != nil {
		return err
	}
	page, err := cl.ListRuns(c.ctx, id, cloudapi.ListRunsOptions{Limit: *limit, Cursor: *cursor})
	if err != nil {
		return err
	}
	if c.asJSON {
		return c.printJSON(page)
	}
	rows := [][]string{{"ID", "STATUS", "MODEL", "LATENCY", "TOKENS IN/OUT", "FEEDBACK", "CREATED", "EXPIRES"}}
	for _, r := range page.Runs {
		feedback := "-"
		if r.Feedback != nil {
			feedback = views.FeedbackWord(r.Feedback.Score)
		}
		rows = append(rows, []string{r.ID, r.Status, r.Model, strconv.FormatInt(r.LatencyMs, 10) + " ms",
			fmt.Sprintf("%d/%d", r.PromptTokens, r.CompletionTokens), feedback, fmtTime(r.CreatedAt), fmtTimePtr(r.ExpiresAt)})
	}
	if err := c.table(rows); err != nil {
		return err
	}
	if page.NextCursor != "" {
		fmt.Fprintf(c.stdout, "\nmore: svc runs list %s --cursor %s\n", pos[0], page.NextCursor)
	}
	return nil
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
		"latency", strconv.FormatInt(r.LatencyMs, 10)+" ms",
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
