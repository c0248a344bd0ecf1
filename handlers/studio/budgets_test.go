package studio

import (
	"net/http"
	"strings"
	"testing"

	"github.com/svcdev/svc/cloudapi"
)

// The budget card and a key's dialog read their text as the limits do: a budget that is no whole
// number in range, a period other than day or month, and a queue bound out of range are refused under
// their field before any cloud call, in the form's words, with what was typed kept.
func TestBudgetFormsRefuseTextBeforeAnyCall(t *testing.T) {
	h := scopedHarness(t)
	d := h.cloud.add(deployment("budgeted"))
	h.cloud.addKey(d.ID, cloudapi.Key{ID: "k1", Label: "ci", Prefix: "sk-ep-abcdef", Enabled: true})
	before := h.cloud.callCount()

	for _, c := range []struct{ form, typed, want string }{
		{"budgetTokens=lots&budgetPeriod=day&queueTimeoutMs=", `value="lots"`, "Token budget must be a whole number from 1 to 1,000,000,000,000, or empty for none."},
		{"budgetTokens=0&budgetPeriod=day&queueTimeoutMs=", `value="0"`, "Token budget must be a whole number from 1 to 1,000,000,000,000, or empty for none."},
		{"budgetTokens=1000&budgetPeriod=week&queueTimeoutMs=", `value="1000"`, "Choose a budget per day or per month."},
		{"budgetTokens=&budgetPeriod=day&queueTimeoutMs=600001", `value="600001"`, "The longest wait must be a whole number of milliseconds from 1 to 600,000, or empty for the model&#39;s."},
	} {
		r := h.api(http.MethodPatch, "/api/deployments/"+d.ID, c.form, asHTMX, asForm, withTarget("budget-card"))
		wantStatus(t, r, http.StatusBadRequest)
		for _, want := range []string{`id="budget-card"`, c.typed, `aria-invalid="true"`, c.want} {
			if !strings.Contains(r.body, want) {
				t.Errorf("%s: the refused budget card lacks %q:\n%s", c.form, want, r.body)
			}
		}
	}
	r := h.api(http.MethodPatch, "/api/deployments/"+d.ID+"/keys/k1", "requestsPerMinute=&tokensPerMinute=&budgetTokens=-3&budgetPeriod=month", asHTMX, asForm)
	wantStatus(t, r, http.StatusBadRequest)
	for _, want := range []string{`data-testid="key-limits-form"`, `value="-3"`, "Token budget must be a whole number from 1", `<option value="month" selected>`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the refused key dialog lacks %q:\n%s", want, r.body)
		}
	}
	if n := h.cloud.callCount() - before; n != 0 {
		t.Fatalf("%d cloud calls for input the studio refuses: %v", n, h.cloud.callList())
	}
}
