package studio

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/views"
)

// modelsBody is the JSON of the model list, shaped like the management API's.
type modelsBody struct {
	Models []cloudapi.Model `json:"models"`
}

// modelList is GET /api/models, the create form's base-model picker (docs/API.md, "Studio loopback
// routes"): the form needs the catalog, and the SDK has ListModels. Being a GET without the CSRF
// token, it never mints credentials; the form mints them with POST /api/credentials as it opens.
func (s *Server) modelList(c echo.Context) error {
	ctx := c.Request().Context()
	cl, err := s.readClient(ctx)
	if err != nil {
		return err
	}
	models, err := cl.ListModels(ctx)
	if err != nil {
		return err
	}
	if models == nil {
		models = []cloudapi.Model{}
	}
	opts := views.Options[views.Model]{Selected: c.QueryParam("selected")}
	for _, m := range models {
		opts.Items = append(opts.Items, views.Model{ID: m.ID, Default: m.Default, Simulated: m.Simulated || m.Runtime == "simulator"})
	}
	return render(c, http.StatusOK, views.ModelOptions(opts), modelsBody{Models: models})
}
