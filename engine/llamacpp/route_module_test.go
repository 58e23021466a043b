//go:build llamacpp && !upstream

package llamacpp

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/verdict-dev/verdict/model"
)

// The module route's llama.cpp predates qwen35: loading such a model is
// refused before llama.cpp sees it, in one line that names the
// architecture and the build that loads it.
func TestModuleRouteRefusesQwen35InOneLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.gguf")
	require.NoError(t, model.Synth(path, model.SynthOptions{Arch: "qwen35", Shape: "tiny", Seed: 1}))
	_, err := New(Options{ModelPath: path})
	require.Error(t, err)
	require.True(t, errors.Is(err, ErrUnknownArchitecture))
	msg := err.Error()
	require.NotContains(t, msg, "\n")
	require.Contains(t, msg, `"qwen35"`)
	require.Contains(t, msg, "make build LLAMA=upstream")
	require.True(t, strings.Contains(msg, "module route"), msg)
}
