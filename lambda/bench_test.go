package lambda_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/verdict-dev/verdict/lambda"
)

// BenchmarkHandle measures one request through the front door into the
// durable local queue (SQLite with synchronous commits): authentication,
// parsing, validation, grouping, encoding and the enqueue.
func BenchmarkHandle(b *testing.B) {
	for _, name := range []string{"httpapi-semif.json", "httpapi-systemone.json"} {
		b.Run(name, func(b *testing.B) {
			bd := setup(b)
			raw, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				b.Fatal(err)
			}
			var ev events.APIGatewayV2HTTPRequest
			if err := json.Unmarshal(raw, &ev); err != nil {
				b.Fatal(err)
			}
			hdr := http.Header{"Content-Type": {"application/json"}, "X-Api-Key": {testKey}}
			b.SetBytes(int64(len(ev.Body)))
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				h := hdr.Clone()
				h.Set("Idempotency-Key", strconv.Itoa(i))
				resp := bd.h.Handle(context.Background(), &lambda.Request{Method: "POST", Path: ev.RawPath, Header: h, Body: []byte(ev.Body)})
				if resp.Status != http.StatusAccepted {
					b.Fatalf("status %d: %s", resp.Status, resp.Body)
				}
			}
		})
	}
}
