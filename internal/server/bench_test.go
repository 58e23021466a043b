package server_test

import (
	"net/http"
	"testing"

	"github.com/verdict-dev/verdict/internal/server"
)

// BenchmarkHandlerSystemOne measures the server's own cost per System One
// request (parse, admission, render) around a scorer that costs nothing.
func BenchmarkHandlerSystemOne(b *testing.B) {
	srv, err := server.New(server.Config{Scorer: &fakeScorer{}, Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(systemOneAll)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if rec := serveLocal(srv, "POST", "/v1/systemone", body); rec.Code != http.StatusOK {
			b.Fatal(rec.Code)
		}
	}
}

// BenchmarkHandlerSemIfBatch is the same for a 16-decision SemIf batch.
func BenchmarkHandlerSemIfBatch(b *testing.B) {
	srv, err := server.New(server.Config{Scorer: &fakeScorer{}, Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"decisions":[`)
	for i := range 16 {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, []byte(`{"id":"d`+string(rune('a'+i))+`","state":"Customer asks to reset a forgotten password.","question":"Which queue?","options":[{"id":"account_access","description":"Account access."},{"id":"billing","description":"Billing."}]}`)...)
	}
	body = append(body, "]}"...)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if rec := serveLocal(srv, "POST", "/invocations", body); rec.Code != http.StatusOK {
			b.Fatal(rec.Code, rec.Body.String())
		}
	}
}
