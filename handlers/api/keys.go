package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
)

func (h *Handler) keyList(c echo.Context) error {
	keys, err := h.svc.ListKeys(c.Request().Context(), project(c), c.Param("id"))
	if err != nil {
		return err
	}
	out := make([]cloudapi.Key, len(keys))
	for i, k := range keys {
		out[i] = keyWire(k)
	}
	return c.JSON(http.StatusOK, map[string]any{"keys": out})
}

func (h *Handler) keyIssue(c echo.Context) error {
	var req struct {
		Label  string     `json:"label"`
		Budget budgetBody `json:"budget"`
		Weight int        `json:"weight"`
	}
	if err := decode(c, &req, budgetNullable); err != nil {
		return err
	}
	issued, err := h.svc.IssueKeyWith(c.Request().Context(), project(c), c.Param("id"), core.NewKey{Label: req.Label, Budget: req.Budget.change.Value, Weight: req.Weight})
	if err != nil {
		return err
	}
	// The only response that ever carries a key's plaintext: keep it out of caches.
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, cloudapi.IssuedKey{Key: keyWire(issued.Key), Plaintext: issued.Plaintext})
}

func (h *Handler) keyRevoke(c echo.Context) error {
	k, err := h.svc.RevokeKey(c.Request().Context(), project(c), c.Param("id"), c.Param("keyId"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, keyWire(*k))
}
