package core

import "github.com/svcdev/svc/internal/edgemodel"

// DefaultRetention is the retention of a deployment created without one.
var DefaultRetention = edgemodel.Retention{Mode: edgemodel.RetentionDays, Days: edgemodel.DefaultRetentionDays}

func invalidRetentionMode() error {
	return errorf(edgemodel.CodeInvalidRetention, "runRetentionMode must be %q, %q or %q", edgemodel.RetentionDays, edgemodel.RetentionUnlimited, edgemodel.RetentionNone)
}

// ResolveRetention applies a requested retention over current (DefaultRetention when nil): nil
// fields keep what was there. An explicit mode must be one of the three; explicit days must be within
// 1-365, whatever the mode, so that 0 is an error and never a silent default.
func ResolveRetention(mode *string, days *int, current *edgemodel.Retention) (edgemodel.Retention, error) {
	r := DefaultRetention
	if current != nil {
		r = *current
	}
	if mode != nil {
		switch *mode {
		case edgemodel.RetentionDays, edgemodel.RetentionUnlimited, edgemodel.RetentionNone:
			r.Mode = *mode
		default:
			return r, invalidRetentionMode()
		}
	}
	if days != nil {
		if *days < edgemodel.RetentionMinDays || *days > edgemodel.RetentionMaxDays {
			return r, errorf(edgemodel.CodeInvalidRetention, "runRetentionDays must be between %d and %d (got %d)", edgemodel.RetentionMinDays, edgemodel.RetentionMaxDays, *days)
		}
		r.Days = *days
	}
	return r, nil
}
