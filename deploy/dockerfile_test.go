package deploy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line int
	cmd  string // upper case: FROM, RUN, …
	args string
}

// stage is one FROM … section.
type stage struct {
	from  string
	alias string
	ins   []instruction
}

// parseDockerfile splits a Dockerfile into stages. It knows the parts of
// the syntax the images use: comments, line continuations, instructions.
func parseDockerfile(t *testing.T, path string) []stage {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var stages []stage
	var cur strings.Builder
	start := 0
	flush := func() {
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			return
		}
		cmd, args, _ := strings.Cut(text, " ")
		in := instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			st := stage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.alias = f[2]
			}
			stages = append(stages, st)
			return
		}
		if len(stages) == 0 {
			if in.cmd != "ARG" {
				t.Fatalf("%s:%d: %s before the first FROM", path, in.line, in.cmd)
			}
			return
		}
		stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
	}
	for i, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		flush()
	}
	flush()
	return stages
}

// makeTargets lists the targets the Makefile defines.
func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	re := regexp.MustCompile(`(?m)^([A-Za-z0-9_./-]+):`)
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = true
	}
	return out
}

// pinnedImage: an explicit version tag (with a digit, not latest) or a
// digest.
var pinnedImage = regexp.MustCompile(`^[a-z0-9./_-]+(:[A-Za-z0-9._-]*[0-9][A-Za-z0-9._-]*)?(@sha256:[0-9a-f]{64})?$`)

func checkPinned(p *problems, where, image string) {
	if !pinnedImage.MatchString(image) || (!strings.Contains(image, ":") && !strings.Contains(image, "@")) || strings.HasSuffix(image, ":latest") {
		p.add("%s: image %q is not pinned to an explicit version or digest", where, image)
	}
}

// problems collects what a check found.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// checkDockerfile returns what is wrong with the Dockerfile at path.
func checkDockerfile(t *testing.T, path string, targets map[string]bool, steps string) problems {
	t.Helper()
	var p problems
	name := filepath.Base(path)
	stages := parseDockerfile(t, path)
	if len(stages) < 2 {
		p.add("%s: want a build stage and a runtime stage, got %d stage(s)", name, len(stages))
		return p
	}
	aliases := map[string]bool{}
	for _, st := range stages {
		checkPinned(&p, name+" FROM", st.from)
		aliases[st.alias] = true
		for _, in := range st.ins {
			where := name + ":" + strconv.Itoa(in.line)
			switch in.cmd {
			case "RUN":
				checkRun(&p, where, in.args, targets, steps)
			case "COPY":
				for _, f := range strings.Fields(in.args) {
					if from, ok := strings.CutPrefix(f, "--from="); ok && !aliases[from] {
						checkPinned(&p, where+" COPY --from", from)
					}
				}
			case "ADD":
				p.add("%s: ADD fetches or unpacks implicitly; use COPY or a script", where)
			}
		}
	}
	rt := stages[len(stages)-1]
	var user, entry string
	exposed := false
	for _, in := range rt.ins {
		switch in.cmd {
		case "USER":
			user = in.args
		case "ENTRYPOINT":
			entry = in.args
		case "EXPOSE":
			for _, port := range strings.Fields(in.args) {
				exposed = exposed || port == "8080" || port == "8080/tcp"
			}
		}
	}
	if u, _, _ := strings.Cut(user, ":"); u == "" || u == "root" || u == "0" {
		p.add("%s: the runtime stage runs as %q; want an unprivileged USER", name, user)
	}
	if !exposed {
		p.add("%s: the runtime stage does not EXPOSE 8080 (SageMaker's port)", name)
	}
	if entry != `["verdict"]` {
		p.add("%s: ENTRYPOINT %s; want [\"verdict\"] (SageMaker appends serve)", name, entry)
	}
	return p
}

func readSteps(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../scripts/image/steps.sh")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDockerfiles(t *testing.T) {
	targets, steps := makeTargets(t), readSteps(t)
	for _, name := range []string{"Dockerfile", "Dockerfile.gpu"} {
		t.Run(name, func(t *testing.T) {
			for _, msg := range checkDockerfile(t, filepath.Join("..", name), targets, steps) {
				t.Error(msg)
			}
		})
	}
}

