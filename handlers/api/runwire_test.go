package api

import (
	"reflect"
	"testing"
)

// Every field of a run reaches the API: each field of the SDK's run is fed from core's run by name,
// and each field of core's run feeds one, but for the bodies (runWire) and what the API never shows.
// A field added to runs.Run and not to cloudapi.RunSummary (or named differently) fails here.
func TestEveryRunFieldReachesTheAPI(t *testing.T) {
	if got := summaryWire.Unfed(); len(got) != 0 {
		t.Errorf("fields of cloudapi.RunSummary that no field of core.RunSummary feeds: %v", got)
	}
	want := []string{"Request", "Response", "UsageOnly"}
	if got := summaryWire.Unread(); !reflect.DeepEqual(got, want) {
		t.Errorf("fields of core.RunSummary the API does not show: %v, want %v", got, want)
	}
}
