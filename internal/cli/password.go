package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/etcdlead/etcdlead/internal/logbuf"
)

// maxPasswordFile bounds what is read of --password-file: a password file
// holds one line, and a file that does not end (/dev/zero) must not fill
// the memory.
const maxPasswordFile = 4 << 10

// readPasswordFile reads the password from a regular file, refusing
// anything else in one line: a FIFO would block without a word, a device
// might never end. It warns when other users may read the file, as ssh does
// for keys.
func readPasswordFile(c *cli.Context, path string) (string, error) {
	// O_NONBLOCK: opening a FIFO would otherwise wait for a writer.
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("--password-file: %v", pathErr(&os.PathError{Op: "open", Path: path, Err: err}))
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("--password-file: %v", pathErr(err))
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("--password-file %s is not a regular file (%s): give a file that holds the password", path, kind(fi.Mode()))
	}
	if fi.Size() > maxPasswordFile {
		return "", fmt.Errorf("--password-file %s holds %d bytes, more than a password: give a file with the password alone", path, fi.Size())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPasswordFile+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("--password-file: %v", pathErr(err))
	case len(b) > maxPasswordFile:
		return "", fmt.Errorf("--password-file %s holds more than %d bytes, more than a password: give a file with the password alone", path, maxPasswordFile)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return "", fmt.Errorf("--password-file %s is empty: write the password into it", path)
	}
	if fi.Mode().Perm()&0o004 != 0 {
		warn(c, "--password-file is readable by every user of this machine: chmod o-r it", "file", path)
	}
	return pw, nil
}

func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "not a plain file"
}

// pathErr drops the operation from a file error: "open x: no such file"
// reads as "x: no such file".
func pathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %v", pe.Path, pe.Err)
	}
	return err
}

// warn writes one warning in the format the logs are asked for, before a
// command has its logger (or in commands that have none).
func warn(c *cli.Context, msg string, args ...any) {
	level, json, err := logOptions(c)
	if err != nil {
		level, json = "info", false
	}
	logbuf.Logger(hclog.LoggerOptions{Name: "etcdlead", Level: hclog.LevelFromString(level), JSONFormat: json}).Warn(msg, args...)
}
