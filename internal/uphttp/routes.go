package uphttp

import (
	"log/slog"
	"net/http"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/auth"
	"github.com/verdict-dev/verdict/lambda"
)

// InternalError answers 500 in the front door's shape and logs the cause.
func InternalError(rw http.ResponseWriter, what string, err error) {
	slog.Error("verdict up: "+what, "err", err)
	lambda.ErrorResponse(lambda.ErrorBody{Code: decision.CodeInternal, Message: "internal error"}).Write(rw)
}

// Routes is the HTTP surface of `verdict up`. Every route but the health
// check (auth.Open) and the review inbox page's static files (ReviewPath
// and its script and style: they hold no data) authenticates its caller
// through the front door, by the rules of package auth, and answers a
// refusal in the front door's shape.
func Routes(front *lambda.Handler, metrics, policyAdmin, pools http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("POST "+lambda.PathDecisions, front)
	mux.Handle("POST "+lambda.PathSystemOneAsync, front)
	mux.Handle("GET "+lambda.PathRequests+"{id}", front)
	mux.Handle("GET "+lambda.PathDecisions+"/{id}", front)
	mux.Handle("POST "+lambda.PathDecisions+"/{id}/feedback", front)
	mux.Handle("GET "+lambda.PathReviews, front)
	mux.Handle("GET /metrics", guarded(front, metrics))
	mux.Handle("GET /v1/status", guarded(front, pools))
	mux.Handle("/admin/policy", guarded(front, policyAdmin))
	mux.Handle("GET /healthz", guarded(front, http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		lambda.JSONResponse(http.StatusOK, map[string]string{"status": "ok"}).Write(rw)
	})))
	// Open: the review page holds no data; it asks for a key and sends it
	// to the API.
	handleReview(mux)
	mux.Handle("/", front) // 404 and 405 answers in the front door's shape
	return mux
}

// guarded serves next to the callers the front door accepts, and to anyone
// on the routes auth.Open names; others get the front door's 401.
func guarded(front *lambda.Handler, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if auth.Open(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		if _, resp := front.Authenticate(&lambda.Request{Method: r.Method, Path: r.URL.Path, Header: r.Header}); resp != nil {
			resp.Write(w)
			return
		}
		next.ServeHTTP(w, r)
	})
}
