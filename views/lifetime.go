package views

import (
	"strconv"
	"time"
)

// Lifetime is when an endpoint was made and, for an anonymous identity's, when it is deleted (docs/API.md,
// "Anonymous identities"), worded for the list and the overview.
type Lifetime struct {
	Created string // "Dec 2, 14:05 UTC"
	// Expires is the deletion time ("Dec 9, 14:05 UTC") and ExpiresIn how far off it is ("in 6 days",
	// "in 3 hours"); both "" for an endpoint that never expires.
	Expires, ExpiresIn string
	// Soon is set when the endpoint is deleted within expiringSoon: the detail view warns on every section.
	Soon bool
}

// expiringSoon is how close an endpoint's deletion is when every section of its page warns of it.
const expiringSoon = 48 * time.Hour

// NewLifetime words an endpoint's creation and expiry as seen at now.
func NewLifetime(created time.Time, expires *time.Time, now time.Time) Lifetime {
	l := Lifetime{Created: WhenText(created)}
	if expires == nil {
		return l
	}
	left := expires.Sub(now)
	l.Expires, l.ExpiresIn, l.Soon = WhenText(*expires), untilText(left), left < expiringSoon
	return l
}

// WhenText is a time as the studio says it: "Dec 2, 14:05 UTC".
func WhenText(t time.Time) string { return t.UTC().Format("Jan 2, 15:04 UTC") }

// untilText is a time left, rounded, in its largest unit: "in 7 days", "in 3 hours", "in 5 minutes".
func untilText(d time.Duration) string {
	unit := func(n int, word string) string {
		if n == 1 {
			return "in 1 " + word
		}
		return "in " + strconv.Itoa(n) + " " + word + "s"
	}
	switch {
	case d >= 48*time.Hour:
		return unit(int(d.Round(24*time.Hour)/(24*time.Hour)), "day")
	case d >= 2*time.Hour:
		return unit(int(d.Round(time.Hour)/time.Hour), "hour")
	case d >= time.Minute:
		return unit(int(d/time.Minute), "minute")
	}
	return "any moment now"
}
