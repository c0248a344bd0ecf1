package core

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/svcdev/svc/internal/edgemodel"
)

// Limits of the service (docs/ARCHITECTURE.md, "Where each rule lives").
const (
	SlugMinLen     = 2
	SlugMaxLen     = 50
	LabelMaxLen    = 80
	MaxEnabledKeys = 20
)

var slugPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*[a-z0-9]$`)

// reservedSlugs are names that would read as part of the service itself, or that hosts commonly need.
var reservedSlugs = map[string]bool{
	"www": true, "api": true, "app": true, "admin": true, "dashboard": true, "docs": true, "status": true,
	"studio": true, "console": true, "auth": true, "login": true, "oauth": true, "account": true,
	"accounts": true, "billing": true, "blog": true, "help": true, "support": true, "mail": true,
	"smtp": true, "ftp": true, "cdn": true, "static": true, "assets": true, "edge": true, "internal": true,
	"localhost": true, "root": true, "system": true, "health": true, "metrics": true, "v1": true, "e": true,
}

// ValidateSlug checks a deployment slug: 2-50 characters of lowercase letters, digits
// and hyphens, starting and ending with a letter or digit, and not a reserved word.
func ValidateSlug(slug string) error {
	switch {
	case len(slug) < SlugMinLen || len(slug) > SlugMaxLen:
		return errorf(edgemodel.CodeInvalidSlug, "slug must be %d to %d characters long (got %d)", SlugMinLen, SlugMaxLen, utf8.RuneCountInString(slug))
	case !slugPattern.MatchString(slug):
		return errorf(edgemodel.CodeInvalidSlug, "slug may contain only lowercase letters, digits and hyphens, and must start and end with a letter or digit")
	case reservedSlugs[slug]:
		return errorf(edgemodel.CodeReservedSlug, "slug %q is reserved; choose another name", slug)
	}
	return nil
}

// ValidateLabel checks a key label: 1-80 characters, not blank, no control characters.
func ValidateLabel(label string) error {
	n := utf8.RuneCountInString(label)
	switch {
	case !utf8.ValidString(label):
		return errorf(edgemodel.CodeInvalidLabel, "label must be valid UTF-8 text")
	case strings.TrimSpace(label) == "":
		return errorf(edgemodel.CodeInvalidLabel, "label is required (1 to %d characters)", LabelMaxLen)
	case n > LabelMaxLen:
		return errorf(edgemodel.CodeInvalidLabel, "label must be at most %d characters (got %d)", LabelMaxLen, n)
	case strings.IndexFunc(label, unicode.IsControl) >= 0:
		return errorf(edgemodel.CodeInvalidLabel, "label must not contain control characters")
	}
	return nil
}

// ValidateAuthMode checks an auth mode.
func ValidateAuthMode(mode string) error {
	if mode != edgemodel.AuthFixedAPIKey && mode != edgemodel.AuthNone {
		return errorf(edgemodel.CodeInvalidRequest, "authMode must be %q or %q", edgemodel.AuthFixedAPIKey, edgemodel.AuthNone)
	}
	return nil
}
