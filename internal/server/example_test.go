package server_test

import (
	"fmt"
	"net/http/httptest"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/server"
)

// A server can listen before its model is loaded: /ping answers 503 until
// SetScorer installs the engine.
func ExampleServer_SetScorer() {
	srv, err := server.New(server.Config{Logger: discardLogger()})
	if err != nil {
		panic(err)
	}
	ping := func() int {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("GET", "/ping", nil))
		return rec.Code
	}
	fmt.Println("loading:", ping())
	srv.SetScorer(&fakeScorer{}, decision.ModelIdentity{File: "/opt/ml/model/router.gguf"})
	fmt.Println("ready:", ping(), srv.ModelName())
	// Output:
	// loading: 503
	// ready: 200 router
}
