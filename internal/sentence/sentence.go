// Package sentence presents a message of the management API to a person: the API words its errors
// precisely, in lower case and with Markdown code spans; the studio and the CLI show them as sentences.
package sentence

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// From returns msg as a sentence: its Markdown code spans unwrapped (`svc login` → svc login), its
// first word capitalised when that word is a plain lower-case word (an identifier such as authMode or
// limits.requestsPerMinute is left as written), and a full stop at the end unless it ends a sentence
// already. Spaces around it are trimmed; an empty message stays empty.
func From(msg string) string {
	s := strings.TrimSpace(strings.ReplaceAll(msg, "`", ""))
	if s == "" {
		return ""
	}
	if plainWord(firstWord(s)) {
		r, n := utf8.DecodeRuneInString(s)
		s = string(unicode.ToUpper(r)) + s[n:]
	}
	// A closing bracket or quote after the full stop ends the sentence too: "(… another.)".
	switch r, _ := utf8.DecodeLastRuneInString(strings.TrimRight(s, `)]"'”’»`)); r {
	case '.', '?', '!', '…':
	default:
		s += "."
	}
	return s
}

// firstWord is s up to its first space or punctuation that ends a word.
func firstWord(s string) string {
	if i := strings.IndexAny(s, " :;,("); i >= 0 {
		return s[:i]
	}
	return s
}

// plainWord reports whether w is made of lower-case letters only: a word of prose, not an identifier.
func plainWord(w string) bool {
	if w == "" {
		return false
	}
	for _, r := range w {
		if !unicode.IsLower(r) {
			return false
		}
	}
	return true
}
