package llamacpp

import (
	"bufio"
	"os"
	"runtime"
	"strings"
)

// physicalCores counts physical cores (distinct "physical id"/"core id"
// pairs in /proc/cpuinfo), capped by the CPUs this process may use. Decode
// threads beyond physical cores only contend for the same units. Falls
// back to runtime.NumCPU where /proc/cpuinfo is unavailable.
func physicalCores() int {
	n := runtime.NumCPU()
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return n
	}
	defer f.Close()
	cores := map[string]bool{}
	phys := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "physical id":
			phys = strings.TrimSpace(v)
		case "core id":
			cores[phys+"/"+strings.TrimSpace(v)] = true
		}
	}
	if len(cores) == 0 || len(cores) > n {
		return n
	}
	return len(cores)
}
