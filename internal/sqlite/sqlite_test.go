package sqlite_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/sqlite"
)

// TestOpenOddPaths: a path with the characters a file: URI gives meaning
// to ('#', '?', '%') opens the file it names.
func TestOpenOddPaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{"seed#0.db", "a?b.db", "100%.db"} {
		path := filepath.Join(dir, name)
		db, err := sqlite.Open(path)
		require.NoError(t, err)
		_, err = db.Exec("CREATE TABLE t (x INTEGER)")
		require.NoError(t, err)
		require.NoError(t, db.Close())
		_, err = os.Stat(path)
		require.NoError(t, err, "the file named %q must exist", name)
	}
}
