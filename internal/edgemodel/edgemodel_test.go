package edgemodel

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestRetentionDecidesRecordingAndRunExpiry(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		r       Retention
		records bool
		expires time.Time
	}{
		{Retention{Mode: RetentionDays, Days: 3}, true, at.Add(3 * 24 * time.Hour)},
		{Retention{Mode: RetentionUnlimited, Days: 3}, true, time.Time{}},
		{Retention{Mode: RetentionNone, Days: 3}, false, time.Time{}},
	}
	for _, tc := range cases {
		if tc.r.Records() != tc.records || !tc.r.RunExpiresAt(at).Equal(tc.expires) {
			t.Errorf("%+v: records %v, expires %v; want %v, %v", tc.r, tc.r.Records(), tc.r.RunExpiresAt(at), tc.records, tc.expires)
		}
	}
}

func TestEdgeKeyMatchFindsOnlyTheKeyWhoseHashIsPresented(t *testing.T) {
	limit := 5
	keys := []EdgeSnapshotKey{
		{ID: "k1", Hash: HashSecret("sk-ep-one")},
		{ID: "k2", Hash: HashSecret("sk-ep-two"), Limits: RateLimits{RequestsPerMinute: &limit}},
	}
	if k, ok := EdgeKeyMatch(keys, "sk-ep-two"); !ok || k.ID != "k2" || k.Limits.RequestsPerMinute == nil || *k.Limits.RequestsPerMinute != 5 {
		t.Errorf("EdgeKeyMatch(two) = %+v, %v; want k2 with its limit of 5", k, ok)
	}
	for _, bad := range []string{"", "sk-ep-on", "sk-ep-one ", "SK-EP-ONE"} {
		if k, ok := EdgeKeyMatch(keys, bad); ok {
			t.Errorf("EdgeKeyMatch(%q) matched %s", bad, k.ID)
		}
	}
}

func TestExpiredFromTheMomentItExpires(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var d EdgeDeployment
	if d.Expired(at) || !d.ExpiresAt().IsZero() {
		t.Fatalf("a deployment without expiry expired or has an expiry: %v", d.ExpiresAt())
	}
	d.SetExpiresAt(at)
	if d.Expired(at.Add(-time.Millisecond)) || !d.Expired(at) || !d.ExpiresAt().Equal(at) {
		t.Errorf("expiry at %v: expired a ms before %v, at %v, ExpiresAt %v", at, d.Expired(at.Add(-time.Millisecond)), d.Expired(at), d.ExpiresAt())
	}
	d.SetExpiresAt(time.Time{})
	if d.Expired(at.Add(time.Hour)) {
		t.Error("SetExpiresAt(zero) left an expiry")
	}
}

func TestCodeOfReadsWrappedErrorsOnly(t *testing.T) {
	if got := CodeOf(fmt.Errorf("load: %w", ErrEdgeNotFound)); got != CodeNotFound {
		t.Errorf("CodeOf(wrapped not found) = %q", got)
	}
	if got := CodeOf(errors.New("disk full")); got != "" {
		t.Errorf("CodeOf(internal failure) = %q, want empty", got)
	}
}
