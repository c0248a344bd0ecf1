package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/internal/bodydeadline"
	"github.com/svcdev/svc/internal/strictjson"
)

const maxBody = 1 << 20

// maxDrain is how much of a refused body is read and thrown away after the 413, so that the connection
// closes cleanly rather than with a reset that would destroy the answer before the client reads it.
const maxDrain = 16 << 20

// rawBodyKey keeps the request body as it came, before limitBody capped it.
const rawBodyKey = "svc.rawBody"

// limitBody caps request bodies; decode reports the overflow as 413.
func limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Set(rawBodyKey, c.Request().Body)
		if c.Request().ContentLength > maxBody {
			return echo.NewHTTPError(http.StatusRequestEntityTooLarge)
		}
		c.Request().Body = http.MaxBytesReader(c.Response(), c.Request().Body, maxBody)
		return next(c)
	}
}

// refuseBody sends the answer to a request whose body is refused unread (413), so that a client that
// sent it without "Expect: 100-continue" can read it: the answer goes out at once, with "Connection:
// close", and the rest of the body (up to maxDrain, within the body deadline) is read and thrown away
// before the connection closes. Without this Go closes a connection with unread data, which makes the
// kernel send a reset that destroys the answer in flight.
func refuseBody(c echo.Context, write func()) {
	rc := http.NewResponseController(c.Response())
	// Reads after the answer has started need full duplex on HTTP/1 (else Go stops the body).
	duplex := rc.EnableFullDuplex() == nil
	c.Response().Header().Set("Connection", "close")
	write()
	_ = rc.Flush()
	if raw, ok := c.Get(rawBodyKey).(io.Reader); ok && duplex {
		_, _ = io.Copy(io.Discard, io.LimitReader(raw, maxDrain))
	}
}

// decode reads a JSON body strictly (internal/strictjson): unknown, duplicate and null fields (but
// for the nullable paths named), wrong types and trailing data are 400s naming the field. An empty
// body reads as {}.
func decode(c echo.Context, v any, nullable ...string) error {
	data, err := io.ReadAll(c.Request().Body)
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return echo.NewHTTPError(http.StatusRequestEntityTooLarge)
		case bodydeadline.Exceeded(err):
			return err // 408: the body read deadline passed
		}
		return &edgemodel.Error{Code: edgemodel.CodeInvalidRequest, Message: "could not read the request body"}
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		data = []byte("{}")
	}
	if err := strictjson.Decode(data, v, nullable...); err != nil {
		return &edgemodel.Error{Code: edgemodel.CodeInvalidRequest, Message: err.Error()}
	}
	return nil
}

// pageQuery reads the limit and cursor query parameters of a listing.
func pageQuery(c echo.Context) (limit int, cursor string, err error) {
	if s := c.QueryParam("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 1 {
			return 0, "", &edgemodel.Error{Code: edgemodel.CodeInvalidRequest, Message: fmt.Sprintf("limit must be a whole number of 1 or more (got %q)", s)}
		}
	}
	return limit, c.QueryParam("cursor"), nil
}

// bearer returns the token of an Authorization: Bearer header.
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}
