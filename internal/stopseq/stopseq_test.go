package stopseq

import (
	"slices"
	"testing"
)

func TestCut(t *testing.T) {
	toks := []string{"The", " quick", " brown", " fox"}
	for _, c := range []struct {
		name  string
		stops []string
		want  []string
		match string
	}{
		{"none given", nil, toks, ""},
		{"none occurs", []string{"dog"}, toks, ""},
		{"at a token's start", []string{" brown"}, []string{"The", " quick"}, " brown"},
		{"inside a token", []string{"ick"}, []string{"The", " qu"}, "ick"},
		{"across tokens", []string{"k br"}, []string{"The", " quic"}, "k br"},
		{"earliest wins, whatever the order", []string{"fox", "quick"}, []string{"The", " "}, "quick"},
		{"at the very start", []string{"The"}, nil, "The"},
		{"empty strings never match", []string{"", "fox"}, []string{"The", " quick", " brown", " "}, "fox"},
	} {
		got, match := Cut(toks, c.stops)
		if !slices.Equal(got, c.want) || match != c.match {
			t.Errorf("%s: Cut(%q) = %q, %q; want %q, %q", c.name, c.stops, got, match, c.want, c.match)
		}
	}
}
