package core

// StatusOf maps an error code to its HTTP status (DESIGN.md section 3). It lives here, next to the
// codes, so that every surface reports a rule the same way.
func StatusOf(code string) int {
	switch code {
	case CodeInvalidRequest, CodeInvalidSlug, CodeReservedSlug, CodeInvalidTarget, CodeInvalidLabel, CodeInvalidRetention:
		return 400
	case CodeUnauthorized:
		return 401
	case CodeForbidden, CodeAnonymousLimit:
		return 403
	case CodeNotFound, CodeModelNotFound:
		return 404
	case CodeSlugTaken, CodeLabelTaken, CodeKeyLimit, CodeAuthMode:
		return 409
	}
	return 500
}
