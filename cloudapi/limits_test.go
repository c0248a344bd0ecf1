package cloudapi

import (
	"encoding/json"
	"strings"
	"testing"
)

// An update sends only the limits it changes: absent is unchanged, null clears, a number sets.
func TestLimitsUpdateWire(t *testing.T) {
	for _, tc := range []struct {
		req  UpdateDeploymentRequest
		want string
	}{
		{UpdateDeploymentRequest{}, `{}`},
		{UpdateDeploymentRequest{Limits: LimitsUpdate{RequestsPerMinute: LimitTo(60)}}, `{"limits":{"requestsPerMinute":60}}`},
		{UpdateDeploymentRequest{Limits: LimitsUpdate{TokensPerMinute: NoLimit()}}, `{"limits":{"tokensPerMinute":null}}`},
		{UpdateDeploymentRequest{Limits: ClearLimits()}, `{"limits":{"requestsPerMinute":null,"tokensPerMinute":null}}`},
	} {
		b, err := json.Marshal(tc.req)
		if err != nil || string(b) != tc.want {
			t.Errorf("encoded %s (%v), want %s", b, err, tc.want)
		}
		// And read back the same way (the studio's JSON route decodes SDK requests).
		var back UpdateDeploymentRequest
		err = json.Unmarshal(b, &back)
		again, _ := json.Marshal(back)
		if err != nil || string(again) != tc.want {
			t.Errorf("%s decoded and encoded again as %s (%v)", b, again, err)
		}
	}
	var u UpdateKeyRequest
	if err := json.Unmarshal([]byte(`{"limits":null}`), &u); err != nil || u.Limits != ClearLimits() {
		t.Errorf(`{"limits":null} decoded as %+v (%v)`, u, err)
	}
	for body, want := range map[string]string{
		`{"limits":{"requestsPerMinute":"60"}}`: "limits.requestsPerMinute must be a whole number",
		`{"limits":{"rpm":60}}`:                 `unknown field "rpm"`,
		`{"limits":60}`:                         "limits must be an object",
	} {
		if err := json.Unmarshal([]byte(body), &u); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", body, err, want)
		}
	}
}
