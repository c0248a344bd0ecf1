package views

import (
	"strconv"
	"time"
)

// Budget is a token budget as the studio shows it: what its period used of it, as a bar (a <meter>)
// with the numbers beside it. The zero value is none.
type Budget struct {
	Set          bool
	Used, Tokens int64
	Period       string    // "day" or "month"
	ResetsAt     time.Time // the end of the period (UTC)
}

// Text reads "1,200 of 10,000 tokens today" or "… this month".
func (b Budget) Text() string {
	when := "today"
	if b.Period == "month" {
		when = "this month"
	}
	return Count(b.Used) + " of " + Count(b.Tokens) + " tokens " + when
}

// Resets reads "resets Dec 3, 00:00 UTC".
func (b Budget) Resets() string { return "resets " + WhenText(b.ResetsAt) }

// Spent reports whether the budget is used up: calls get 429 budget_exhausted until it resets.
func (b Budget) Spent() bool { return b.Used >= b.Tokens }

// Value is what the meter shows: the tokens used, at most the budget (an overshoot of the last call
// shows as full).
func (b Budget) Value() string { return strconv.FormatInt(min(b.Used, b.Tokens), 10) }

// High is where the meter turns to a warning: 80% of the budget.
func (b Budget) High() string { return strconv.FormatInt(b.Tokens*8/10, 10) }

// Max is the meter's maximum: the budget.
func (b Budget) Max() string { return strconv.FormatInt(b.Tokens, 10) }
