package linux

import (
	"cmp"
	"crypto/rand"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// treeOwner is whose the directories and links of a copied tree are, and
// the directories' mode (0: each source directory's own).
type treeOwner struct {
	uid, gid int
	dirMode  uint32
}

// rootOnly is how the agent's own copies of the installation are: root's
// alone.
var rootOnly = treeOwner{dirMode: 0o700}

// copyTree copies the tree of the directory src into the empty directory
// dst through descriptors: directories and symbolic links own's, regular
// files through copyFile; nothing else (a runner installation and
// /etc/skel have nothing else). A directory is handed over once filled.
func copyTree(src, dst *os.File, own treeOwner, copyFile func(src, dst *os.File, name string, perm uint32) error) error {
	names, err := src.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, name := range names {
		st, err := lstatAt(src, name)
		if err != nil {
			return err
		}
		perm := uint32(st.Mode) & 0o777
		switch uint32(st.Mode) & unix.S_IFMT {
		case unix.S_IFDIR:
			err = copyDirAt(src, name, dst, cmp.Or(own.dirMode, perm), own, copyFile)
		case unix.S_IFLNK:
			err = copyLinkAt(src, name, dst, own.uid, own.gid)
		case unix.S_IFREG:
			err = copyFile(src, dst, name, perm)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func copyDirAt(src *os.File, name string, dst *os.File, perm uint32, own treeOwner, copyFile func(src, dst *os.File, name string, perm uint32) error) error {
	from, err := openDirAt(src, name)
	if err != nil {
		return err
	}
	defer from.Close()
	to, err := mkdirAt(dst, name)
	if err != nil {
		return err
	}
	defer to.Close()
	if err := copyTree(from, to, own, copyFile); err != nil {
		return err
	}
	return handOver(to, own.uid, own.gid, perm)
}

// linkOrCopy hard-links the installation's file where the copy is on its
// file system, and copies it (root's, with its mode) where it is not. A
// file hard-linked stays root's and read-only: whoever owns the copy can
// replace it there, never in the installation.
func linkOrCopy(src, dst *os.File, name string, perm uint32) error {
	if unix.Linkat(fd(src), name, fd(dst), name, 0) == nil {
		return nil
	}
	return copyFileAt(src, name, dst, perm, 0, 0)
}

// copyInstallation makes dst a fresh copy of the runner installation
// install, with the registration files of regDir ("" for none, as is
// config.sh's to write) own's and mode 0600. It builds the copy in a
// staging directory of dst's parent that only root can reach, moves it
// into place whole, and only then hands it to own: the runner user, who
// may own the parent, never sees a directory root is still filling.
func copyInstallation(install, regDir, dst string, own treeOwner) (err error) {
	src, err := openDir(install)
	if err != nil {
		return err
	}
	defer src.Close()
	parent, err := openDir(filepath.Dir(dst))
	if err != nil {
		return err
	}
	defer parent.Close()
	stageName := ".ec2runners-stage-" + rand.Text()
	stage, err := mkdirAt(parent, stageName)
	if err != nil {
		return err
	}
	defer stage.Close()
	defer func() {
		if err != nil {
			_ = removeAllAt(parent, stageName)
		}
	}()
	if err := copyTree(src, stage, own, linkOrCopy); err != nil {
		return err
	}
	if regDir != "" {
		if err := copyRegistration(regDir, stage, own); err != nil {
			return err
		}
	}
	name := filepath.Base(dst)
	if err := removeAllAt(parent, name); err != nil {
		return err
	}
	if err := unix.Renameat(fd(parent), stageName, fd(parent), name); err != nil {
		return &os.PathError{Op: "rename", Path: dst, Err: err}
	}
	return handOver(stage, own.uid, own.gid, own.dirMode)
}

// copyRegistration copies the registration files of regDir into dst,
// own's and mode 0600.
func copyRegistration(regDir string, dst *os.File, own treeOwner) error {
	reg, err := openDir(regDir)
	if err != nil {
		return err
	}
	defer reg.Close()
	for _, name := range registrationFiles {
		if err := copyFileAt(reg, name, dst, 0o600, own.uid, own.gid); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// prepareRunDir makes the run's runner directory, runner in acct's home, a
// fresh copy of install with the registration files of regDir, the runner
// user's: its directories mode 0755, the installation's files root's and
// read-only, the registration's files its own.
func prepareRunDir(install, regDir string, acct account) (runDir string, err error) {
	runDir = filepath.Join(acct.home, "runner")
	if err := copyInstallation(install, regDir, runDir, treeOwner{uid: int(acct.uid), gid: int(acct.gid), dirMode: 0o755}); err != nil {
		return "", err
	}
	return runDir, nil
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
