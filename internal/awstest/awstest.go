// Package awstest runs the AWS parts verdict's tests drive for real: the
// Lambda Runtime Interface Emulator with the bootstrap binary built as
// `make lambda` builds it. moto_server lives in queuetest.
package awstest

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"
)

// FindRIE locates aws-lambda-rie: $AWS_LAMBDA_RIE, then PATH, then
// $(go env GOPATH)/bin where scripts/install-lambda-rie.sh (make test)
// puts it. It skips the test, saying how to install it, when there is
// none.
func FindRIE(t testing.TB) string {
	if p := os.Getenv("AWS_LAMBDA_RIE"); p != "" {
		return p
	}
	if p, err := exec.LookPath("aws-lambda-rie"); err == nil {
		return p
	}
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err == nil {
		p := filepath.Join(string(bytes.TrimSpace(out)), "bin", "aws-lambda-rie")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("SKIPPED: aws-lambda-rie is not installed; run scripts/install-lambda-rie.sh, as make test does (or set AWS_LAMBDA_RIE) to run the bootstrap under the Lambda emulator")
	return ""
}

// BuildBootstrap builds cmd/bootstrap as `make lambda` does (no cgo,
// lambda.norpc) into dir; root is the module's root.
func BuildBootstrap(t testing.TB, root, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "bootstrap")
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bin, "./cmd/bootstrap")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "build bootstrap with CGO_ENABLED=0: %s", out)
	return bin
}

// FreePort is a port of 127.0.0.1 nothing listened on a moment ago.
func FreePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// FrontDoor is the bootstrap binary running under the Lambda emulator.
type FrontDoor struct {
	url string
}

// StartFrontDoor runs bootstrap under the emulator rie with env added to
// this process's environment, until the test ends; its output is logged
// when the test fails.
func StartFrontDoor(t testing.TB, rie, bootstrap string, env ...string) *FrontDoor {
	t.Helper()
	port := FreePort(t)
	cmd := exec.Command(rie, "--runtime-api-address", "127.0.0.1:"+FreePort(t),
		"--runtime-interface-emulator-address", "127.0.0.1:"+port, bootstrap)
	cmd.Env = append(os.Environ(), env...)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("front door under the emulator:\n%s", logs.String())
		}
	})
	return &FrontDoor{url: "http://127.0.0.1:" + port + "/2015-03-31/functions/function/invocations"}
}

// Invoke sends one API Gateway HTTP API event and returns the front
// door's HTTP answer. The emulator answers 200 for every invocation, even
// a failed one: the front door's own answer is in the body, and an
// invocation that failed instead of answering fails the test.
func (f *FrontDoor) Invoke(t testing.TB, ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	t.Helper()
	payload, err := json.Marshal(ev)
	require.NoError(t, err)
	var resp *http.Response
	require.Eventually(t, func() bool {
		resp, err = http.Post(f.url, "application/json", bytes.NewReader(payload))
		return err == nil
	}, time.Minute, 100*time.Millisecond, "the emulator does not answer: %v", err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out events.APIGatewayV2HTTPResponse
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.NotZero(t, out.StatusCode, "the invocation failed instead of answering HTTP")
	return out
}
