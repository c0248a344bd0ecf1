package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/core"
)

func (h *Handler) usageGet(c echo.Context) error {
	u, err := h.svc.Usage(c.Request().Context(), project(c), c.Param("id"), core.UsageRequest{
		From: c.QueryParam("from"), To: c.QueryParam("to"), Granularity: c.QueryParam("granularity"), KeyID: c.QueryParam("keyId"),
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, u)
}
