package bench

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// A row with Quiet set adds work that must not reach the callers' first byte (the shadow canary's
// copies): its streamed time to first byte where the CPUs have room (the paced scenario: 1 connection,
// PacedPause between an answer and the next request) is judged against Quiet's, the same row without
// that work, round by round. At 1 connection without a pause, the load generator, the upstreams and svc
// keep the machine's CPUs busy, so the work's CPU time shows in the next request's TTFB (queueing for
// a CPU): shown for reference, not judged. The difference of the two rows' TTFB in
// each round (the bare proxy of the round cancels out) has its median judged against the noise band of
// Quiet's own Δttfb: how far that moves from round to round (max − min), with no work added.

// JudgeQuiet returns the median over rounds of row − quiet (each a Δttfb against the same round's bare
// proxy, in nanoseconds), the noise band (quiet's max − min) and whether the median is within it. It
// judges nothing (judged false) without rounds on both sides.
func JudgeQuiet(row, quiet []float64) (median, noise time.Duration, judged, ok bool) {
	if len(row) == 0 || len(row) != len(quiet) {
		return 0, 0, false, false
	}
	d := make([]float64, len(row))
	for k := range row {
		d[k] = row[k] - quiet[k]
	}
	median = time.Duration(Median(d))
	noise = time.Duration(slices.Max(quiet) - slices.Min(quiet))
	return median, noise, true, median <= noise
}

// printQuietBudget writes the check of the rows with a Quiet row.
func printQuietBudget(w io.Writer, rows []*Row, scenarios []Scenario, figures Figures) {
	if !slices.ContainsFunc(rows, func(r *Row) bool { return r.Quiet != nil }) {
		return
	}
	fmt.Fprintf(w, "  streamed TTFB within noise of the same row without the feature, where the CPUs have room (paced): median over rounds\n")
	fmt.Fprintf(w, "  of (row − that row) ≤ the spread (max − min) of that row's own Δttfb over the rounds; unpaced shown, not judged\n")
	for _, r := range rows {
		if r.Quiet == nil {
			continue
		}
		if r.Skip != "" || r.Quiet.Skip != "" {
			fmt.Fprintf(w, "    SKIP  %-22s %s\n", r.Name, r.Skip+r.Quiet.Skip)
			continue
		}
		for _, sc := range scenarios {
			if !sc.Stream || Saturated(sc.Conns) {
				continue
			}
			row, quiet := figures[r.Name][sc].TTFBRounds, figures[r.Quiet.Name][sc].TTFBRounds
			median, noise, judged, ok := JudgeQuiet(row, quiet)
			if !judged {
				continue
			}
			verdict, mark := "PASS", ""
			switch {
			case sc.Pause == 0:
				verdict = "    " // the CPUs busy beside the requests: the work's CPU time, for reference
			case !ok:
				verdict, mark = "FAIL", "*"
			}
			fmt.Fprintf(w, "    %s  %-22s %-15s %s%s against %s (noise band %s)\n", verdict, r.Name, sc.String(), SignedMs(median), mark, r.Quiet.Name, Ms(noise))
		}
	}
}
