package cli

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/views"
)

// svc runs feedback and svc runs export (docs/API.md, "Feedback" and "Export").

func runRunsFeedback(c *cli, args []string) error {
	cmd := c.newCommand("svc runs feedback DEPLOYMENT RUN SCORE|clear [--comment TEXT]",
		"Gives feedback on a run: SCORE is 1 or good, -1 or bad, 0 or neutral (svc runs feedback DEP RUN -1 works as it\n"+
			"reads); feedback given again replaces it, and clear removes it.\nDEPLOYMENT is its id or its slug; RUN a run id.")
	comment := cmd.String("comment", "", "what was good or bad about the answer")
	pos, err := c.parse(cmd, args, 3, false)
	if err != nil {
		return err
	}
	clear := strings.EqualFold(pos[2], "clear")
	score, ok := feedbackScore(pos[2])
	if !ok && !clear {
		return cmd.fail("SCORE must be 1 (good), -1 (bad), 0 (neutral) or clear, not %q", pos[2])
	}
	if clear && *comment != "" {
		return cmd.fail("--comment goes with a SCORE, not with clear")
	}
	cl, id, err := c.scopedDeployment(pos[0])
	if err != nil {
		return err
	}
	var r *cloudapi.Run
	if clear {
		r, err = cl.ClearRunFeedback(c.ctx, id, pos[1])
	} else {
		r, err = cl.SetRunFeedback(c.ctx, id, pos[1], cloudapi.SetRunFeedbackRequest{Score: score, Comment: *comment})
	}
	if err != nil {
		return err
	}
	if c.asJSON {
		return c.printJSON(r)
	}
	fmt.Fprintf(c.stdout, "run %s: %s\n", r.ID, feedbackLine(r.Feedback))
	return nil
}

// feedbackScore reads a SCORE: 1, 0, -1 (+1 too), or good, neutral, bad.
func feedbackScore(v string) (int, bool) {
	switch strings.ToLower(v) {
	case "1", "+1", "good":
		return 1, true
	case "0", "neutral":
		return 0, true
	case "-1", "bad":
		return -1, true
	}
	return 0, false
}

// feedbackLine says what feedback a run holds, in the studio's words: "marked bad (-1) at 2026-11-20
// 10:04:05: "too vague"", or "no feedback".
func feedbackLine(f *cloudapi.Feedback) string {
	if f == nil {
		return "no feedback"
	}
	score := fmt.Sprintf("%+d", f.Score)
	if f.Score == 0 {
		score = "0"
	}
	s := fmt.Sprintf("marked %s (%s) at %s", views.FeedbackWord(f.Score), score, fmtTime(f.At))
	if f.Comment != "" {
		s += ": " + strconv.Quote(f.Comment)
	}
	return s
}

func runRunsExport(c *cli, args []string) error {
	cmd := c.newCommand("svc runs export DEPLOYMENT [--since 7d] [--until T] [--min-score N] [--format chat-jsonl] [--status ok|all] [--arm primary|canary] [--reasoning] > train.jsonl",
		"Writes a deployment's runs to standard output as a fine-tuning dataset, a JSON line per run (OpenAI's chat\n"+
			"fine-tuning format, or its preference format); what was written and left out, and why, goes to standard error.\n"+
			"--since and --until take a time (RFC 3339), a date (2026-11-20: --until includes that whole day, in local time)\n"+
			"or a duration before now (90m, 12h, 7d). --arm and --min-score apply to chat-jsonl only.\nDEPLOYMENT is its id or its slug.")
	since := cmd.String("since", "", "runs made since this time, date or duration ago (default: the first)")
	until := cmd.String("until", "", "runs made before this time or duration ago, or up to the end of this date (default: now)")
	minScore := cmd.String("min-score", "", "only runs whose feedback scored this or more (-1, 0 or 1; a run without feedback counts 0)")
	format := cmd.String("format", cloudapi.ExportChat, "chat-jsonl or preference-jsonl")
	status := cmd.String("status", "", "ok (complete answers, the default) or all (cut answers too)")
	arm := cmd.String("arm", "", "primary or canary (default: the calls clients made, shadow copies left out)")
	reasoning := cmd.Bool("reasoning", false, "keep the answers' reasoning as reasoning_content")
	pos, err := c.parse(cmd, args, 1, false)
	if err != nil {
		return err
	}
	now := time.Now()
	o := cloudapi.ExportOptions{Format: *format, Status: *status, Arm: *arm, Reasoning: *reasoning}
	if o.Since, err = timeOrAgo(*since, now, false); err != nil {
		return cmd.fail("--since: %v", err)
	}
	if o.Until, err = timeOrAgo(*until, now, true); err != nil {
		return cmd.fail("--until: %v", err)
	}
	if *minScore != "" {
		n, err := strconv.Atoi(*minScore)
		if err != nil || n < -1 || n > 1 {
			return cmd.fail("--min-score must be -1, 0 or 1, not %q", *minScore)
		}
		o.MinScore = &n
	}
	cl, id, err := c.scopedDeployment(pos[0])
	if err != nil {
		return err
	}
	x, err := cl.ExportRuns(c.ctx, id, o)
	if err != nil {
		return err
	}
	return c.writeExport(x, o.Format == cloudapi.ExportPreference)
}

// writeExport copies an export's lines to standard output and says on standard error what it wrote
// and left out (pairs: preference lines).
func (c *cli) writeExport(x *cloudapi.RunExport, pairs bool) error {
	defer x.Close()
	out := bufio.NewWriterSize(c.stdout, 64<<10)
	if _, err := out.ReadFrom(x); err != nil {
		return fmt.Errorf("the export was cut: %w", err)
	}
	if err := out.Flush(); err != nil {
		return err
	}
	counts, err := x.Counts()
	if err != nil {
		return err
	}
	fmt.Fprintln(c.stderr, exportSummary(counts, pairs))
	return nil
}

// exportSummary says what an export wrote and left out, for standard error: runs, or preference pairs
// (the studio's word for the same lines).
func exportSummary(n cloudapi.ExportCounts, pairs bool) string {
	word := "run"
	if pairs {
		word = "pair"
	}
	if n.Written != 1 {
		word += "s"
	}
	s := fmt.Sprintf("%d %s written", n.Written, word)
	if len(n.Skipped) == 0 {
		return s
	}
	total := 0
	var parts []string
	for _, reason := range n.Reasons {
		if v := n.Skipped[reason]; v > 0 {
			total += v
			parts = append(parts, fmt.Sprintf("%s %d", reason, v))
		}
	}
	return fmt.Sprintf("%s, %d left out (%s)", s, total, strings.Join(parts, ", "))
}

// timeOrAgo reads an RFC 3339 time, a date (2026-11-20, local time: its start, or with end its whole day
// included, as the studio's until), or a duration before now (90m, 12h, 7d); "" is the zero time.
func timeOrAgo(v string, now time.Time, end bool) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if t, ok := cloudapi.ExportDay(v, end); ok {
		return t, nil
	}
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 {
			return time.Time{}, fmt.Errorf("%q is neither a time (RFC 3339), a date (2026-11-20) nor a duration (90m, 12h, 7d)", v)
		}
		return now.Add(-time.Duration(n) * 24 * time.Hour), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is neither a time (RFC 3339), a date (2026-11-20) nor a duration (90m, 12h, 7d)", v)
	}
	return now.Add(-d), nil
}
