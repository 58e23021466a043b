package llama

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// pin.go names the release that scripts/llama.cpp/pin pins: the binding's
// check of the linked library (CheckPin) and every version string rest on
// it.
func TestPinMatchesTheScriptsPin(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "scripts", "llama.cpp", "pin"))
	require.NoError(t, err)
	field := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + name + `=(\S+)$`).FindSubmatch(b)
		require.NotNil(t, m, "scripts/llama.cpp/pin has no %s=", name)
		return string(m[1])
	}
	require.Equal(t, field("tag"), PinTag)
	require.Equal(t, field("tree"), PinTree)
}
