package batch

import (
	"bufio"
	"errors"
	"io"
)

// Line is one line of a JSONL input.
type Line struct {
	// No is the 1-based line number.
	No int
	// Data is the line without its newline; nil when TooLong. It is valid
	// until the next call to Next.
	Data []byte
	// TooLong is set when the line exceeded the reader's limit; its bytes
	// were skipped up to the next newline.
	TooLong bool
	// Len is the line's length in bytes, newline excluded (counted even when
	// TooLong).
	Len int64
}

// LineReader reads JSONL lines with a length bound. Unlike bufio.Scanner,
// which stops at the first line over its limit, it reports an over-long
// line as TooLong and goes on with the next one, so one bad line never
// costs the rest of the file.
type LineReader struct {
	r    *bufio.Reader
	max  int
	no   int
	buf  []byte
	read int64
}

// NewLineReader reads lines of at most maxLine bytes (newline excluded)
// from r. maxLine < 1 means 1 MiB.
func NewLineReader(r io.Reader, maxLine int) *LineReader {
	if maxLine < 1 {
		maxLine = 1 << 20
	}
	return &LineReader{r: bufio.NewReaderSize(r, min(64<<10, maxLine+1)), max: maxLine}
}

// Offset is the number of input bytes consumed so far.
func (lr *LineReader) Offset() int64 { return lr.read }

// Next returns the next line, or io.EOF after the last one. A last line
// without a newline is returned as a line.
func (lr *LineReader) Next() (Line, error) {
	lr.buf = lr.buf[:0]
	var n int64
	tooLong := false
	for {
		chunk, err := lr.r.ReadSlice('\n')
		n += int64(len(chunk))
		lr.read += int64(len(chunk))
		if !tooLong {
			if len(lr.buf)+len(chunk) > lr.max+1 { // +1: the newline itself
				tooLong = true
				lr.buf = lr.buf[:0]
			} else {
				lr.buf = append(lr.buf, chunk...)
			}
		}
		switch {
		case err == nil:
			lr.no++
			return lr.line(n, tooLong, true), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if n == 0 {
				return Line{}, io.EOF
			}
			lr.no++
			return lr.line(n, tooLong, false), nil
		default:
			return Line{}, err
		}
	}
}

func (lr *LineReader) line(n int64, tooLong, newline bool) Line {
	if newline {
		n--
	}
	l := Line{No: lr.no, Len: n, TooLong: tooLong || n > int64(lr.max)}
	if !l.TooLong {
		d := lr.buf
		if newline {
			d = d[:len(d)-1]
		}
		if len(d) > 0 && d[len(d)-1] == '\r' {
			d = d[:len(d)-1]
		}
		l.Data = d
	}
	return l
}
