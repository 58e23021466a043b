package queuetest

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// shared is the moto_server of one test binary: started by the first test
// that asks for it (SharedMoto), stopped by Main after the last test.
var shared struct {
	once sync.Once
	moto *Moto
	err  error
}

// SharedMoto returns this test binary's moto_server, starting it on first
// use, so that only the tests that talk to SQS need moto installed. A
// missing or failed moto_server fails the calling test with the reason.
func SharedMoto(t testing.TB) *Moto {
	t.Helper()
	shared.once.Do(func() { shared.moto, shared.err = StartMoto() })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.moto
}

// Main is the body of a TestMain for packages whose tests use SharedMoto:
// it runs the tests, stops moto when one started it and, when they passed,
// fails the run on leaked goroutines (database/sql and idle HTTP
// connections excepted). It returns the exit code.
func Main(m *testing.M) int {
	code := m.Run()
	if shared.moto != nil {
		shared.moto.Stop()
	}
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreAnyFunction("internal/poll.runtime_pollWait")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}
