package views

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

// The word diff keeps what both answers share and marks what each has alone, whitespace with its word.
func TestWordDiff(t *testing.T) {
	got := WordDiff("The answer is 42.\nDone", "The answer is 41.\nDone")
	want := []DiffPart{{"=", "The answer is "}, {"-", "42.\n"}, {"+", "41.\n"}, {"=", "Done"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("WordDiff = %q, want %q", got, want)
	}
	if got := WordDiff("same", "same"); !reflect.DeepEqual(got, []DiffPart{{"=", "same"}}) {
		t.Errorf("identical: %q", got)
	}
	if got := WordDiff("", "new words"); !reflect.DeepEqual(got, []DiffPart{{"+", "new words"}}) {
		t.Errorf("from nothing: %q", got)
	}
	long := strings.Repeat("w ", maxDiffWords+1)
	if got := WordDiff(long, "x"); len(got) != 2 || got[0].Op != "-" || got[1].Op != "+" {
		t.Errorf("past the bound: %d parts", len(got))
	}
}

// A judged eval's summary says the win rate with its 95% interval and the agreement; a pair shows
// both answers, the candidate's differing words marked.
func TestEvalDetailShowsIntervalAndDiff(t *testing.T) {
	v := EvalDetail{EndpointID: "d1", ID: "ev1", State: "done", Finished: true, HasSummary: true, Done: 2, Total: 2,
		Summary: EvalSummaryView{Pairs: 2, Judged: true, Wins: 1, Ties: 1, WinRate: "75%", Low: "30%", High: "95%",
			Agreement: "the judge agreed with recorded feedback on 1 of 1 runs", Passed: false,
			Checks: []EvalCheckRow{{Name: "json", Baseline: "100% (2 of 2)", Candidate: "50% (1 of 2)", Regressed: true}}, Regressed: []string{"json"}},
		Pairs: []EvalPair{{RunID: "run_1", Verdict: "candidate", Baseline: "a b", Candidate: "a c", Diff: WordDiff("a b", "a c")}}}
	var b strings.Builder
	if err := EvalDetailView(v).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{"win rate <strong>75%</strong> (95% interval 30%–95%)", "Not passed: the candidate regressed on json",
		"agreed with recorded feedback on 1 of 1 runs", "<del>b</del><ins>c</ins>", "candidate better", "50% (1 of 2)"} {
		if !strings.Contains(html, want) {
			t.Errorf("the eval's view lacks %q:\n%s", want, html)
		}
	}
}
