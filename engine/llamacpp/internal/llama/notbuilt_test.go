//go:build cgo

package llama

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Where the pinned llama.cpp is not linked at .verdict/llama, the binding's
// search paths end in notbuilt/: its llama.h stops a compile, and its
// libverdict-llama.so (a linker script) stops a link whose objects Go's
// build cache still held, each with the line that says how to build it.
func TestNotBuiltSaysHowToBuild(t *testing.T) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	notbuilt, err := filepath.Abs("notbuilt")
	require.NoError(t, err)
	dir := t.TempDir()
	src := filepath.Join(dir, "m.c")

	require.NoError(t, os.WriteFile(src, []byte("#include \"llama.h\"\nint main(void) { return 0; }\n"), 0o644))
	out, err := exec.Command(cc, "-I"+notbuilt, "-c", src, "-o", filepath.Join(dir, "m.o")).CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "verdict: llama.cpp is not built. Run `make llama-lib`")

	require.NoError(t, os.WriteFile(src, []byte("int main(void) { return 0; }\n"), 0o644))
	out, err = exec.Command(cc, src, "-L"+notbuilt, "-lverdict-llama", "-o", filepath.Join(dir, "m")).CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "verdict: llama.cpp is not built. Run `make llama-lib`")
}
