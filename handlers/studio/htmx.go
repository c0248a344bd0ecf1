package studio

import (
	"encoding/json"

	"github.com/labstack/echo/v4"
)

// The htmx headers the studio reads and writes, in one place.
const (
	hxRequest  = "HX-Request"
	hxTarget   = "HX-Target"
	hxRetarget = "HX-Retarget"
	hxReswap   = "HX-Reswap"
	hxTrigger  = "HX-Trigger"
	// hxTriggerAfterSettle fires its event once the response is in the page.
	hxTriggerAfterSettle = "HX-Trigger-After-Settle"
	// svcStatus carries the status of a failed htmx request, which is answered 200 (see renderHTML).
	svcStatus = "Svc-Status"
)

// isHTMX reports whether htmx made the request, i.e. whether it wants a fragment.
func isHTMX(c echo.Context) bool {
	return c.Request().Header.Get(hxRequest) == "true"
}

// targetID is the id of the element the response will be swapped into.
func targetID(c echo.Context) string {
	return c.Request().Header.Get(hxTarget)
}

// retarget sends the fragment to another element than the one that asked, swapped as swap.
func retarget(c echo.Context, selector, swap string) {
	h := c.Response().Header()
	h.Set(hxRetarget, selector)
	h.Set(hxReswap, swap)
}

// trigger fires a client-side event when the response arrives. An object value is event.detail
// itself; any other value lands in event.detail.value.
func trigger(c echo.Context, event string, value any) {
	b, _ := json.Marshal(map[string]any{event: value})
	c.Response().Header().Set(hxTrigger, string(b))
}

// triggerAfterSettle is trigger, fired once the response has been swapped in and settled.
func triggerAfterSettle(c echo.Context, event string, value any) {
	b, _ := json.Marshal(map[string]any{event: value})
	c.Response().Header().Set(hxTriggerAfterSettle, string(b))
}

// noSwap tells htmx to leave the page as it is.
func noSwap(c echo.Context) {
	c.Response().Header().Set(hxReswap, "none")
}
