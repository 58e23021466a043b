package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/verdict-dev/verdict/engine/llamacpp"
)

func init() {
	register(command{name: "version", summary: "print the version, the linked llama.cpp, its backends and CPU features", runFunc: runVersion})
}

// versionInfo is what `verdict version --json` prints.
type versionInfo struct {
	Verdict  string             `json:"verdict"`
	Go       string             `json:"go"`
	Platform string             `json:"platform"`
	Engine   llamacpp.BuildInfo `json:"engine"`
	Archs    []string           `json:"architectures,omitempty"`
}

func runVersion(_ context.Context, args []string) error {
	fs := newFlagSet("version", "version [--json] [--archs]")
	asJSON := fs.Bool("json", false, "print JSON")
	archs := fs.Bool("archs", false, "also list the model architectures this build loads")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	v := versionInfo{Verdict: buildVersion(), Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, Engine: llamacpp.Info()}
	if *archs && v.Engine.LlamaCpp != "" {
		v.Archs = llamacpp.Architectures()
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	fmt.Printf("verdict       %s (%s, %s)\n", v.Verdict, v.Go, v.Platform)
	if v.Engine.LlamaCpp == "" {
		fmt.Println("llama.cpp     none: built without cgo (make build links " + llamacpp.LlamaCppVersion + ")")
		return nil
	}
	fmt.Printf("llama.cpp     %s\n", v.Engine.LlamaCpp)
	for _, d := range v.Engine.Devices {
		fmt.Printf("device        %s: %s (%s)\n", d.Name, d.Description, d.Kind)
	}
	fmt.Printf("cpu features  %s\n", v.Engine.CPUFeatures)
	if *archs {
		fmt.Printf("architectures %s\n", strings.Join(v.Archs, " "))
	}
	return nil
}

// buildVersion is the module version, or the VCS revision of a local build.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", ""
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return "devel"
	}
	return "devel-" + rev[:min(12, len(rev))] + dirty
}
