// Package sqlite is the one place verdict opens SQLite files: the local
// queue, the local results store and the request log all open, close and
// bound their calls the same way.
package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// Open opens a SQLite file the way verdict's local stores use it:
// WAL journal, synchronous (durable) commits, immediate write
// transactions and a busy timeout for other processes.
func Open(path string) (*sql.DB, error) {
	// In a file: URI, '?' starts the query, '#' the fragment and '%' an
	// escape: escape them so that any path opens the file it names.
	escaped := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	dsn := "file:" + escaped + fmt.Sprintf("?_pragma=busy_timeout(%d)", busyTimeout.Milliseconds()) + "&_pragma=journal_mode(WAL)" +
		"&_pragma=synchronous(FULL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	// One connection: writes serialize in this process anyway, and other
	// processes wait on the busy timeout.
	db.SetMaxOpenConns(1)
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return db, nil
}

// Close closes a database opened with Open and returns once
// its file is closed. database/sql's Close does not wait for a connection
// still in use: it closes it when the call using it releases it. Waiting
// for that (bounded by what one CallContext call may take, and a second
// more) means a caller that closed a store can rely on it: another
// process may open the file, and SQLite has checkpointed and removed the
// -wal journal.
func Close(db *sql.DB) error {
	err := db.Close()
	deadline := time.Now().Add(callTimeout + time.Second)
	for db.Stats().OpenConnections > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	return err
}

// CallContext is the context for one short SQLite call (a statement or
// a transaction) of a store opened with Open, made on behalf of
// ctx: an error if ctx is done already, else ctx's values without its
// cancellation, bounded by callTimeout. Every call of verdict's
// local stores runs under it, so a caller that gives up never interrupts
// SQLite mid-call. An interrupt can arrive just after a statement
// finished (the driver's watcher races the statement's end), and then
// stays set on the connection: database/sql discards the connection, and
// SQLite's checkpoint at its close fails, leaving the -wal journal behind
// (TestLocalCloseClosesTheFile's cancelled receives left it in 116 of
// 3,000 rounds). A call takes milliseconds, or the busy timeout at most when
// another process holds the lock, so finishing it costs a caller that
// gave up nothing worth the risk.
func CallContext(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	return c, cancel, nil
}

// busyTimeout is how long a statement waits for another process's
// lock (Open's busy_timeout).
const busyTimeout = 10 * time.Second

// callTimeout bounds one CallContext call: its write lock's wait
// (immediate transactions take it first) and its statements.
const callTimeout = busyTimeout + 5*time.Second
