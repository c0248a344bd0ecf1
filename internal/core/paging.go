package core

import (
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/svcdev/svc/internal/edgemodel"
)

// Page sizes of the deployment and job listings (docs/API.md, "Paging").
const (
	DefaultPageSize = 100
	MaxPageSize     = 500
)

// Page sizes of the run listing, whose rows are larger.
const (
	DefaultRunPageSize = 50
	MaxRunPageSize     = 200
)

// PageLimit checks a requested page size for the deployment and job listings: 0 means the default.
func PageLimit(limit int) (int, error) { return pageLimit(limit, DefaultPageSize, MaxPageSize) }

func pageLimit(limit, def, max int) (int, error) {
	if limit == 0 {
		return def, nil
	}
	if limit < 1 || limit > max {
		return 0, errorf(edgemodel.CodeInvalidRequest, "limit must be between 1 and %d (got %d)", max, limit)
	}
	return limit, nil
}

// encodeCursor names the last row of a page, (created_at, id), in a form callers treat as opaque.
func encodeCursor(at int64, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at, 10) + ":" + id))
}

// decodeCursor reads a cursor; "" is the first page (0, "").
func decodeCursor(c string) (int64, string, error) {
	if c == "" {
		return 0, "", nil
	}
	bad := errorf(edgemodel.CodeInvalidRequest, "cursor is not valid; pass the nextCursor of a previous page")
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, "", bad
	}
	at, id, ok := strings.Cut(string(b), ":")
	n, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || n <= 0 || id == "" {
		return 0, "", bad
	}
	return n, id, nil
}