// TestDockerfileChecksCatch feeds the checks broken variants of the real
// CPU Dockerfile: each must be reported.
func TestDockerfileChecksCatch(t *testing.T) {
	targets, steps := makeTargets(t), readSteps(t)
	orig, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"unpinned base", "FROM debian:12.12-slim", "FROM debian:latest", "not pinned"},
		{"untagged base", "FROM debian:12.12-slim", "FROM debian", "not pinned"},
		{"root user", "USER 10001:10001", "USER root", "unprivileged USER"},
		{"no user", "USER 10001:10001\n", "", "unprivileged USER"},
		{"other port", "EXPOSE 8080", "EXPOSE 9090", "EXPOSE 8080"},
		{"unknown target", "RUN make llama-src", "RUN make llama-fetch", `no target "llama-fetch"`},
		{"raw shell", "RUN make llama-src", "RUN apt-get update && apt-get install -y cmake", "no shell lists"},
		{"not a step", "RUN make llama-src", "RUN make lint", "not in scripts/image/steps.sh"},
		{"add", "COPY . .", "ADD . .", "ADD fetches"},
		{"entrypoint", `ENTRYPOINT ["verdict"]`, `ENTRYPOINT ["sh"]`, "ENTRYPOINT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(string(orig), tc.old) {
				t.Fatalf("the Dockerfile no longer has %q; update this case", tc.old)
			}
			path := filepath.Join(t.TempDir(), "Dockerfile")
			if err := os.WriteFile(path, []byte(strings.Replace(string(orig), tc.old, tc.new, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			got := checkDockerfile(t, path, targets, steps)
			if !strings.Contains(strings.Join(got, "\n"), tc.want) {
				t.Errorf("want a problem containing %q, got %q", tc.want, got)
			}
		})
	}
}

// checkRun allows a RUN of a make target the Makefile defines, of a
// script in scripts/image/ (copied into the image), or of the binary the
// image ships, and wants steps.sh to run the same target or script.
func checkRun(p *problems, where, args string, targets map[string]bool, steps string) {
	if strings.HasPrefix(args, "[") { // exec form: the shipped binary
		if !strings.HasPrefix(args, `["/opt/verdict/bin/verdict"`) {
			p.add("%s: RUN %s: only the shipped verdict binary may run in exec form", where, args)
		}
		if !strings.Contains(steps, "bin/verdict\" version") {
			p.add("%s: RUN %s is not in scripts/image/steps.sh", where, args)
		}
		return
	}
	if strings.ContainsAny(args, "&|;`$(") && !strings.Contains(args, "${") {
		p.add("%s: RUN %q: one make target or script per RUN, no shell lists", where, args)
	}
	f := strings.Fields(args)
	switch {
	case f[0] == "make":
		var target string
		for _, a := range f[1:] {
			if !strings.HasPrefix(a, "-") && !strings.Contains(a, "=") {
				target = a
				break
			}
		}
		if !targets[target] {
			p.add("%s: RUN make %s: the Makefile has no target %q", where, target, target)
		}
		if !strings.Contains(steps, "make --no-print-directory "+target) {
			p.add("%s: RUN make %s is not in scripts/image/steps.sh", where, target)
		}
	case strings.HasPrefix(f[0], "scripts/image/") || strings.HasPrefix(f[0], "/usr/local/lib/verdict/"):
		base := filepath.Base(f[0])
		if _, err := os.Stat(filepath.Join("..", "scripts", "image", base)); err != nil {
			p.add("%s: RUN %s: no scripts/image/%s", where, f[0], base)
		}
		if !strings.Contains(steps, base) {
			p.add("%s: RUN %s is not in scripts/image/steps.sh", where, base)
		}
	default:
		p.add("%s: RUN %q is neither a make target nor a scripts/image script", where, args)
	}
}

// TestDockerIgnore: the build context leaves out local builds, data and
// packages (a stale bin/ or .verdict/ would bloat every image build and
// could ship a model or results by accident).
func TestDockerIgnore(t *testing.T) {
	b, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			have[strings.TrimSuffix(l, "/")] = true
		}
	}
	for _, want := range []string{".git", ".verdict", "bin", "dist", "conformance/js/node_modules", "*.gguf"} {
		if !have[want] {
			t.Errorf(".dockerignore does not leave out %s", want)
		}
	}
}
