package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
)

func (h *Handler) keyUpdate(c echo.Context) error {
	var req cloudapi.UpdateKeyRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	k, err := h.svc.UpdateKey(c.Request().Context(), project(c), c.Param("id"), c.Param("keyId"), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, k)
}
