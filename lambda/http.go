package lambda

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"

	"github.com/verdict-dev/verdict/decision"
)

// ServeHTTP serves the front door's paths over net/http (verdict up). The
// body is read up to the size limit; anything longer is answered 413, and a
// body that stalls past the listener's read deadline 408.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := &Request{Method: r.Method, Path: r.URL.Path, Header: r.Header, PlatformRequestID: r.Header.Get("X-Request-Id")}
	var resp *Response
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(h.cfg.MaxBodyBytes)))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		resp = errorResponse(ErrorBody{Code: decision.CodeTooLarge,
			Message: "body is larger than the limit of " + strconv.Itoa(h.cfg.MaxBodyBytes) + " bytes"})
	case errors.Is(err, os.ErrDeadlineExceeded):
		resp = errorResponse(ErrorBody{Code: decision.CodeTimeout, Message: "the request body did not arrive in time"})
		resp.Status = http.StatusRequestTimeout // the client was slow, not the server
		w.Header().Set("Connection", "close")
	case err != nil:
		resp = errorResponse(ErrorBody{Code: decision.CodeMalformed, Message: "could not read the request body"})
	default:
		req.Body = body
		resp = h.Handle(r.Context(), req)
	}
	resp.Write(w)
}
