package batch_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/verdict-dev/verdict/internal/batch"
)

func TestLineReaderSkipsOverLongLineAndGoesOn(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 200_000)
	in := "short\n" + long + "\n\nlast-no-newline"
	lr := batch.NewLineReader(strings.NewReader(in), 1000)
	var got []batch.Line
	for {
		l, err := lr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		l.Data = append([]byte(nil), l.Data...)
		got = append(got, l)
	}
	require.Len(t, got, 4)
	require.Equal(t, "short", string(got[0].Data))
	require.Equal(t, 2, got[1].No)
	require.True(t, got[1].TooLong)
	require.Equal(t, int64(200_000), got[1].Len)
	require.Nil(t, got[1].Data)
	require.Equal(t, "", string(got[2].Data))
	require.False(t, got[2].TooLong)
	require.Equal(t, "last-no-newline", string(got[3].Data))
	require.Equal(t, 4, got[3].No)
	require.Equal(t, int64(len(in)), lr.Offset())
}

func TestLineReaderLimitIsExact(t *testing.T) {
	t.Parallel()
	lr := batch.NewLineReader(strings.NewReader("abcd\nabcde\r\nabc\r\n"), 4)
	l, _ := lr.Next()
	require.Equal(t, "abcd", string(l.Data))
	l, _ = lr.Next()
	require.True(t, l.TooLong)
	l, _ = lr.Next()
	require.Equal(t, "abc", string(l.Data))
	_, err := lr.Next()
	require.ErrorIs(t, err, io.EOF)
}
