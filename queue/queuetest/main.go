package queuetest

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// RunWithMoto is the body of a TestMain for packages whose tests talk to
// SQS: it starts moto_server, hands it to set, runs the tests, stops moto
// and, when they passed, fails the run on leaked goroutines (database/sql
// and idle HTTP connections excepted). It returns the exit code.
func RunWithMoto(m *testing.M, set func(*Moto)) int {
	moto, err := StartMoto()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	set(moto)
	code := m.Run()
	moto.Stop()
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
