package views

import (
	"testing"
	"time"
)

// An anonymous endpoint says when it is deleted, in a date and in words; one that is near warns.
func TestLifetimeWordsExpiry(t *testing.T) {
	created := time.Date(2026, 12, 2, 14, 5, 0, 0, time.UTC)
	week := created.Add(7 * 24 * time.Hour)
	for _, tc := range []struct {
		now  time.Time
		in   string
		soon bool
	}{
		{created.Add(time.Minute), "in 7 days", false},
		{week.Add(-50 * time.Hour), "in 2 days", false},
		{week.Add(-47 * time.Hour), "in 47 hours", true},
		{week.Add(-90 * time.Minute), "in 90 minutes", true},
		{week.Add(-time.Minute), "in 1 minute", true},
		{week.Add(time.Second), "any moment now", true},
	} {
		l := NewLifetime(created, &week, tc.now)
		if l.Created != "Dec 2, 14:05 UTC" || l.Expires != "Dec 9, 14:05 UTC" || l.ExpiresIn != tc.in || l.Soon != tc.soon {
			t.Errorf("at %s: %+v, want expires %q, soon %v", tc.now, l, tc.in, tc.soon)
		}
	}
	if l := NewLifetime(created, nil, created); l.Expires != "" || l.ExpiresIn != "" || l.Soon {
		t.Errorf("an endpoint that never expires: %+v", l)
	}
}
