package views

// Feedback's words, the studio's and the CLI's (docs/API.md, "Feedback"): a score is good (1), bad (-1)
// or neutral (0), each with its own mark (icon, colour and word), so that good and bad never look alike.

// FeedbackWord is a score's word: "good", "bad" or "neutral".
func FeedbackWord(score int) string {
	switch score {
	case 1:
		return "good"
	case -1:
		return "bad"
	}
	return "neutral"
}

// FeedbackIcon is a score's icon: ✓ good, ✗ bad, – neutral.
func FeedbackIcon(score int) string {
	switch score {
	case 1:
		return "✓"
	case -1:
		return "✗"
	}
	return "–"
}

// feedbackText says which feedback a run was given: "Marked bad".
func feedbackText(score int) string { return "Marked " + FeedbackWord(score) }

// feedbackClass is the mark's colour class: feedback-good (green), feedback-bad (red), feedback-neutral.
func feedbackClass(score int) string { return "feedback-" + FeedbackWord(score) }

// feedbackChoices are the feedback buttons of a run, in order.
var feedbackChoices = []struct {
	Score int
	Label string
}{{1, "Mark this answer good"}, {0, "Mark this answer neutral"}, {-1, "Mark this answer bad"}}

// feedbackButtonText is a feedback button's word: Good, Neutral, Bad.
func feedbackButtonText(score int) string {
	w := FeedbackWord(score)
	return string(w[0]-'a'+'A') + w[1:]
}
