package edgemodel

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxFeedbackComment bounds a feedback comment, in characters (docs/API.md, "Feedback").
const MaxFeedbackComment = 2000

// FeedbackProblem is the rule of a feedback's values, judged alike by the API and by every edge: a
// score of -1, 0 or 1 and a comment of at most MaxFeedbackComment characters of text (no control
// characters but newlines and tabs). It returns the field at fault and why, or "" and "".
func FeedbackProblem(score int, comment string) (field, message string) {
	if score < -1 || score > 1 {
		return "score", fmt.Sprintf("score must be -1, 0 or 1 (got %d)", score)
	}
	switch n := utf8.RuneCountInString(comment); {
	case !utf8.ValidString(comment):
		return "comment", "comment must be valid UTF-8 text"
	case n > MaxFeedbackComment:
		return "comment", fmt.Sprintf("comment must be at most %d characters (got %d)", MaxFeedbackComment, n)
	case strings.IndexFunc(comment, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }) >= 0:
		return "comment", "comment must not contain control characters other than newlines and tabs"
	}
	return "", ""
}
