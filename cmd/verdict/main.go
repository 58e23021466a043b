// Command verdict scores decisions with a language model's next-token
// logits and turns them into outcomes software can act on.
//
// Every subcommand lives in its own file and registers itself in init; this
// file only dispatches. Run `verdict help` for the list.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/verdict-dev/verdict/internal/hugepages"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	// runFunc runs the command with its arguments (after the name). It
	// returns errSilent when it already reported the failure.
	runFunc func(ctx context.Context, args []string) error
}

var commands = map[string]command{}

// register adds a subcommand; called from init functions.
func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("verdict: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

// errSilent means the command already printed why it failed.
var errSilent = errors.New("failed")

// exitCode lets a command ask for a specific exit status.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func usage() {
	fmt.Fprintf(os.Stderr, "verdict scores decisions from a language model's next-token logits.\n\nUsage: verdict <command> [flags] [args]\n\nCommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(os.Stderr, "\nRun `verdict <command> --help` for its flags. Every flag can also be set\nas VERDICT_<FLAG> (upper case, dashes as underscores); flags win.\n")
}

// markdownReference renders every command's usage as Markdown: the
// command-line reference (docs/cli.md).
func markdownReference() string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	old := helpOut
	defer func() { helpOut = old }()
	for _, n := range names {
		var buf strings.Builder
		helpOut = &buf
		_ = commands[n].runFunc(context.Background(), []string{"--help"})
		fmt.Fprintf(&b, "### verdict %s\n\n%s\n\n```text\n%s\n```\n\n", n, commands[n].summary, strings.TrimRight(buf.String(), "\n"))
	}
	return b.String()
}

func main() {
	// Before any C code allocates: large allocations (weights read into
	// memory, the KV cache) on transparent huge pages.
	if err := hugepages.Reexec(); err != nil {
		fmt.Fprintf(os.Stderr, "verdict: going on without huge pages: %v\n", err)
	}
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 2 && args[0] == "help" && args[1] == "--markdown" {
		fmt.Print(markdownReference())
		return 0
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				_ = c.runFunc(context.Background(), []string{"--help"})
				return 0
			}
		}
		usage()
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "verdict: unknown command %q\n\n", args[0])
		usage()
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := c.runFunc(ctx, args[1:])
	var code exitCode
	switch {
	case err == nil:
		return 0
	case errors.As(err, &code):
		return int(code)
	case errors.Is(err, errSilent):
		return 1
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintf(os.Stderr, "verdict %s: %v\n", c.name, err)
		return 1
	}
}
