package uphttp

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReviewPageIsOpenAndLocked: with keys configured, the review page and
// its script and style open without a key, each under the strict
// Content-Security-Policy and the other security headers; nothing else
// near those paths opens.
func TestReviewPageIsOpenAndLocked(t *testing.T) {
	t.Parallel()
	rig := newUpRig(t, map[string]string{"k1": "acme"})
	for path, ctype := range map[string]string{ReviewPath: "text/html", ReviewScriptPath: "text/javascript", ReviewStylePath: "text/css"} {
		rec := rig.do("GET", path)
		require.Equal(t, http.StatusOK, rec.Code, "%s opens without a key", path)
		require.True(t, strings.HasPrefix(rec.Header().Get("Content-Type"), ctype), "%s: %s", path, rec.Header().Get("Content-Type"))
		require.Equal(t, ReviewCSP, rec.Header().Get("Content-Security-Policy"), path)
		require.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"), path)
		require.Equal(t, "DENY", rec.Header().Get("X-Frame-Options"), path)
		require.Equal(t, "no-referrer", rec.Header().Get("Referrer-Policy"), path)
		require.Empty(t, rec.Header().Get("Set-Cookie"), path)
		require.NotEmpty(t, rec.Body.String(), path)

		etag := rec.Header().Get("ETag")
		require.NotEmpty(t, etag, path)
		require.Equal(t, http.StatusNotModified, rig.do("GET", path, "If-None-Match", etag).Code, "%s revalidates", path)
		require.Equal(t, http.StatusOK, rig.do("HEAD", path).Code, path)
	}
	require.Contains(t, ReviewCSP, "default-src 'self'")
	require.Contains(t, ReviewCSP, "script-src 'self';")
	require.NotContains(t, ReviewCSP, "unsafe-inline")
	require.NotContains(t, ReviewCSP, "unsafe-eval")

	// Only those exact paths and GET open: the rest is the front door's.
	for _, rt := range [][2]string{{"POST", ReviewPath}, {"GET", ReviewPath + "/"}, {"GET", ReviewPath + "s"}, {"GET", "/v1/reviews"}} {
		rec := rig.do(rt[0], rt[1])
		require.NotEqual(t, http.StatusOK, rec.Code, "%v", rt)
		require.NotContains(t, rec.Body.String(), "<html", "%v", rt)
	}
	require.Equal(t, http.StatusUnauthorized, rig.do("GET", "/v1/reviews").Code, "the API behind the page still wants a key")
}

// TestReviewPageMarkup: the page's files keep the rules the CSP and
// docs/review.md promise, read from the files themselves: a labelled
// password field, no inline script, style attribute or event handler, no
// outside resource, values set as text, the key only in a header.
func TestReviewPageMarkup(t *testing.T) {
	t.Parallel()
	read := func(name string) string {
		b, err := reviewFiles.ReadFile(name)
		require.NoError(t, err)
		return string(b)
	}
	html, js, css := read("review.html"), read("review.js"), read("review.css")

	require.Regexp(t, `<label for="api-key">`, html)
	require.Regexp(t, `<input id="api-key"[^>]*type="password"`, html)
	require.Contains(t, html, "1</kbd>–<kbd>9", "the keyboard shortcuts are documented on the page")
	require.NotRegexp(t, `(?i)\son[a-z]+\s*=`, html, "no inline event handler")
	require.NotRegexp(t, `(?i)\sstyle\s*=`, html, "no style attribute")
	require.NotRegexp(t, `(?i)<style`, html, "no inline style element")
	for _, m := range regexp.MustCompile(`(?is)<script([^>]*)>(.*?)</script>`).FindAllStringSubmatch(html, -1) {
		require.Contains(t, m[1], `src="review.js"`, "the only script is review.js")
		require.Empty(t, strings.TrimSpace(m[2]), "no inline script")
	}
	for name, s := range map[string]string{"html": html, "js": js, "css": css} {
		require.NotRegexp(t, `(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`, stripComments(s), "%s loads nothing from elsewhere", name)
	}
	require.NotRegexp(t, `\.(innerHTML|outerHTML)\b|insertAdjacentHTML|document\.write|\beval\(|new Function`, js, "values reach the page as text")
	require.NotRegexp(t, `setAttribute\(\s*'(style|on)`, js)
	require.NotRegexp(t, `(?i)document\.cookie|localStorage|sessionStorage`, js, "the key is kept in memory only")
	require.Contains(t, js, `'X-Api-Key': apiKey`)
	require.Contains(t, js, `credentials: 'omit'`)
	require.Contains(t, js, `source: 'review'`)
}

// stripComments drops // and /* */ comments (a rough cut, enough for the
// page's own files) so that prose in them is not read as a URL.
func stripComments(s string) string {
	s = regexp.MustCompile(`(?s)/\*.*?\*/`).ReplaceAllString(s, "")
	return regexp.MustCompile(`(?m)^\s*//.*$`).ReplaceAllString(s, "")
}
