// Package static embeds the studio's browser assets: htmx, the stylesheet and app.js.
package static

import "embed"

// FS holds the assets at its root (htmx.min.js, app.css, app.js, favicon.svg); the studio serves it under /static/.
//
//go:embed htmx.min.js app.css app.js favicon.svg
var FS embed.FS
