package views

import (
	"strconv"
	"strings"
)

// Evals is the detail page's Evals section (docs/API.md, "Evals"): the form that starts a replay eval,
// the endpoint's evals, and the one opened (Open, nil when none).
type Evals struct {
	EndpointID string
	Form       EvalForm
	List       []EvalRow
	Open       *EvalDetail
}

// EvalForm is the eval form with the values and errors of a failed attempt. Candidate is a target in
// the CLI's shorthand (base:<model>, final:<jobId>, checkpoint:<jobId>:<step>), the canary's target by
// default; Errors are keyed by field name ("candidate", "limit"), Message is a form-wide error.
type EvalForm struct {
	EndpointID                        string
	Candidate, Since, Until, Arm      string
	Status, Limit, JudgeModel, Rubric string
	// Models are the models a judge may be (the catalog's public ones).
	Models  []string
	Errors  map[string]string
	Message string
}

// EvalSince are the form's windows of runs, by their value (hours; "" all time).
var EvalSince = []struct{ Value, Label string }{{"24", "the last 24 hours"}, {"168", "the last 7 days"}, {"720", "the last 30 days"}, {"", "all time"}}

// EvalRow is one eval of the endpoint's list.
type EvalRow struct {
	ID, Candidate, State, Created string
	Done, Failed, Total           int
	Passed, Finished              bool
}

// EvalDetail is one eval opened: its progress, and once done its summary and pairs.
type EvalDetail struct {
	EndpointID, ID            string
	Candidate, Baseline       string
	State, Created, Error     string
	Done, Failed, Total       int
	Finished, HasSummary      bool
	Summary                   EvalSummaryView
	Pairs                     []EvalPair
	Verdict, Check            string   // the pairs' filters ("" any)
	CheckNames                []string // the checks the filter offers
	PairsShown, PairsReplayed int
}

// EvalSummaryView is a done eval's summary in words.
type EvalSummaryView struct {
	Pairs, Identical   int
	Judged             bool
	Wins, Ties, Losses int
	WinRate, Low, High string // "52%"
	Agreement          string // "the judge agreed with recorded feedback on 7 of 9 runs", or ""
	Checks             []EvalCheckRow
	Passed             bool
	Regressed          []string
}

// EvalCheckRow is one check's pass rate on both sides.
type EvalCheckRow struct {
	Name                string
	Baseline, Candidate string // "98% (49 of 50)"
	Regressed           bool
}

// EvalPair is one replayed run: both answers side by side, with the candidate's words that differ.
type EvalPair struct {
	RunID, Verdict, Error string
	Identical             bool
	Failed                []string // checks a side failed: "json (candidate)"
	Baseline, Candidate   string
	Diff                  []DiffPart
}

// DiffPart is a run of words of a diff: Op is "=" (both), "-" (the recorded answer's only) or "+"
// (the candidate's only).
type DiffPart struct {
	Op, Text string
}

// Percent writes a share as a whole percent.
func Percent(x float64) string { return strconv.Itoa(int(x*100+0.5)) + "%" }

// PassRate is "98% (49 of 50)", or "—" with nothing counted.
func PassRate(passed, failed int) string {
	n := passed + failed
	if n == 0 {
		return "—"
	}
	return Percent(float64(passed)/float64(n)) + " (" + strconv.Itoa(passed) + " of " + strconv.Itoa(n) + ")"
}

// ProgressText is an eval's progress in words: "37 of 80 runs replayed, 1 failed".
func (e EvalDetail) ProgressText() string {
	s := strconv.Itoa(e.Done) + " of " + strconv.Itoa(e.Total) + " runs replayed"
	if e.Failed > 0 {
		s += ", " + strconv.Itoa(e.Failed) + " failed"
	}
	return s
}

// maxDiffWords bounds the words a pair's diff compares (quadratic): past it the diff is whole
// removal and insertion of the rest.
const maxDiffWords = 600

// WordDiff is the word diff of a recorded answer (a) and the candidate's (b): the longest common
// subsequence of their words, whitespace kept with the word before it.
func WordDiff(a, b string) []DiffPart {
	wa, wb := words(a), words(b)
	if len(wa) > maxDiffWords || len(wb) > maxDiffWords {
		return merge(nil, []DiffPart{{"-", a}, {"+", b}})
	}
	n, m := len(wa), len(wb)
	l := make([][]int, n+1)
	for i := range l {
		l[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if wa[i] == wb[j] {
				l[i][j] = l[i+1][j+1] + 1
			} else {
				l[i][j] = max(l[i+1][j], l[i][j+1])
			}
		}
	}
	var out []DiffPart
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && wa[i] == wb[j]:
			out = merge(out, []DiffPart{{"=", wa[i]}})
			i, j = i+1, j+1
		case i < n && (j == m || l[i+1][j] >= l[i][j+1]): // the recorded word first, then the candidate's
			out = merge(out, []DiffPart{{"-", wa[i]}})
			i++
		default:
			out = merge(out, []DiffPart{{"+", wb[j]}})
			j++
		}
	}
	return out
}

// words splits s into words, each with the whitespace after it.
func words(s string) []string {
	var out []string
	for len(s) > 0 {
		i := strings.IndexAny(s, " \n\t")
		if i < 0 {
			return append(out, s)
		}
		j := i
		for j < len(s) && strings.ContainsRune(" \n\t", rune(s[j])) {
			j++
		}
		out = append(out, s[:j])
		s = s[j:]
	}
	return out
}

// merge appends parts, joining a part to the last one of the same op.
func merge(out, parts []DiffPart) []DiffPart {
	for _, p := range parts {
		if p.Text == "" {
			continue
		}
		if len(out) > 0 && out[len(out)-1].Op == p.Op {
			out[len(out)-1].Text += p.Text
			continue
		}
		out = append(out, p)
	}
	return out
}

// VerdictWord is a judge's verdict as the pairs say it.
func VerdictWord(v string) string {
	switch v {
	case "candidate":
		return "candidate better"
	case "baseline":
		return "recorded better"
	case "tie":
		return "tie"
	}
	return "not judged"
}

// evalPath is a studio route of an endpoint's evals.
func evalPath(id string, rest ...string) string {
	return endpointPath(id, append([]string{"evals"}, rest...)...)
}

// SectionEvals is the detail view's Evals section.
const SectionEvals = "evals"
