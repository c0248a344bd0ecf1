// Package stopseq applies stop sequences to generated tokens as inference servers do: the answer ends
// before the earliest stop string, which it does not include (the simulator runtime and the fake
// upstream of tests both generate text).
package stopseq

import "strings"

// Cut returns toks cut before the earliest occurrence of any of stops in their joined text (the token
// the stop string begins in keeps its part before it), and the stop string that matched; toks
// unchanged and "" when none occurs. Empty stop strings never match.
func Cut(toks, stops []string) ([]string, string) {
	text := strings.Join(toks, "")
	at, match := -1, ""
	for _, s := range stops {
		if i := strings.Index(text, s); s != "" && i >= 0 && (at < 0 || i < at) {
			at, match = i, s
		}
	}
	if at < 0 {
		return toks, ""
	}
	var out []string
	n := 0
	for _, t := range toks {
		if n+len(t) > at {
			if at > n {
				out = append(out, t[:at-n])
			}
			break
		}
		out = append(out, t)
		n += len(t)
	}
	return out, match
}
