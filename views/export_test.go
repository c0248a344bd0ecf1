package views

import "testing"

// The export's summary words the counts of the API's trailers for people: thousands separated, the
// reasons in a fixed order, unknown ones by name, "none left out" when nothing was.
func TestExportSummary(t *testing.T) {
	for _, c := range []struct {
		written int
		skipped map[string]int
		want    string
	}{
		{2, nil, "Saved 2 runs in m-runs.jsonl; none left out."},
		{1, map[string]int{"failed": 0}, "Saved 1 run in m-runs.jsonl; none left out."},
		{1200, map[string]int{"no_transcript": 40, "failed": 3}, "Saved 1,200 runs in m-runs.jsonl; 43 left out: 3 failed, 40 without a transcript."},
		{0, map[string]int{"unranked": 2, "someday": 1}, "Saved 0 runs in m-runs.jsonl; 3 left out: 2 unranked pairs, 1 someday."},
	} {
		if got := ExportSummary("m-runs.jsonl", false, c.written, c.skipped); got != c.want {
			t.Errorf("%d %v: %q, want %q", c.written, c.skipped, got, c.want)
		}
	}
	if got := ExportProgressText("m-runs.jsonl", false, 12345); got != "Downloading m-runs.jsonl: 12,345 runs so far…" {
		t.Errorf("progress %q", got)
	}
	// Preference lines are pairs.
	if got := ExportSummary("m-preferences.jsonl", true, 1, map[string]int{"unranked": 2}); got != "Saved 1 pair in m-preferences.jsonl; 2 left out: 2 unranked pairs." {
		t.Errorf("pairs: %q", got)
	}
	if got := ExportProgressText("m-preferences.jsonl", true, 3); got != "Downloading m-preferences.jsonl: 3 pairs so far…" {
		t.Errorf("pairs progress %q", got)
	}
}
