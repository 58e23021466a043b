//go:build unix

package peer

import "syscall"

// pause stops the server's process (SIGSTOP) so that nothing of it, not
// even threads that spin while it is idle, runs while another system is
// measured; resume continues it (SIGCONT).
func (s *server) pause() error  { return s.cmd.Process.Signal(syscall.SIGSTOP) }
func (s *server) resume() error { return s.cmd.Process.Signal(syscall.SIGCONT) }
