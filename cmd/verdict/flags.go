package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/verdict-dev/verdict/internal/auth"
)

// helpOut receives usage text; `verdict help --markdown` captures it.
var helpOut io.Writer = os.Stderr

// errUsage means the command line was wrong and usage was printed.
var errUsage = errors.New("usage")

// newFlagSet returns a flag set for a subcommand whose usage text starts
// with the given synopsis.
func newFlagSet(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(helpOut)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: verdict %s\n\nFlags (each also VERDICT_<NAME>):\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args, then fills every flag not given on the command
// line from its VERDICT_* environment variable (flags win). Errors name the
// flag or variable and the bad value.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitCode(0)
		}
		return errUsage
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		env := envName(f.Name)
		if v, ok := os.LookupEnv(env); ok {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("environment %s=%q: %v", env, v, e)
			}
		}
	})
	return err
}

// envName maps a flag name to its environment variable: gpu-layers →
// VERDICT_GPU_LAYERS.
func envName(flagName string) string {
	return "VERDICT_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// logFlags are the logging flags every long-running command takes.
type logFlags struct {
	level  string
	format string
}

func (l *logFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&l.format, "log-format", "text", "log format: text or json")
}

// setup installs the default slog logger (on stderr).
func (l *logFlags) setup() error {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(l.level)); err != nil {
		return fmt.Errorf("flag --log-level: bad value %q (want debug, info, warn or error)", l.level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch l.format {
	case "text":
		slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, opts)))
	case "json":
		slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, opts)))
	default:
		return fmt.Errorf("flag --log-format: bad value %q (want text or json)", l.format)
	}
	return nil
}

// parseInterspersed is parseFlags for commands whose positional arguments
// may come before flags (`verdict batch IN.jsonl -o OUT.jsonl`): it returns
// the positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, exitCode(0)
			}
			return nil, errUsage
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	return pos, parseFlags(fs, nil)
}

// startCommand is the one preamble of the long-running commands (serve,
// up, worker): parse the flags (then their VERDICT_* variables), refuse
// positional arguments, set up logging, then run the command's checks in
// order. Every error names its flag or variable.
func startCommand(fs *flag.FlagSet, args []string, lf *logFlags, checks ...func() error) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (%s takes only flags)", fs.Arg(0), fs.Name())
	}
	if err := lf.setup(); err != nil {
		return err
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// listenerKeys reads --api-keys and checks that addr may be served with
// them (package auth's bind rule): the key check of every command that
// opens a listener for callers. noAuth is nil where the command has no
// --no-auth flag.
func listenerKeys(apiKeys, addr string, noAuth *bool) (map[string]string, error) {
	keys, err := auth.ParseKeys(apiKeys)
	if err != nil {
		return nil, fmt.Errorf("flag --api-keys: %w", err)
	}
	open := noAuth != nil && *noAuth
	if err := auth.CheckBind(addr, len(keys) > 0, open); err != nil {
		if noAuth != nil {
			return nil, fmt.Errorf("flag --addr: %w, or pass --no-auth when a platform in front authenticates callers", err)
		}
		return nil, fmt.Errorf("flag --addr: %w", err)
	}
	return keys, nil
}
