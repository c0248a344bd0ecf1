package api_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/svcdev/svc/cloudapi"
)

// GET /v1/models/{id}: a model of the catalog, without a fleet when it has one upstream; one the
// catalog lacks is 404 not_found in the API's envelope, naming it and where the catalog is listed.
func TestModelGet(t *testing.T) {
	e := newEnv(t)
	c := e.user()
	ctx := context.Background()
	m, err := c.GetModel(ctx, "base-b")
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "base-b" || !m.Public || m.Runtime != "simulator" || m.Fleet != nil {
		t.Errorf("base-b: %+v", m)
	}
	_, err = c.GetModel(ctx, "no-such-model")
	var ce *cloudapi.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusNotFound || ce.Code != "not_found" || ce.Message != `the catalog has no model "no-such-model"; svc models list shows those it has` {
		t.Errorf("unknown model: %v", err)
	}
	if _, err := cloudapi.New(e.url, "").GetModel(ctx, "base-b"); !errors.As(err, &ce) || ce.Status != http.StatusUnauthorized {
		t.Errorf("without a token: %v", err)
	}
}
