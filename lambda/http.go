package lambda

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
)

// ServeHTTP serves the front door's routes over net/http (verdict up). The
// body is read up to the size limit; anything longer is answered 413, and a
// body that stalls past the listener's read deadline 408.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := &Request{Method: r.Method, Path: r.URL.Path, Header: r.Header, PlatformRequestID: r.Header.Get("X-Request-Id")}
	var resp *Response
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(h.cfg.MaxBodyBytes)))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		resp = errorResponse(http.StatusRequestEntityTooLarge, ErrorBody{Code: "too_large",
			Message: "body is larger than the limit of " + strconv.Itoa(h.cfg.MaxBodyBytes) + " bytes"})
	case errors.Is(err, os.ErrDeadlineExceeded):
		resp = errorResponse(http.StatusRequestTimeout, ErrorBody{Code: "timeout", Message: "the request body did not arrive in time"})
		w.Header().Set("Connection", "close")
	case err != nil:
		resp = errorResponse(http.StatusBadRequest, ErrorBody{Code: "malformed", Message: "could not read the request body"})
	default:
		req.Body = body
		resp = h.Handle(r.Context(), req)
	}
	resp.Write(w)
}
