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
	return scriptFixture(t, map[string]string{
		"CMakeLists.txt":     "project(x)\n",
		"src/llama-arch.cpp": "// names\n",
		".gitignore":         "build/\n",
	})
}

// scriptFixture writes files into a git repository tagged v9.9.9 and
// copies scripts/llama.cpp's source.sh and build.sh beside a pin for it.
// script is the copy of source.sh.
func scriptFixture(t *testing.T, files map[string]string) (script, fixture, tree string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	fixture = filepath.Join(dir, "tree")
	for name, body := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(fixture, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(fixture, name), []byte(body), 0o644))
	}
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
	for _, name := range []string{"source.sh", "build.sh"} {
		body, err := os.ReadFile(filepath.Join("..", "..", "scripts", "llama.cpp", name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(sdir, name), body, 0o755))
	}
	script = filepath.Join(sdir, "source.sh")
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

// A tree already in place is checked on every use, not trusted by its
// stamp: one changed or added file is refused with what differs and how
// to clear it; put back, the tree is accepted again.
func TestSourceScriptRechecksTheTreeInPlace(t *testing.T) {
	script, fixture, _ := sourceScriptFixture(t)
	dest := filepath.Join(t.TempDir(), "src")
	out, err := runSourceScript(t, script, dest, "LLAMA_SRC="+fixture)
	require.NoError(t, err, out)

	arch := filepath.Join(dest, "src", "llama-arch.cpp")
	require.NoError(t, os.WriteFile(arch, []byte("// changed\n"), 0o644))
	out, err = runSourceScript(t, script, dest)
	require.Error(t, err, out)
	require.Contains(t, out, "is not the pinned v9.9.9")
	require.Contains(t, out, "M src/llama-arch.cpp")
	require.Contains(t, out, "rm -rf '"+dest+"'")
	require.Equal(t, 1, strings.Count(strings.TrimSpace(out), "\n")+1, "one line: %s", out)

	require.NoError(t, os.WriteFile(arch, []byte("// names\n"), 0o644))
	out, err = runSourceScript(t, script, dest)
	require.NoError(t, err, out)
	require.Equal(t, dest, strings.TrimSpace(out))

	require.NoError(t, os.WriteFile(filepath.Join(dest, "extra.c"), []byte("int x;\n"), 0o644))
	out, err = runSourceScript(t, script, dest)
	require.Error(t, err, out)
	require.Contains(t, out, "A extra.c")
}

// buildFixture is a CMake project shaped like llama.cpp as build.sh sees
// it: a static library target "llama", and llama.h installed.
func buildFixture(src string) map[string]string {
	return map[string]string{
		"CMakeLists.txt": "cmake_minimum_required(VERSION 3.14)\nproject(fixture C)\n" +
			"add_library(llama STATIC src/llama.c)\n" +
			"install(TARGETS llama ARCHIVE DESTINATION lib)\ninstall(FILES include/llama.h DESTINATION include)\n",
		"src/llama.c":     src,
		"include/llama.h": "int llama_fixture(void);\n",
	}
}

