package llamacpp

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The source script (scripts/llama.cpp/source.sh) is run here on a small
// fixture tree with its own pin, through each source it knows that works
// offline: LLAMA_SRC as a plain copy, LLAMA_SRC as a git checkout, and a
// shallow clone of a tag (from a local repository). Every one must check
// the tree hash and refuse a mismatch with what it found.

func sourceScriptFixture(t *testing.T) (script, fixture, tree string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	fixture = filepath.Join(dir, "tree")
	require.NoError(t, os.MkdirAll(filepath.Join(fixture, "src"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(fixture, "CMakeLists.txt"), []byte("project(x)\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(fixture, "src", "llama-arch.cpp"), []byte("// names\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(fixture, ".gitignore"), []byte("build/\n"), 0o644))
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.email=t@t", "-c", "user.name=t", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = fixture
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-qm", "fixture")
	git("tag", "v9.9.9")
	tree = git("rev-parse", "HEAD^{tree}")
	// A copy of the script beside a pin for the fixture.
	sdir := filepath.Join(dir, "scripts")
	require.NoError(t, os.MkdirAll(sdir, 0o755))
	body, err := os.ReadFile(filepath.Join("..", "..", "scripts", "llama.cpp", "source.sh"))
	require.NoError(t, err)
	script = filepath.Join(sdir, "source.sh")
	require.NoError(t, os.WriteFile(script, body, 0o755))
	pin := "tag=v9.9.9\ntree=" + tree + "\nnpm=\nrepo=file://" + fixture + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(sdir, "pin"), []byte(pin), 0o644))
	return script, fixture, tree
}

func runSourceScript(t *testing.T, script, dest string, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", script, dest)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestSourceScriptVerifiesEverySource(t *testing.T) {
	script, fixture, tree := sourceScriptFixture(t)
	dest := filepath.Join(t.TempDir(), "src")

	// A git checkout at the pinned tree is accepted and exported.
	out, err := runSourceScript(t, script, dest, "LLAMA_SRC="+fixture)
	require.NoError(t, err, out)
	require.FileExists(t, filepath.Join(dest, "src", "llama-arch.cpp"))
	stamp, err := os.ReadFile(filepath.Join(dest, ".verdict-tree"))
	require.NoError(t, err)
	require.Equal(t, tree, strings.TrimSpace(string(stamp)))

	// A plain copy (no .git) of the same files is accepted too.
	plain := filepath.Join(t.TempDir(), "plain")
	require.NoError(t, exec.Command("cp", "-a", dest, plain).Run())
	require.NoError(t, os.Remove(filepath.Join(plain, ".verdict-tree")))
	out, err = runSourceScript(t, script, filepath.Join(t.TempDir(), "src"), "LLAMA_SRC="+plain)
	require.NoError(t, err, out)

	// One changed file in the copy: refused, saying what was found.
	require.NoError(t, os.WriteFile(filepath.Join(plain, "src", "llama-arch.cpp"), []byte("// changed\n"), 0o644))
	out, err = runSourceScript(t, script, filepath.Join(t.TempDir(), "src"), "LLAMA_SRC="+plain)
	require.Error(t, err)
	require.Contains(t, out, "found tree ")
	require.Contains(t, out, "wants v9.9.9 = tree "+tree)
	require.Contains(t, out, "refusing it")

	// A checkout with local changes: refused although HEAD is right.
	require.NoError(t, os.WriteFile(filepath.Join(fixture, "CMakeLists.txt"), []byte("project(y)\n"), 0o644))
	out, err = runSourceScript(t, script, filepath.Join(t.TempDir(), "src"), "LLAMA_SRC="+fixture)
	require.Error(t, err)
	require.Contains(t, out, "local changes")
	require.NoError(t, exec.Command("git", "-C", fixture, "checkout", "-q", "--", ".").Run())

	// No LLAMA_SRC and no npm package in the pin: a shallow clone of the tag.
	cloned := filepath.Join(t.TempDir(), "src")
	out, err = runSourceScript(t, script, cloned)
	require.NoError(t, err, out)
	require.FileExists(t, filepath.Join(cloned, "CMakeLists.txt"))
	require.NoDirExists(t, filepath.Join(cloned, ".git"))

	// The materialized tree is reused as is on the next run.
	out, err = runSourceScript(t, script, cloned)
	require.NoError(t, err, out)
	require.Equal(t, cloned, strings.TrimSpace(out))
}
