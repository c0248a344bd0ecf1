package core

import "time"

// Retention is a deployment's run retention: whether runs are recorded, and until when they are kept.
// It is decided here only; the recorder and the edge carry what it says.
type Retention struct {
	Mode string // RetentionDays, RetentionUnlimited or RetentionNone
	Days int    // used by RetentionDays; kept for the other modes so that switching back restores it
}

// DefaultRetention is the retention of a deployment created without one.
var DefaultRetention = Retention{Mode: RetentionDays, Days: DefaultRetentionDays}

// Records reports whether runs of a deployment with this retention are recorded at all.
func (r Retention) Records() bool { return r.Mode == RetentionDays || r.Mode == RetentionUnlimited }

// RunExpiresAt is the expiresAt of a run served at created: created + Days for RetentionDays, the
// zero time (kept until deleted) otherwise. It is fixed when the run is written, so a later change of
// retention leaves earlier runs on their original lifecycle.
func (r Retention) RunExpiresAt(created time.Time) time.Time {
	if r.Mode != RetentionDays {
		return time.Time{}
	}
	days := r.Days
	if days < RetentionMinDays || days > RetentionMaxDays {
		days = DefaultRetentionDays
	}
	return created.Add(time.Duration(days) * 24 * time.Hour)
}

func invalidRetentionMode() error {
	return errorf(CodeInvalidRetention, "runRetentionMode must be %q, %q or %q", RetentionDays, RetentionUnlimited, RetentionNone)
}

// ResolveRetention applies a requested retention over current (DefaultRetention when nil): nil
// fields keep what was there. An explicit mode must be one of the three; explicit days must be within
// 1-365, whatever the mode, so that 0 is an error and never a silent default.
func ResolveRetention(mode *string, days *int, current *Retention) (Retention, error) {
	r := DefaultRetention
	if current != nil {
		r = *current
	}
	if mode != nil {
		switch *mode {
		case RetentionDays, RetentionUnlimited, RetentionNone:
			r.Mode = *mode
		default:
			return r, invalidRetentionMode()
		}
	}
	if days != nil {
		if *days < RetentionMinDays || *days > RetentionMaxDays {
			return r, errorf(CodeInvalidRetention, "runRetentionDays must be between %d and %d (got %d)", RetentionMinDays, RetentionMaxDays, *days)
		}
		r.Days = *days
	}
	return r, nil
}
