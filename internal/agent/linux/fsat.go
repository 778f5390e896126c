package linux

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Root's file calls where the runner user can write go through
// descriptors: each acts on an open directory or file, or on one name in an
// open directory, and none follows a symbolic link. A job that swaps an
// entry for a link between two of root's calls cannot turn the second onto
// a file of its choice.

const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

func fd(f *os.File) int { return int(f.Fd()) }

// openDir opens the directory path (absolute), one name at a time,
// following no link on the way.
func openDir(path string) (*os.File, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%s: not an absolute path", path)
	}
	dir, err := os.OpenFile("/", dirFlags, 0)
	if err != nil {
		return nil, err
	}
	for _, name := range strings.Split(filepath.Clean(path), "/") {
		if name == "" {
			continue
		}
		next, err := openDirAt(dir, name)
		dir.Close()
		if err != nil {
			return nil, err
		}
		dir = next
	}
	return dir, nil
}

// rootsAlone fails unless root alone can change what path names: each of
// its directories is one (no link), root's, and writable by root alone or
// sticky (others may not rename or remove root's entries there). Root
// works by path in such a tree, its state and the runner installations.
func rootsAlone(path string) error {
	dir, err := openDir("/")
	if err != nil {
		return err
	}
	defer func() { dir.Close() }()
	names := append([]string{""}, strings.Split(strings.Trim(filepath.Clean(path), "/"), "/")...)
	for i, name := range names {
		st, err := lstatAt(dir, name)
		if err != nil {
			return err
		}
		shown := "/" + filepath.Join(names[:i+1]...)
		switch {
		case st.Mode&unix.S_IFMT != unix.S_IFDIR:
			return fmt.Errorf("%s is not a directory (a link?): root's files must be reached through root's directories alone", shown)
		case st.Uid != 0:
			return fmt.Errorf("%s belongs to uid %d, not root: its owner could swap what root works on below it", shown, st.Uid)
		case st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0:
			return fmt.Errorf("%s is writable by others than root, and not sticky: they could swap what root works on below it", shown)
		}
		if name == "" {
			continue
		}
		next, err := openDirAt(dir, name)
		if err != nil {
			return err
		}
		dir.Close()
		dir = next
	}
	return nil
}

// openDirAt opens the directory name in dir, not following a link.
func openDirAt(dir *os.File, name string) (*os.File, error) {
	path := filepath.Join(dir.Name(), name)
	f, err := unix.Openat(fd(dir), name, dirFlags, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(f), path), nil
}

// statMask is what the walks read of an entry.
const statMask = unix.STATX_TYPE | unix.STATX_MODE | unix.STATX_UID | unix.STATX_GID | unix.STATX_MNT_ID

// lstatAt is statx of name in dir, not following a link ("" for dir
// itself). The mount id is in it where the kernel reports one (Mask has
// STATX_MNT_ID, Linux 5.8 and later).
func lstatAt(dir *os.File, name string) (*unix.Statx_t, error) {
	flags := unix.AT_SYMLINK_NOFOLLOW
	if name == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	var st unix.Statx_t
	if err := unix.Statx(fd(dir), name, flags, statMask, &st); err != nil {
		return nil, &os.PathError{Op: "statx", Path: filepath.Join(dir.Name(), name), Err: err}
	}
	return &st, nil
}

// mkdirAt makes the directory name in dir and opens it, root's and mode
// 0700 until the caller hands it over (handOver). It fails unless it opened
// a directory of root's: the runner user cannot make one.
func mkdirAt(dir *os.File, name string) (*os.File, error) {
	if err := unix.Mkdirat(fd(dir), name, 0o700); err != nil {
		return nil, &os.PathError{Op: "mkdir", Path: filepath.Join(dir.Name(), name), Err: err}
	}
	made, err := openDirAt(dir, name)
	if err != nil {
		return nil, err
	}
	st, err := lstatAt(made, "")
	if err == nil && st.Uid != 0 {
		err = fmt.Errorf("%s: not the directory root made: owned by %d", made.Name(), st.Uid)
	}
	if err != nil {
		made.Close()
		return nil, err
	}
	return made, nil
}

// handOver makes the open file f uid:gid's, mode perm whatever the umask
// (the mode last: a change of owner clears set-id bits).
func handOver(f *os.File, uid, gid int, perm uint32) error {
	if err := unix.Fchown(fd(f), uid, gid); err != nil {
		return &os.PathError{Op: "chown", Path: f.Name(), Err: err}
	}
	if err := unix.Fchmod(fd(f), perm); err != nil {
		return &os.PathError{Op: "chmod", Path: f.Name(), Err: err}
	}
	return nil
}

// copyFileAt copies the file name in src to a new file of that name in
// dst, uid:gid's with mode perm.
func copyFileAt(src *os.File, name string, dst *os.File, perm uint32, uid, gid int) error {
	in, err := openFileAt(src, name, unix.O_RDONLY)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := openFileAt(dst, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := handOver(out, uid, gid, perm); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// openFileAt opens the file name in dir with flags, not following a link;
// one it creates is mode 0600 until handed over.
func openFileAt(dir *os.File, name string, flags int) (*os.File, error) {
	path := filepath.Join(dir.Name(), name)
	f, err := unix.Openat(fd(dir), name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(f), path), nil
}

// copyLinkAt makes the symbolic link name in src again in dst, uid:gid's.
func copyLinkAt(src *os.File, name string, dst *os.File, uid, gid int) error {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd(src), name, buf)
	if err != nil {
		return &os.PathError{Op: "readlink", Path: filepath.Join(src.Name(), name), Err: err}
	}
	path := filepath.Join(dst.Name(), name)
	if err := unix.Symlinkat(string(buf[:n]), fd(dst), name); err != nil {
		return &os.PathError{Op: "symlink", Path: path, Err: err}
	}
	if err := unix.Fchownat(fd(dst), name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "chown", Path: path, Err: err}
	}
	return nil
}

// removeAllAt removes name from dir with all it holds, following no link;
// a name already gone is no error.
func removeAllAt(dir *os.File, name string) error {
	err := unix.Unlinkat(fd(dir), name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) {
		return &os.PathError{Op: "unlink", Path: filepath.Join(dir.Name(), name), Err: err}
	}
	sub, err := openDirAt(dir, name)
	if err != nil {
		return err
	}
	names, err := sub.Readdirnames(-1)
	for _, n := range names {
		err = errors.Join(err, removeAllAt(sub, n))
	}
	sub.Close()
	if err != nil {
		return err
	}
	if err := unix.Unlinkat(fd(dir), name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "rmdir", Path: sub.Name(), Err: err}
	}
	return nil
}
