package studio

import (
	"net/http"
	"strings"
	"testing"

	"github.com/svcdev/svc/cloudapi"
)

func withTarget(id string) reqOpt { return func(r *http.Request) { r.Header.Set(hxTarget, id) } }

// The studio turns typed text into numbers within the cloud's range: text that is no number, 0 and
// too large a number are refused under their field before any cloud call, in the form's own words
// (the field's label, "empty" rather than the API's null), with what was typed kept; bad ranges of
// the usage card are a 400.
func TestLimitsFormRefusesTextBeforeAnyCall(t *testing.T) {
	h := scopedHarness(t)
	d := h.cloud.add(deployment("limited"))
	h.cloud.addKey(d.ID, cloudapi.Key{ID: "k1", Label: "ci", Prefix: "sk-ep-abcdef", Enabled: true})
	before := h.cloud.callCount()

	r := h.api(http.MethodPatch, "/api/deployments/"+d.ID, "requestsPerMinute=ten&tokensPerMinute=", asHTMX, asForm, withTarget("limits"))
	wantStatus(t, r, http.StatusBadRequest)
	for _, want := range []string{`id="limits"`, `value="ten"`, `aria-invalid="true"`,
		"Requests per minute must be a whole number from 1 to 1,000,000,000, or empty for unlimited."} {
		if !strings.Contains(r.body, want) {
			t.Errorf("refused limits card lacks %q:\n%s", want, r.body)
		}
	}
	for _, typed := range []string{"0", "-5", "1000000001"} {
		r = h.api(http.MethodPatch, "/api/deployments/"+d.ID, "requestsPerMinute=60&tokensPerMinute="+typed, asHTMX, asForm, withTarget("limits"))
		wantStatus(t, r, http.StatusBadRequest)
		if !strings.Contains(r.body, "Tokens per minute must be a whole number from 1 to 1,000,000,000, or empty for unlimited.") ||
			!strings.Contains(r.body, `value="`+typed+`"`) || strings.Contains(r.body, "limits.") {
			t.Errorf("tokens per minute %s:\n%s", typed, r.body)
		}
	}
	r = h.api(http.MethodPatch, "/api/deployments/"+d.ID+"/keys/k1", "requestsPerMinute=&tokensPerMinute=1.5", asHTMX, asForm)
	wantStatus(t, r, http.StatusBadRequest)
	if !strings.Contains(r.body, `data-testid="key-limits-form"`) || !strings.Contains(r.body, `value="1.5"`) {
		t.Errorf("refused key limits form:\n%s", r.body)
	}
	r = h.api(http.MethodGet, "/api/deployments/"+d.ID+"/usage?range=week", nil, asHTMX)
	wantStatus(t, r, http.StatusBadRequest)
	if n := h.cloud.callCount() - before; n != 0 {
		t.Fatalf("%d cloud calls for input the studio refuses: %v", n, h.cloud.callList())
	}
}
