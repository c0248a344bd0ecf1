// Package core holds the rules of the service (slugs, labels, retention, targets, keys, scopes) and
// the operations that apply them to the database; it knows nothing of HTTP.
package core
