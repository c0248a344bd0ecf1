package core

import "github.com/svcdev/svc/internal/edgemodel"

// Retention is a deployment's run retention (edgemodel.Retention, with Records and RunExpiresAt). It
// is decided here only (ResolveRetention); the recorder and the edge carry what it says.
type Retention = edgemodel.Retention

// DefaultRetention is the retention of a deployment created without one.
var DefaultRetention = Retention{Mode: RetentionDays, Days: DefaultRetentionDays}

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
