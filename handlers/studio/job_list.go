package studio

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/views"
)

// jobsBody is the JSON of the job list, shaped like the management API's.
type jobsBody struct {
	Jobs []cloudapi.Job `json:"jobs"`
}

// jobList is GET /api/jobs, the create form's job picker. Like the deployment list, it is empty
// without any upstream call while there is no state file: no project, no jobs.
func (s *Server) jobList(c echo.Context) error {
	ctx := c.Request().Context()
	jobs := []cloudapi.Job{}
	if s.local.HasState() {
		cl, err := s.projectClient(ctx)
		if err != nil {
			return err
		}
		if jobs, err = cl.ListJobs(ctx); err != nil {
			return err
		}
	}
	opts := views.Options[views.Job]{Selected: c.QueryParam("selected")}
	for _, j := range jobs {
		opts.Items = append(opts.Items, jobView(j))
	}
	return render(c, http.StatusOK, views.JobOptions(opts), jobsBody{Jobs: jobs})
}
