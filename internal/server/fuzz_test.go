package server_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/verdict-dev/verdict/internal/server"
)

// FuzzInvocations feeds arbitrary bodies through body detection (SemIf or
// System One), parsing, scoring and rendering: every answer must be one of
// the documented statuses with a JSON body, never a panic or a hang.
func FuzzInvocations(f *testing.F) {
	f.Add([]byte(semIfBare))
	f.Add([]byte(`{"decision":` + semIfBare + `}`))
	f.Add([]byte(`{"decisions":[` + semIfBare + `]}`))
	f.Add([]byte(systemOneAll))
	f.Add([]byte(`{"questions":{"q":{"type":"score","instructions":"i","criteria":["a",null]}},"state":[1]}`))
	f.Add([]byte(`{"questions":[],"state":"s"}`))
	f.Add([]byte(`{"questions":{"q":{"type":"choice","instructions":{"x":1},"criteria":{"a":1,"a":2}}},"state":"s"}`))
	f.Add([]byte(`{"decisions":[{"state":{},"question":"","options":[]}]}`))
	f.Add([]byte(`null`))
	f.Add([]byte(``))
	f.Add([]byte("\xff\xfe{"))
	if files, _ := filepath.Glob(filepath.Join("testdata", "conformance", "*.json")); len(files) > 0 {
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			var fx fixture
			if json.Unmarshal(b, &fx) == nil && len(fx.Request.Body) > 0 {
				f.Add([]byte(fx.Request.Body))
			}
		}
	}
	srv, err := server.New(server.Config{Scorer: &fakeScorer{}, MaxBodyBytes: 1 << 20, Logger: discardLogger()})
	if err != nil {
		f.Fatal(err)
	}
	allowed := map[int]bool{200: true, 400: true, 404: true, 413: true, 422: true}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{"/invocations", "/v1/systemone"} {
			rec := serveLocal(srv, "POST", path, body)
			if !allowed[rec.Code] {
				t.Fatalf("%s: status %d for %q: %s", path, rec.Code, body, rec.Body.Bytes())
			}
			if !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("%s: answer is not JSON: %q", path, rec.Body.Bytes())
			}
			if rec.Code != http.StatusOK && rec.Header().Get(server.RequestIDHeader) == "" {
				t.Fatalf("%s: error without request id", path)
			}
		}
	})
}