func runBuildScript(t *testing.T, script, llamaDir string, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join(filepath.Dir(script), "build.sh"))
	cmd.Env = append(os.Environ(), append([]string{"LLAMA_DIR=" + llamaDir, "JOBS=2"}, env...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The build script's cache: a prefix is reused only when it matches its
// build record; a changed library or a prefix without a record (a build
// cut short) is found at once and rebuilt, never left to fail at link
// time; a failed build names its log.
func TestBuildScriptChecksItsCache(t *testing.T) {
	if _, err := exec.LookPath("cmake"); err != nil {
		t.Skip("cmake is not installed (make test installs it)")
	}
	script, fixture, tree := scriptFixture(t, buildFixture("int llama_fixture(void) { return 1; }\n"))
	dir := t.TempDir()
	prefix := filepath.Join(dir, tree[:12]+"-native-noomp")

	out, err := runBuildScript(t, script, dir, "LLAMA_SRC="+fixture)
	require.NoError(t, err, out)
	require.Contains(t, out, "building libllama of v9.9.9")
	require.Contains(t, out, "log: "+prefix+".build.log")
	require.FileExists(t, filepath.Join(prefix, "lib", "libllama.a"))
	ld, err := os.ReadFile(filepath.Join(prefix, "lib", "libverdict-llama.so"))
	require.NoError(t, err)
	require.Contains(t, string(ld), "GROUP ( "+filepath.Join(prefix, "lib", "libllama.a")+" )")
	require.Contains(t, string(ld), "INPUT ( -lstdc++ -lm -lpthread )")
	pin, err := os.ReadFile(filepath.Join(prefix, "include", "verdict-pin.h"))
	require.NoError(t, err)
	require.Contains(t, string(pin), tree)
	require.FileExists(t, filepath.Join(prefix, "src", "CMakeLists.txt"), "the source, reachable from the prefix")

	reused := func() {
		t.Helper()
		out, err := runBuildScript(t, script, dir)
		require.NoError(t, err, out)
		require.Equal(t, prefix, strings.TrimSpace(out), "reused without a word")
	}
	reused()

	// A changed library: found by its checksum and rebuilt.
	lib, err := os.OpenFile(filepath.Join(prefix, "lib", "libllama.a"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = lib.WriteString("garbage")
	require.NoError(t, err)
	require.NoError(t, lib.Close())
	out, err = runBuildScript(t, script, dir)
	require.NoError(t, err, out)
	require.Contains(t, out, "does not match its build record (./lib/libllama.a: FAILED); rebuilding it")
	reused()

	// A build cut short (no record): rebuilt.
	require.NoError(t, os.Remove(filepath.Join(prefix, ".verdict-built")))
	out, err = runBuildScript(t, script, dir)
	require.NoError(t, err, out)
	require.Contains(t, out, "is half-built")
	reused()

	// A failing build names its whole log.
	broken, bfixture, btree := scriptFixture(t, buildFixture("int llama_fixture(void) { return }\n"))
	out, err = runBuildScript(t, broken, t.TempDir(), "LLAMA_SRC="+bfixture)
	require.Error(t, err, out)
	require.Contains(t, out, "cmake --build failed")
	require.Contains(t, out, btree[:12]+"-native-noomp.build.log")
}

// GPU=cuda, both links, on a fixture shaped like llama.cpp's libraries:
// what nvcc would compile is not built here, but everything build.sh does
// around it is (the prefix's name, where the backend modules go, and the
// linker script the binding links).
func TestBuildScriptCUDAConfigurations(t *testing.T) {
	if _, err := exec.LookPath("cmake"); err != nil {
		t.Skip("cmake is not installed (make test installs it)")
	}
	files := map[string]string{
		"CMakeLists.txt": "cmake_minimum_required(VERSION 3.14)\nproject(fixture C)\n" +
			"foreach(l llama ggml ggml-base ggml-cpu ggml-cuda)\n  add_library(${l} src/lib.c)\n" +
			"  install(TARGETS ${l} ARCHIVE DESTINATION lib LIBRARY DESTINATION lib RUNTIME DESTINATION bin)\nendforeach()\n" +
			"target_link_libraries(llama PUBLIC ggml)\ntarget_link_libraries(ggml PUBLIC ggml-base)\n" +
			"if(NOT BUILD_SHARED_LIBS)\n  target_link_libraries(ggml PUBLIC ggml-cpu ggml-cuda)\nendif()\n" +
			"install(FILES include/llama.h DESTINATION include)\n",
		"src/lib.c":       "int llama_fixture(void) { return 1; }\n",
		"include/llama.h": "int llama_fixture(void);\n",
	}
	script, fixture, tree := scriptFixture(t, files)
	dir := t.TempDir()

	out, err := runBuildScript(t, script, dir, "LLAMA_SRC="+fixture, "GPU=cuda", "CUDA_ARCHS=75;86")
	require.NoError(t, err, out)
	static := filepath.Join(dir, tree[:12]+"-native-noomp-cuda-75_86")
	require.Equal(t, static, strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]))
	ld, err := os.ReadFile(filepath.Join(static, "lib", "libverdict-llama.so"))
	require.NoError(t, err)
	require.Contains(t, string(ld), filepath.Join(static, "lib", "libggml-cuda.a"))
	require.Contains(t, string(ld), "INPUT ( -lstdc++ -lm -lpthread -lcudart -lcublas -lcublasLt -lcuda )")

	out, err = runBuildScript(t, script, dir, "LINK=dynamic", "CPU_TARGET=x86-64-v3", "GPU=cuda", "CUDA_ARCHS=75")
	require.NoError(t, err, out)
	dynamic := filepath.Join(dir, tree[:12]+"-x86-64-v3-noomp-dl-cuda-75")
	ld, err = os.ReadFile(filepath.Join(dynamic, "lib", "libverdict-llama.so"))
	require.NoError(t, err)
	require.Contains(t, string(ld), "GROUP ( -lllama -lggml -lggml-base )", "backend modules are loaded at run time, never linked")
	require.NotContains(t, string(ld), "ggml-cuda")
	require.NotContains(t, string(ld), "-lcudart", "the CUDA runtime comes with the module")
	// Every library in lib/, the modules among them, as make dist copies them.
	for _, l := range []string{"libllama.so", "libggml.so", "libggml-base.so", "libggml-cpu.so", "libggml-cuda.so"} {
		require.FileExists(t, filepath.Join(dynamic, "lib", l))
	}
}
