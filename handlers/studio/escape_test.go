package studio

import (
	"net/http"
	"strings"
	"testing"

	"github.com/svcdev/svc/cloudapi"
)

// Hostile labels and slugs render as text. The fake accepts any slug, as a compromised or buggy
// cloud might, so the studio's escaping is what is tested.
func TestHostileLabelsAndSlugsAreEscaped(t *testing.T) {
	h := scopedHarness(t)
	evilSlug := `<img src=x onerror=alert(1)>`
	evilLabel := `<script>alert("key")</script>`
	d := h.cloud.add(cloudapi.Deployment{Slug: evilSlug, Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: `"><script>alert(2)</script>`}})
	h.cloud.addKey(d.ID, cloudapi.Key{ID: "k1", Label: evilLabel, Prefix: "sk-ep-<b>x</b>", Enabled: true})

	pages := map[string]response{
		"list":   h.api(http.MethodGet, "/api/deployments", nil, asHTMX),
		"detail": h.api(http.MethodGet, "/api/deployments/"+d.ID+"?section=keys", nil, asHTMX),
	}
	issued := h.api(http.MethodPost, "/api/deployments/"+d.ID+"/keys", "label=%3Cscript%3Ealert(3)%3C%2Fscript%3E", asHTMX, asForm)
	wantStatus(t, issued, http.StatusCreated)
	pages["issued"] = issued
	for name, r := range pages {
		wantStatus(t, r, r.status)
		for _, bad := range []string{"<script>", "<img src=x", "<b>x</b>"} {
			if strings.Contains(r.body, bad) {
				t.Errorf("%s: raw %q in the HTML", name, bad)
			}
		}
	}
	if !strings.Contains(pages["detail"].body, "&lt;script&gt;alert(&#34;key&#34;)&lt;/script&gt;") {
		t.Errorf("the label is not shown escaped: %s", pages["detail"].body)
	}
	if !strings.Contains(pages["list"].body, "&lt;img src=x onerror=alert(1)&gt;") {
		t.Error("the slug is not shown escaped")
	}
}
