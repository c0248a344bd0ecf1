// Package docs holds the repository's own documents (ARCHITECTURE.md, API.md) and the test that keeps
// code comments and the rule table pointing at things that exist.
package docs
