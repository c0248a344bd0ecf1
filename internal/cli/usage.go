package cli

import (
	"fmt"
	"strconv"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/views"
)

func runUsage(c *cli, args []string) error {
	cmd := c.newCommand("svc usage DEPLOYMENT [--days N] [--key KEY]",
		"Shows a deployment's calls, errors, tokens and latency: by hour for the last 24 hours (--days 1),\n"+
			"by day for longer. Counted for every call, whatever the run retention; kept 400 days.\n"+
			"DEPLOYMENT is its id or its slug.")
	days := cmd.Int("days", 1, "how many days back, 1 to 400")
	key := cmd.String("key", "", "one key's calls only (a key id, see svc keys list)")
	pos, err := c.parse(cmd, args, 1, false)
	if err != nil {
		return err
	}
	opts, err := usageWindow(cmd, *days)
	if err != nil {
		return err
	}
	layout := "Jan 2 15:04"
	if *days > 1 {
		layout = "Jan 2"
	}
	opts.KeyID = *key
	cl, id, err := c.scopedDeployment(pos[0])
	if err != nil {
		return err
	}
	u, err := cl.GetDeploymentUsage(c.ctx, id, opts)
	if err != nil {
		return err
	}
	if c.asJSON {
		return c.printJSON(u)
	}
	rows := [][]string{{"START (UTC)", "REQUESTS", "ERRORS", "TOKENS IN", "TOKENS OUT", "P50", "P95"}}
	var total cloudapi.UsageBucket
	for _, b := range u.Buckets {
		rows = append(rows, []string{b.Start.UTC().Format(layout), itoa64(b.Requests), itoa64(b.Errors),
			itoa64(b.PromptTokens), itoa64(b.CompletionTokens), views.LatencyMs(b.LatencyP50Ms, b.LatencyErrorPct), views.LatencyMs(b.LatencyP95Ms, b.LatencyErrorPct)})
		total.Requests += b.Requests
		total.Errors += b.Errors
		total.PromptTokens += b.PromptTokens
		total.CompletionTokens += b.CompletionTokens
	}
	rows = append(rows, []string{"total", itoa64(total.Requests), itoa64(total.Errors), itoa64(total.PromptTokens),
		itoa64(total.CompletionTokens), "", ""})
	if err := c.table(rows); err != nil {
		return err
	}
	// What the studio's usage card says below its totals, the same words.
	v := views.Usage{PromptTokens: total.PromptTokens}
	for _, b := range u.Buckets {
		v.CachedTokens += b.CachedTokens
		v.FeedbackUp, v.FeedbackDown, v.FeedbackNeutral = v.FeedbackUp+b.Feedback.Up, v.FeedbackDown+b.Feedback.Down, v.FeedbackNeutral+b.Feedback.Neutral
		if c := b.Copies; c != nil {
			v.AddCopies(c.Requests, c.PromptTokens, c.CompletionTokens)
		}
		v.AddRefused(b.Refused, b.RefusedCodes)
		v.AddQueue(b.Queued, b.QueueMs)
	}
	for _, line := range []string{v.RefusedText(), v.QueueText(), v.CacheText(), v.FeedbackText(), v.CopiesText()} {
		if line != "" {
			fmt.Fprintln(c.stdout, line)
		}
	}
	return nil
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }

// fmtMs is a latency for a table: "-" for a bucket without calls.
func fmtMs(ms *int64) string {
	if ms == nil {
		return "-"
	}
	return fmt.Sprintf("%d ms", *ms)
}

// usageWindow is the range of --days: the last 24 hours by the hour for 1, else the last days by the day.
func usageWindow(cmd *command, days int) (cloudapi.UsageOptions, error) {
	if days < 1 || days > 400 {
		return cloudapi.UsageOptions{}, cmd.fail("--days must be between 1 and 400")
	}
	if days > 1 {
		return cloudapi.UsageWindow(time.Now(), days, cloudapi.GranularityDay), nil
	}
	return cloudapi.UsageWindow(time.Now(), 24, cloudapi.GranularityHour), nil
}
