package bench

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestJudgeQuiet(t *testing.T) {
	us := float64(time.Microsecond)
	for _, c := range []struct {
		name       string
		row, quiet []float64
		median     time.Duration
		judged, ok bool
	}{
		// The quiet row moves 100 µs from round to round; the row 40 µs above it: within noise.
		{"within", []float64{140 * us, 240 * us, 190 * us}, []float64{100 * us, 200 * us, 150 * us}, 40 * time.Microsecond, true, true},
		// 350 µs above a row that moves 100 µs: the callers pay for the feature.
		{"over", []float64{450 * us, 550 * us, 500 * us}, []float64{100 * us, 200 * us, 150 * us}, 350 * time.Microsecond, true, false},
		// Below it: a quicker row is within.
		{"below", []float64{90 * us, 180 * us, 120 * us}, []float64{100 * us, 200 * us, 150 * us}, -20 * time.Microsecond, true, true},
		{"no rounds", nil, nil, 0, false, false},
	} {
		median, noise, judged, ok := JudgeQuiet(c.row, c.quiet)
		if judged != c.judged || ok != c.ok || (judged && (median != c.median || noise != 100*time.Microsecond)) {
			t.Errorf("%s: median %v noise %v judged %v ok %v; want median %v noise 100µs judged %v ok %v", c.name, median, noise, judged, ok, c.median, c.judged, c.ok)
		}
	}
}

// TestQuietReport renders the paced streamed scenario at 1 connection of an edge row and a shadow row
// from known rounds: the shadow row is judged against the edge row's TTFB round by round (a round slow
// for everyone cancels out), PASS within the edge row's noise, FAIL beyond it. The same rounds in the
// unpaced scenario are shown without a verdict, and the general budgets leave the paced one out.
func TestQuietReport(t *testing.T) {
	for _, c := range []struct {
		added time.Duration
		want  string
	}{
		{30 * time.Microsecond, "PASS  edge + shadow canary   stream×1 paced  +0.03ms against edge (noise band 0.10ms)"},
		{400 * time.Microsecond, "FAIL  edge + shadow canary   stream×1 paced  +0.40ms* against edge (noise band 0.10ms)"},
	} {
		bare := &Row{Name: "bare proxy"}
		edge := &Row{Name: "edge", Edge: true}
		shadow := &Row{Name: "edge + shadow canary", Edge: true, Feature: "a shadow canary", Quiet: edge}
		us := time.Microsecond
		round := func(ttfb time.Duration) RoundResult {
			return RoundResult{RPS: 1000, P50: time.Millisecond, P99: 2 * time.Millisecond, TTFB50: ttfb}
		}
		res := [][]RoundResult{
			{round(500 * us), round(900 * us), round(500 * us)},  // bare; round 2 slow for every row
			{round(600 * us), round(1100 * us), round(650 * us)}, // Δttfb 100, 200, 150 µs
			{round(600*us + c.added), round(1100*us + c.added), round(650*us + c.added)},
		}
		unpaced, paced := Scenario{Stream: true, Conns: 1}, Scenario{Stream: true, Conns: 1, Pause: PacedPause}
		figures := Figures{}
		var out bytes.Buffer
		rows := []*Row{bare, edge, shadow}
		PrintScenario(&out, unpaced, rows, res, 0, figures)
		PrintScenario(&out, paced, rows, res, 0, figures)
		PrintBudget(&out, 16, rows, []Scenario{unpaced, paced}, figures)
		report := out.String()
		if !strings.Contains(report, c.want) {
			t.Errorf("added %v: the report lacks %q:\n%s", c.added, c.want, report)
		}
		if want := fmt.Sprintf("      edge + shadow canary   stream×1        %s against edge", SignedMs(c.added)); !strings.Contains(report, want) {
			t.Errorf("added %v: the unpaced scenario is not shown unjudged (%q):\n%s", c.added, want, report)
		}
		if n := strings.Count(report, "stream×1 paced"); n != 1 {
			t.Errorf("the paced scenario shows in %d budget lines, want the quiet check's alone:\n%s", n, report)
		}
	}
}
