// Package listen builds every HTTP listener verdict opens (`verdict
// serve`, `verdict up`, the worker's metrics address) from one Config, so
// that none of them lacks a timeout or a connection bound.
//
// A connection is bounded at each step of a request:
//
//   - HeaderTimeout: a client that has not sent its headers in time is
//     disconnected (net/http answers nothing);
//   - BodyTimeout: the whole request, body included, must arrive in time;
//     a handler reading a body that stalls gets an error and answers 408;
//   - WriteTimeout: the answer must be written in time after the headers
//     were read (it bounds the handler as well);
//   - IdleTimeout: a kept-alive connection waiting for its next request is
//     closed after it;
//   - MaxConns: at most this many connections are open; one more is
//     answered 503 with Retry-After and closed at once, never queued.
//
// Slow clients (slowloris) therefore hold a socket for at most the header
// or body timeout, and never more than MaxConns of them.
package listen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/verdict-dev/verdict/decision"
)

// ErrConfig: a Config field is invalid; the message names it.
var ErrConfig = errors.New("listen: invalid config")

// Defaults of Config.
const (
	DefaultHeaderTimeout = 10 * time.Second
	DefaultBodyTimeout   = 60 * time.Second
	DefaultWriteTimeout  = 60 * time.Second
	DefaultIdleTimeout   = 120 * time.Second
	DefaultMaxConns      = 1024
)

// refusalGrace is how long a refused connection is given to read its 503.
const refusalGrace = time.Second

// maxRefusing bounds the goroutines answering refused connections; beyond
// it a refused connection is closed without an answer.
const maxRefusing = 64

// Config bounds an HTTP listener. The zero value of a field means its
// default, given at the end of its comment.
type Config struct {
	// HeaderTimeout bounds reading a request's headers. Defaults to 10 s.
	HeaderTimeout time.Duration
	// BodyTimeout bounds reading a whole request, body included, from its
	// first byte. Defaults to 60 s.
	BodyTimeout time.Duration
	// WriteTimeout bounds handling and writing an answer, from the end of
	// the request's headers. Defaults to 60 s.
	WriteTimeout time.Duration
	// IdleTimeout bounds how long a kept-alive connection may wait for its
	// next request. Defaults to 120 s.
	IdleTimeout time.Duration
	// MaxConns bounds the open connections; one more is answered 503 and
	// closed. Defaults to 1024.
	MaxConns int
	// RetryAfter is the Retry-After of that 503 (whole seconds, at least
	// 1). Defaults to 1 s.
	RetryAfter time.Duration
	// Logger receives net/http's own error lines at warn level. Defaults to
	// slog.Default().
	Logger *slog.Logger
}

func (c Config) validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"HeaderTimeout", c.HeaderTimeout}, {"BodyTimeout", c.BodyTimeout}, {"WriteTimeout", c.WriteTimeout},
		{"IdleTimeout", c.IdleTimeout}, {"RetryAfter", c.RetryAfter}} {
		if d.v < 0 {
			return fmt.Errorf("%w: %s must be > 0 (0 means the default), got %v", ErrConfig, d.name, d.v)
		}
	}
	if c.MaxConns < 0 {
		return fmt.Errorf("%w: MaxConns must be > 0 (0 means the default), got %d", ErrConfig, c.MaxConns)
	}
	return nil
}

func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.HeaderTimeout, DefaultHeaderTimeout)
	def(&c.BodyTimeout, DefaultBodyTimeout)
	def(&c.WriteTimeout, DefaultWriteTimeout)
	def(&c.IdleTimeout, DefaultIdleTimeout)
	def(&c.RetryAfter, time.Second)
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Server is an http.Server with its bounds. Serve it on a listener.
type Server struct {
	hs       *http.Server
	cfg      Config
	refusing chan struct{}
}

// New builds a Server for h.
func New(h http.Handler, cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.HeaderTimeout,
		ReadTimeout:       cfg.BodyTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	return &Server{hs: hs, cfg: cfg, refusing: make(chan struct{}, maxRefusing)}, nil
}

// Serve serves connections from ln, at most MaxConns at once, until
// Shutdown or Close; it returns http.ErrServerClosed then.
func (s *Server) Serve(ln net.Listener) error {
	return s.hs.Serve(&boundedListener{Listener: ln, open: make(chan struct{}, s.cfg.MaxConns), s: s})
}

// Shutdown stops taking connections and waits for those in flight, up to
// ctx (http.Server.Shutdown).
func (s *Server) Shutdown(ctx context.Context) error { return s.hs.Shutdown(ctx) }

// Close closes every connection at once.
func (s *Server) Close() error { return s.hs.Close() }

// boundedListener hands at most cap(open) connections to the server at once.
type boundedListener struct {
	net.Listener
	open chan struct{}
	s    *Server
}

func (l *boundedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.open <- struct{}{}:
			return &boundedConn{Conn: c, open: l.open}, nil
		default:
			l.s.refuse(c)
		}
	}
}

// boundedConn gives its place back when it is closed.
type boundedConn struct {
	net.Conn
	open chan struct{}
	once sync.Once
}

func (c *boundedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { <-c.open })
	return err
}

// refuse answers a connection beyond the bound with 503 and closes it. The
// answer is written at once, then the request the client sends meanwhile
// is read and dropped for a moment, so that closing does not reset the
// connection before the client reads the 503.
func (s *Server) refuse(c net.Conn) {
	select {
	case s.refusing <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	go func() {
		defer func() { <-s.refusing }()
		defer c.Close()
		body, _ := json.Marshal(decision.ErrorBody{Code: decision.CodeOverloaded, Message: "too many open connections; retry later"})
		retry := int((s.cfg.RetryAfter + time.Second - 1) / time.Second)
		msg := "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: " +
			strconv.Itoa(max(retry, 1)) + "\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + string(body)
		_ = c.SetDeadline(time.Now().Add(refusalGrace))
		if _, err := c.Write([]byte(msg)); err != nil {
			return
		}
		if tc, ok := c.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		}
		var buf [4096]byte
		for n := 0; n < 64<<10; {
			k, err := c.Read(buf[:])
			n += k
			if err != nil {
				return
			}
		}
	}()
}
