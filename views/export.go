package views

import (
	"sort"
	"strings"
)

// exportReasons word the reasons an export leaves a run out (docs/API.md, "Export"), in the order the
// summary names them.
var exportReasons = []struct{ reason, words string }{
	{"failed", "failed"},
	{"cut", "cut off"},
	{"no_transcript", "without a transcript"},
	{"no_previous", "missing earlier turns"},
	{"empty", "with an empty answer"},
	{"unparseable", "unreadable"},
	{"unsupported", "not expressible in the format"},
	{"unranked", "unranked pairs"},
	{"mismatch", "mismatched pairs"},
	{"identical", "identical pairs"},
}

// ExportSummary says what a finished export wrote and left out, from the counts the API sends in its
// trailers: "Saved 1,200 runs in my-model-runs.jsonl; 43 left out: 3 failed, 40 without a transcript."
// pairs: the lines are preference pairs ("Saved 12 pairs in ...").
func ExportSummary(file string, pairs bool, written int, skipped map[string]int) string {
	s := "Saved " + Count(int64(written)) + " " + linesWord(pairs, written) + " in " + file
	total := 0
	var parts []string
	seen := map[string]bool{}
	for _, r := range exportReasons {
		seen[r.reason] = true
		if n := skipped[r.reason]; n > 0 {
			total += n
			parts = append(parts, Count(int64(n))+" "+r.words)
		}
	}
	var other []string
	for r, n := range skipped {
		if !seen[r] && n > 0 {
			other = append(other, r)
		}
	}
	sort.Strings(other)
	for _, r := range other {
		total += skipped[r]
		parts = append(parts, Count(int64(skipped[r]))+" "+strings.ReplaceAll(r, "_", " "))
	}
	if total == 0 {
		return s + "; none left out."
	}
	return s + "; " + Count(int64(total)) + " left out: " + strings.Join(parts, ", ") + "."
}

// ExportProgressText says how far a download is: its file, and the runs (or pairs) written so far.
func ExportProgressText(file string, pairs bool, lines int64) string {
	if lines == 0 {
		return "Downloading " + file + "…"
	}
	return "Downloading " + file + ": " + Count(lines) + " " + linesWord(pairs, int(lines)) + " so far…"
}

// linesWord names n lines of an export: runs, or preference pairs.
func linesWord(pairs bool, n int) string {
	w := "run"
	if pairs {
		w = "pair"
	}
	if n != 1 {
		w += "s"
	}
	return w
}
