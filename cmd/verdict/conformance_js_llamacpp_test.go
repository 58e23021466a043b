//go:build cgo

package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/gguf"
)

// conformancePolicy refuses every question to the tenant "limited", so
// that the SDK meets a 403.
const conformancePolicy = `version: 1
default_kind: default
unknown_kind: default
kinds:
  default:
    description: Anything.
  other:
    description: What the limited tenant may ask (never a System One question).
    match:
      - question: '^never$'
authorization:
  mode: refuse
  unlisted: allow
  callers:
    - name: limited
      tenant: limited
      kinds: [other]
      mode: refuse
`

// TestTypeSafeSDKConformance drives the real, unmodified TypeSafe
// JavaScript SDK (conformance/js, pinned by its package-lock.json) against
// two real `verdict serve` on a tiny synthetic model: one with API keys and
// a policy, one that holds a single request at a time (for overload). It
// skips only when node is not installed; missing node_modules fail it
// (`npm ci --prefix conformance/js`, as .ci/run does).
func TestTypeSafeSDKConformance(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed; the TypeSafe SDK conformance suite needs Node.js 20+")
	}
	jsDir, err := filepath.Abs(filepath.Join("..", "..", "conformance", "js"))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(jsDir, "node_modules", "@typesafe-ai", "sdk", "package.json")); err != nil {
		t.Fatalf("the TypeSafe SDK is not installed: run `npm ci --prefix conformance/js` (%v)", err)
	}

	dir := t.TempDir()
	modelPath := filepath.Join(dir, "tiny.gguf")
	require.NoError(t, gguf.Synth(modelPath, gguf.SynthOptions{Shape: "tiny", Seed: 1, Chat: gguf.ChatChatML}))
	policy := filepath.Join(dir, "policy.yaml")
	require.NoError(t, os.WriteFile(policy, []byte(conformancePolicy), 0o600))

	ctx, cancel := context.WithCancel(context.Background())
	start := func(args ...string) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		done := make(chan error, 1)
		go func() {
			done <- runServe(ctx, append([]string{"--addr", addr, "--model", modelPath, "--threads", "1", "--ctx", "4096", "--log-level", "error"}, args...))
		}()
		t.Cleanup(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("serve %s: %v", addr, err)
				}
			case <-time.After(60 * time.Second):
				t.Errorf("serve %s did not stop", addr)
			}
		})
		url := "http://" + addr
		require.Eventually(t, func() bool {
			resp, err := http.Get(url + "/ping")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}, 60*time.Second, 10*time.Millisecond)
		return url
	}
	mainURL := start("--api-keys", "sdk-test-key=acme,sdk-limited-key=limited", "--policy", policy)
	busyURL := start("--max-concurrent", "1", "--max-queue", "0", "--retry-after", "1s")

	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "sdk.test.mjs")
	cmd.Dir = jsDir
	cmd.Env = append(os.Environ(),
		"VERDICT_URL="+mainURL, "VERDICT_API_KEY=sdk-test-key", "VERDICT_LIMITED_KEY=sdk-limited-key",
		"VERDICT_BUSY_URL="+busyURL, "TYPESAFE_API_KEY=", "TYPESAFE_BASE_URL=", "TYPESAFE_DEFAULT_MODEL=")
	out, err := cmd.CombinedOutput()
	t.Logf("node --test:\n%s", out)
	require.NoError(t, err, "the TypeSafe SDK conformance suite failed")
}
