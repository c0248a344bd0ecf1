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

// FormTokens is the budget's tokens as its form shows them: "" for none.
func (b Budget) FormTokens() string {
	if !b.Set {
		return ""
	}
	return strconv.FormatInt(b.Tokens, 10)
}

// BudgetForm is the Settings' budget card of a deployment: its token budget ("" tokens: none; period
// "day" or "month") and its calls' longest wait for their model's turn (QueueTimeoutMs, "" for the
// model's), as typed, with the errors of a refused save keyed by field name ("budgetTokens",
// "budgetPeriod", "queueTimeoutMs"); Message is a form-wide error.
type BudgetForm struct {
	EndpointID     string
	Tokens, Period string
	QueueTimeoutMs string
	Current        Budget // the budget as saved, with what its period used
	Errors         map[string]string
	Message        string
	Saved          bool
}

// BudgetSetText says a budget as set: "1,000 tokens a day", "no budget".
func BudgetSetText(tokens, period string) string {
	n, err := strconv.ParseInt(tokens, 10, 64)
	if err != nil {
		return "no budget"
	}
	if period == "month" {
		return Count(n) + " tokens a month"
	}
	return Count(n) + " tokens a day"
}

// QueueTimeoutText says a deployment's wait bound: "calls wait at most 5,000 ms for their turn", or
// the model's.
func QueueTimeoutText(ms string) string {
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return "calls wait for their turn as long as the model says (30 s by default)"
	}
	return "calls wait at most " + Count(n) + " ms for their turn"
}

// SavedText is the card's confirmation: "1,000 tokens a day; calls wait at most 5,000 ms for their turn".
func (f BudgetForm) SavedText() string {
	return BudgetSetText(f.Tokens, f.Period) + "; " + QueueTimeoutText(f.QueueTimeoutMs)
}
