package server_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/internal/server"
)

// awsInvoke runs `aws sagemaker-runtime invoke-endpoint` against a local
// server, with dummy credentials, and returns the output file's contents
// and the CLI's combined output.
func awsInvoke(t *testing.T, url, body string, extra ...string) ([]byte, string, error) {
	t.Helper()
	aws, err := exec.LookPath("aws")
	if err != nil {
		t.Skip("the AWS CLI is not installed")
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "in.json")
	out := filepath.Join(dir, "out.json")
	require.NoError(t, os.WriteFile(in, []byte(body), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append([]string{"sagemaker-runtime", "invoke-endpoint",
		"--endpoint-url", url, "--endpoint-name", "local",
		"--body", "fileb://" + in}, extra...)
	args = append(args, out)
	cmd := exec.CommandContext(ctx, aws, args...)
	cmd.Env = append(os.Environ(),
		"AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing",
		"AWS_DEFAULT_REGION=us-east-1", "AWS_REGION=us-east-1",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_MAX_ATTEMPTS=1", "AWS_PAGER=")
	combined, err := cmd.CombinedOutput()
	b, _ := os.ReadFile(out)
	return b, string(combined), err
}

// TestAWSCLIInvokeEndpoint uses the real AWS CLI as an outside client of
// the SageMaker runtime path, as `--endpoint-url` users would.
func TestAWSCLIInvokeEndpoint(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})

	// Without --content-type (the CLI then sends none of JSON's).
	out, log, err := awsInvoke(t, b.url, semIfBare)
	require.NoError(t, err, log)
	var got map[string]any
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	res := got["result"].(map[string]any)
	require.Equal(t, "support-route", res["id"])
	requireProbabilities(t, res["probabilities"], 3)
	require.Contains(t, log, `"ContentType": "application/json"`)

	// A System One body with an explicit content type.
	out, log, err = awsInvoke(t, b.url, systemOneAll, "--content-type", "application/json", "--accept", "application/json")
	require.NoError(t, err, log)
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	require.Contains(t, got["answers"], "queue")

	// Errors reach the CLI with their status and type.
	_, log, err = awsInvoke(t, b.url, `{"state":"s"}`, "--content-type", "application/json")
	require.Error(t, err)
	require.Contains(t, log, "ValidationError")
	require.Contains(t, log, "question: is required")

	busy := setup(t, server.Config{Scorer: &fakeScorer{err: engine.ErrBusy}})
	_, log, err = awsInvoke(t, busy.url, semIfBare, "--content-type", "application/json")
	require.Error(t, err)
	require.True(t, strings.Contains(log, "ServiceUnavailable") || strings.Contains(log, "503"), log)
}
