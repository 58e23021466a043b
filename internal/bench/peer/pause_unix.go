//go:build unix

package peer

import "syscall"

// pause stops the server's process (SIGSTOP) so that nothing of it, not
// even threads that spin while it is idle, runs while another system is
// measured; resume continues it (SIGCONT). Either fails with the
// server's ExitError when it has exited.
func (s *server) pause() error  { return s.signal(syscall.SIGSTOP, "pause") }
func (s *server) resume() error { return s.signal(syscall.SIGCONT, "resume") }
