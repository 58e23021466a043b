package uphttp

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"net/http"
	"time"
)

// The review inbox page (docs/review.md): static files that hold no data
// and are served without a key. The page asks the reviewer for a key and
// calls the front door's review API (GET /v1/reviews, POST
// /v1/decisions/{id}/feedback) with it.
//
//go:embed review.html review.js review.css
var reviewFiles embed.FS

// Paths of the review inbox page. They are open on `verdict up`'s mux only:
// Routes serves them without asking for a key (they are not in auth.Open,
// which every listener shares).
const (
	ReviewPath       = "/review"
	ReviewScriptPath = "/review.js"
	ReviewStylePath  = "/review.css"
)

// ReviewCSP is the Content-Security-Policy of the review page and its
// files: nothing but this origin's own script, style and API; no inline
// script, style attribute or event handler; no framing; no form posts.
const ReviewCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// reviewFile serves one embedded file of the page with the page's
// security headers; an ETag lets a browser revalidate instead of
// downloading it again.
func reviewFile(name, contentType string) http.Handler {
	body, err := reviewFiles.ReadFile(name)
	if err != nil {
		panic("uphttp: embedded review page file " + name + " is missing: " + err.Error())
	}
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:8]) + `"`
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", contentType)
		h.Set("Content-Security-Policy", ReviewCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", etag)
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(body))
	})
}

// handleReview puts the review page's files on mux, open to anyone.
func handleReview(mux *http.ServeMux) {
	mux.Handle("GET "+ReviewPath, reviewFile("review.html", "text/html; charset=utf-8"))
	mux.Handle("GET "+ReviewScriptPath, reviewFile("review.js", "text/javascript; charset=utf-8"))
	mux.Handle("GET "+ReviewStylePath, reviewFile("review.css", "text/css; charset=utf-8"))
}
