package linux

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// linkTree makes dst a copy of the tree src: directories of its own
// (owned by dirOwner and mode 0755 when dirOwner is set, else root's alone,
// mode 0700), and src's files
// hard-linked where dst is on src's file system, copied where it is not
// (the copy root's, with the file's mode). A file hard-linked stays root's
// and read-only: whoever owns dst can replace it there, never in src.
func linkTree(src, dst string, dirOwner *account) error {
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			mode := fs.FileMode(0o700)
			if dirOwner != nil {
				mode = 0o755
			}
			if err := os.Mkdir(target, mode); err != nil {
				return err
			}
			if err := os.Chmod(target, mode); err != nil { // whatever the umask
				return err
			}
			if dirOwner != nil {
				return os.Chown(target, int(dirOwner.uid), int(dirOwner.gid))
			}
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			if os.Link(path, target) == nil {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			return copyFile(path, target, info.Mode().Perm())
		}
		return nil // no devices, pipes or sockets in a runner installation
	})
}

// copyFile copies src to a new file dst with mode perm (whatever the umask).
func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Chmod(perm); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// mkdirAll is os.MkdirAll with every directory it makes at mode perm,
// whatever the umask: the runner user must traverse the directories above
// the installation.
func mkdirAll(path string, perm fs.FileMode) error {
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		return nil
	}
	if err := mkdirAll(filepath.Dir(path), perm); err != nil {
		return err
	}
	if err := os.Mkdir(path, perm); err != nil && !os.IsExist(err) {
		return err
	}
	return os.Chmod(path, perm)
}
