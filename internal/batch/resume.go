package batch

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// Resume prepares an output file written by an interrupted run (even one
// killed with SIGKILL) for appending: it keeps the leading records that are
// whole (newline-terminated, valid JSON, line numbers increasing), truncates
// whatever follows (a torn last line), and returns the last input line
// number kept: pass it as Config.Skip. A missing or empty file gives 0.
func Resume(path string) (int, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	last, keep, err := scanRecords(f, 1<<62)
	if err != nil {
		return 0, fmt.Errorf("resume %s: %w", path, err)
	}
	return last, truncate(f, keep)
}

// TrimAfter drops the records of an errors file whose line is after last
// (written before an interruption, for lines whose output was lost), and a
// torn tail. A missing file is fine.
func TrimAfter(path string, last int) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	_, keep, err := scanRecords(f, last)
	if err != nil {
		return fmt.Errorf("resume %s: %w", path, err)
	}
	return truncate(f, keep)
}

// scanRecords reads whole records up to the first bad one or the first
// with a line number above maxLine; it returns the last line number kept
// and the byte length of the kept prefix.
func scanRecords(f *os.File, maxLine int) (last int, keep int64, err error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, 0, err
	}
	lr := NewLineReader(f, 1<<30)
	for {
		l, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return last, keep, nil
		}
		if err != nil {
			return 0, 0, err
		}
		var head struct {
			Line *int `json:"line"`
		}
		whole := lr.Offset()-keep == l.Len+1 // ends with a newline
		if !whole || json.Unmarshal(l.Data, &head) != nil || head.Line == nil || *head.Line <= last || *head.Line > maxLine {
			return last, keep, nil
		}
		last, keep = *head.Line, lr.Offset()
	}
}

func truncate(f *os.File, size int64) error {
	if err := f.Truncate(size); err != nil {
		return err
	}
	_, err := f.Seek(size, io.SeekStart)
	return err
}
