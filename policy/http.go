package policy

import (
	"encoding/json"
	"errors"
	"net/http"
)

// holderState is what the admin handler reports.
type holderState struct {
	Path    string   `json:"path,omitempty"`
	Version string   `json:"version"`
	Kinds   []string `json:"kinds"`
	Error   string   `json:"error,omitempty"`
}

// Handler is the reload API: GET reports the current policy's file,
// version (sha256) and kinds; POST reloads the file first. A file that fails
// to load answers 422 with the error and keeps the current policy, exactly
// as SIGHUP does. Mount it behind the server's authentication.
func (h *Holder) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status := http.StatusOK
		var loadErr error
		switch r.Method {
		case http.MethodGet, http.MethodHead:
		case http.MethodPost:
			if loadErr = h.Reload(); loadErr != nil {
				status = http.StatusUnprocessableEntity
			}
		default:
			w.Header().Set("Allow", "GET, HEAD, POST")
			status = http.StatusMethodNotAllowed
			loadErr = errMethod
		}
		cur := h.Current()
		st := holderState{Path: h.path, Version: cur.Version(), Kinds: cur.Kinds()}
		if loadErr != nil {
			st.Error = loadErr.Error()
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(st)
	})
}

var errMethod = errors.New("policy: use GET to read or POST to reload")
