package worker_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/internal/sink"
)

func webhookReceiver(t *testing.T, secret []byte, bodies chan<- []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !sink.Verify(secret, r.Header.Get(sink.HeaderTimestamp), r.Header.Get(sink.HeaderSignature), body, time.Now(), time.Minute) {
			t.Errorf("bad webhook signature")
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		bodies <- body
	})
}
