package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUpFlagErrorsNameTheFlag(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--data", data, "--addr", "0.0.0.0:8080"}, "flag --addr"},
		{[]string{"--data", data, "--addr", "nonsense"}, "flag --addr"},
		{[]string{"--data", data, "--visibility", "10ms"}, "flag --visibility"},
		{[]string{"--data", data, "--concurrency", "0"}, "flag --concurrency"},
		{[]string{"--data", data, "--max-receives", "0"}, "flag --max-receives"},
		{[]string{"--data", data, "--max-body-bytes", "0"}, "flag --max-body-bytes"},
		{[]string{"--data", data, "--max-state-bytes", "0"}, "flag --max-state-bytes"},
		{[]string{"--data", data, "--synth-shape", "huge"}, "flag --synth-shape"},
		{[]string{"--data", data, "--log-level", "loud"}, "flag --log-level"},
		{[]string{"--data", data, "--policy", filepath.Join(data, "missing.yaml")}, "flag --policy"},
		{[]string{"--data", data, "--api-keys", "a key with spaces"}, "flag --api-keys"},
		{[]string{"--data", data, "extra"}, `unexpected argument "extra"`},
		{[]string{"--data", data, "--gpu-model", filepath.Join(data, "big.gguf")}, "flag --gpu-model: needs the gpu pool"},
		{[]string{"--data", data, "--pools", "cpu,gpu", "--gpu-model", filepath.Join(data, "missing.gguf")}, "flag --gpu-model"},
		{[]string{"--data", data, "--gpu-sagemaker-url", "http://127.0.0.1:1"}, "flag --gpu-sagemaker-url: needs --gpu-sagemaker-endpoint"},
		{[]string{"--data", data, "--gpu-sagemaker-endpoint", "ep"}, "flag --gpu-sagemaker-endpoint: needs the gpu pool"},
		{[]string{"--data", data, "--pools", "cpu,gpu", "--gpu-sagemaker-endpoint", "ep", "--gpu-sagemaker-url", "127.0.0.1:1"}, "flag --gpu-sagemaker-url: must be an http(s) URL"},
	}
	for _, tc := range cases {
		err := runUp(context.Background(), tc.args)
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
}
