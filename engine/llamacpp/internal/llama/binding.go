//go:build cgo

package llama

/*
#cgo CXXFLAGS: -std=c++17
#cgo CFLAGS: -D_GNU_SOURCE
#cgo CPPFLAGS: -I${SRCDIR}/../../../../.verdict/llama/include -I${SRCDIR}/notbuilt
#cgo LDFLAGS: -L${SRCDIR}/../../../../.verdict/llama/lib -L${SRCDIR}/notbuilt -lverdict-llama
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include "llama.h"
#include "ggml-backend.h"
#include "shim.h"

extern void verdictLog(int level, char *text, void *user_data);

static void verdict_log_setup(void) {
	llama_log_set((ggml_log_callback)verdictLog, NULL);
}

// verdict_devices writes up to max "name\tdescription\ttype" lines of the
// ggml devices registered in this process into buf.
static void verdict_devices(char *buf, size_t n) {
	size_t off = 0;
	buf[0] = 0;
	for (size_t i = 0; i < ggml_backend_dev_count() && off + 1 < n; i++) {
		ggml_backend_dev_t d = ggml_backend_dev_get(i);
		const char *kind = "other";
		switch (ggml_backend_dev_type(d)) {
		case GGML_BACKEND_DEVICE_TYPE_CPU: kind = "cpu"; break;
		case GGML_BACKEND_DEVICE_TYPE_GPU: kind = "gpu"; break;
		case GGML_BACKEND_DEVICE_TYPE_ACCEL: kind = "accel"; break;
		default: break;
		}
		int w = snprintf(buf + off, n - off, "%s\t%s\t%s\n", ggml_backend_dev_name(d), ggml_backend_dev_description(d), kind);
		if (w < 0) {
			break;
		}
		off += (size_t)w;
	}
}
*/
import "C"

import (
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"unsafe"
)

// Sentinel errors of the binding. llama_decode's return codes map onto them.
var (
	ErrNoKVSlot     = errors.New("llamacpp: no KV cache slot for the batch (context full)")
	ErrAborted      = errors.New("llamacpp: decode aborted")
	ErrInvalidBatch = errors.New("llamacpp: invalid batch")
	ErrDecodeFatal  = errors.New("llamacpp: fatal decode error")
	ErrInvalidSeq   = errors.New("llamacpp: invalid sequence id or range")
	ErrNoLogits     = errors.New("llamacpp: no logits for that batch index")
	ErrBatchFull    = errors.New("llamacpp: batch is full")
	ErrFreed        = errors.New("llamacpp: use after free")
	ErrTokenize     = errors.New("llamacpp: tokenize failed")
)

var backendOnce sync.Once

// initBackend initialises llama.cpp once per process and routes its logs
// through slog at debug level. When VERDICT_GGML_LIB_PATH names a folder,
// ggml backends there (CUDA, …) are loaded first. A build with loadable
// backends (LINK=dynamic) then loads the modules beside libggml: the CPU
// one, and CUDA's where the image ships it.
func initBackend() {
	backendOnce.Do(func() {
		C.verdict_log_setup()
		if dir := os.Getenv("VERDICT_GGML_LIB_PATH"); dir != "" {
			cdir := C.CString(dir)
			C.ggml_backend_load_all_from_path(cdir)
			C.free(unsafe.Pointer(cdir))
		}
		if C.verdict_load_backends() == 0 {
			slog.Error("llama.cpp: no ggml backend could be loaded (a LINK=dynamic build looks beside libggml and in the executable's folder; VERDICT_GGML_LIB_PATH names another)")
		}
		C.llama_backend_init()
	})
}

// SystemInfo is llama.cpp's system info line: the SIMD features the CPU
// backend was compiled with (AVX2 = 1 | …). It initialises the backends.
// llama_print_system_info builds the line in a static std::string, so two
// calls at once corrupt it (a "free(): invalid pointer" abort when
// engines were opened in parallel): it is read once, and the line never
// changes after the backends are loaded.
func SystemInfo() string {
	systemInfo.once.Do(func() {
		initBackend()
		systemInfo.line = strings.TrimSpace(C.GoString(C.llama_print_system_info()))
	})
	return systemInfo.line
}

var systemInfo struct {
	once sync.Once
	line string
}

// GlibcAtLeast reports whether the C library is glibc major.minor or later.
func GlibcAtLeast(major, minor int) bool {
	return bool(C.verdict_glibc_at_least(C.int(major), C.int(minor)))
}

// Device is a ggml compute device registered in this process.
type Device struct {
	Name, Description string
	Kind              string // cpu, gpu, accel or other
}

// Devices lists the ggml devices registered in this process. It
// initialises the backends (loading extra ones from VERDICT_GGML_LIB_PATH).
func Devices() []Device {
	initBackend()
	buf := make([]C.char, 16<<10)
	C.verdict_devices(&buf[0], C.size_t(len(buf)))
	var out []Device
	for _, line := range strings.Split(C.GoString(&buf[0]), "\n") {
		if f := strings.Split(line, "\t"); len(f) == 3 {
			out = append(out, Device{Name: f[0], Description: f[1], Kind: f[2]})
		}
	}
	return out
}

var logBuf struct {
	sync.Mutex
	strings.Builder
}

//export verdictLog
func verdictLog(level C.int, text *C.char, _ unsafe.Pointer) {
	s := C.GoString(text)
	logBuf.Lock()
	logBuf.WriteString(s)
	if !strings.HasSuffix(s, "\n") {
		logBuf.Unlock()
		return
	}
	line := strings.TrimRight(logBuf.String(), "\n")
	logBuf.Reset()
	logBuf.Unlock()
	if level == C.GGML_LOG_LEVEL_ERROR {
		slog.Warn("llama.cpp", "msg", line)
		return
	}
	slog.Debug("llama.cpp", "msg", line)
}
