package lambda

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"

	"github.com/verdict-dev/verdict/decision"
)

// ServeHTTP serves the front door's paths over net/http (verdict up). A
// caller without a valid key is answered 401 from its headers, before its
// body is read, and the connection is closed, so a client with no key
// cannot hold one open by sending its body slowly. The body is read up to
// the size limit; anything longer is answered 413, and a body that stalls
// past the listener's read deadline 408.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := &Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header, PlatformRequestID: r.Header.Get("X-Request-Id")}
	var resp *Response
	if _, refused := h.Authenticate(req); refused != nil {
		withRequestID(refused, req.PlatformRequestID)
		if r.ContentLength != 0 {
			w.Header().Set("Connection", "close") // the unread body is not drained
		}
		refused.Write(w)
		return
	}
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
