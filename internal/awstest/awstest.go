// Package awstest runs the AWS parts verdict's tests drive for real: the
// Lambda Runtime Interface Emulator with the bootstrap binary built as
// `make lambda` builds it. moto_server lives in queuetest.
package awstest

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

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
