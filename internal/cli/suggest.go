package cli

import (
	"flag"
	"sort"
	"strings"
)

// Did you mean: a mistyped command or flag is answered with the nearest one, when one is near.

// nearest is the choice closest to word by edit distance, "" when none is within a third of the word's
// length (at least 1, at most 3) or two are equally near.
func nearest(word string, choices []string) string {
	limit := min(max(len(word)/3, 1), 3)
	best, bestD, tie := "", limit+1, false
	for _, c := range choices {
		d := editDistance(word, c)
		switch {
		case d < bestD:
			best, bestD, tie = c, d, false
		case d == bestD && c != best:
			tie = true
		}
	}
	if tie || bestD > limit {
		return ""
	}
	return best
}

// editDistance is the edit distance of a and b counting a swap of two neighbours as one edit (optimal
// string alignment), by bytes (commands and flags are ASCII): "lsit" is 1 from "list".
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// Suggest is the top-level command nearest to a mistyped name, among the CLI's groups and others (the
// binary's own: server, dev, studio, edge), as "; did you mean \"svc deployments\"?", or "".
func Suggest(name string, others ...string) string {
	names := append([]string{}, others...)
	for g := range cliGroups {
		names = append(names, g)
	}
	sort.Strings(names)
	if n := nearest(name, names); n != "" {
		return `; did you mean "svc ` + n + `"?`
	}
	return ""
}

// suggestVerb is the verb of group nearest to a mistyped one, as Suggest words it, or "".
func suggestVerb(group string, g cliGroup, verb string) string {
	var names []string
	for _, v := range g.verbs {
		names = append(names, v.name)
	}
	if n := nearest(verb, names); n != "" {
		return `; did you mean "svc ` + group + " " + n + `"?`
	}
	return ""
}

// suggestFlag is the flag of fs nearest to an undefined one named in a flag package error ("flag
// provided but not defined: -stauts"), as "; did you mean --status?", or "".
func suggestFlag(fs *flag.FlagSet, msg string) string {
	const marker = "not defined: -"
	i := strings.Index(msg, marker)
	if i < 0 {
		return ""
	}
	name := strings.TrimLeft(msg[i+len(marker)-1:], "-")
	name, _, _ = strings.Cut(name, "=")
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if n := nearest(name, names); n != "" {
		return "; did you mean --" + n + "?"
	}
	return ""
}
