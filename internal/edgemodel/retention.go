package edgemodel

import "time"

// Run retention modes.
const (
	RetentionDays      = "days"
	RetentionUnlimited = "unlimited"
	RetentionNone      = "none"
)

// Bounds and default of a retention in days.
const (
	RetentionMinDays     = 1
	RetentionMaxDays     = 365
	DefaultRetentionDays = 7
)

// Retention is a deployment's run retention: whether runs are recorded, and until when they are kept.
// core decides it; the recorder and the edge carry what it says.
type Retention struct {
	Mode string // RetentionDays, RetentionUnlimited or RetentionNone
	Days int    // used by RetentionDays; kept for the other modes so that switching back restores it
}

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
