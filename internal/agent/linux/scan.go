package linux

import (
	"bufio"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// knownWritable are the directories any user can write on stock images
// (Amazon Linux, Ubuntu), wiped at every release from the first one on;
// the scan adds the image's others.
var knownWritable = []string{"/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/crash", "/dev/mqueue"}

// localFilesystems are the file system types a job's files can be left on.
var localFilesystems = []string{"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "overlay", "vfat", "f2fs", "zfs", "mqueue", "devtmpfs"}

// writableScan finds, once per instance, every directory of the local file
// systems the runner user can write (world-writable, or its own, outside
// its home): where a job can leave files for the next run. It runs in the
// background from the first preparation, once the pre-runner script has
// run (it may make such directories), since walking a large image can take
// long; a release waits for it. Its result is kept only once it ends, and
// so only from a scan after the script.
type writableScan struct {
	file string // where the result is kept, across boots

	once    sync.Once
	started chan struct{} // closed by start
	done    chan struct{}
	dirs    []string
}

func newWritableScan(file string) *writableScan {
	return &writableScan{file: file, started: make(chan struct{}), done: make(chan struct{})}
}

// start runs the scan in the background, unless an earlier boot kept its
// result.
func (s *writableScan) start(acct account, skip []string, logf func(string, ...any)) {
	s.once.Do(func() {
		close(s.started)
		if b, err := os.ReadFile(s.file); err == nil && json.Unmarshal(b, &s.dirs) == nil {
			close(s.done)
			return
		}
		go func() {
			defer close(s.done)
			s.dirs = scanWritable(acct.uid, acct.gid, skip, logf)
			if b, err := json.Marshal(s.dirs); err == nil {
				if err := os.WriteFile(s.file, b, 0o600); err != nil {
					logf("keeping the writable directories: %v", err)
				}
			}
		}()
	})
}

// result is every directory to wipe: the known ones, and the scan's,
// waiting for it to end if it started.
func (s *writableScan) result() []string {
	dirs := slices.Clone(knownWritable)
	select {
	case <-s.started:
		<-s.done
		dirs = append(dirs, s.dirs...)
	default:
	}
	slices.Sort(dirs)
	return slices.Compact(dirs)
}

// scanWritable walks the local file systems for directories uid (of group
// gid) can write, skipping the trees in skip (the runner user's home, wiped
// whole) and those it cannot reach: a directory it may not search hides
// everything below it.
func scanWritable(uid, gid uint32, skip []string, logf func(string, ...any)) []string {
	s := &writableWalk{uid: uid, gid: gid, skip: skip}
	for _, mount := range localMounts() {
		dir, err := openDir(mount)
		if err != nil {
			continue
		}
		if st, err := lstatAt(dir, ""); err == nil {
			s.walk(dir, mount, st)
		}
		dir.Close()
	}
	logf("directories the runner user can write: %v", s.found)
	return s.found
}

type writableWalk struct {
	uid, gid uint32
	skip     []string
	mounts   mountBoundaries
	found    []string
}

// walk looks at the directory dir (at path, statx st) and below it, on its
// mount: another mount is walked as its own, if local.
func (s *writableWalk) walk(dir *os.File, path string, st *unix.Statx_t) {
	if slices.ContainsFunc(s.skip, func(skip string) bool { return path == skip || strings.HasPrefix(path, skip+"/") }) {
		return
	}
	if st.Mode&0o002 != 0 || st.Uid == s.uid || (st.Gid == s.gid && st.Mode&0o020 != 0) {
		s.found = append(s.found, path)
	}
	if !searchable(st, s.uid, s.gid) {
		return
	}
	names, _ := dir.Readdirnames(-1)
	for _, name := range names {
		sub := filepath.Join(path, name)
		est, err := lstatAt(dir, name)
		if err != nil || est.Mode&unix.S_IFMT != unix.S_IFDIR || s.mounts.crossed(st, est, sub) {
			continue
		}
		subDir, err := openDirAt(dir, name)
		if err != nil {
			continue // gone meanwhile
		}
		s.walk(subDir, sub, est)
		subDir.Close()
	}
}

// searchable tells whether uid of group gid may search the directory st.
func searchable(st *unix.Statx_t, uid, gid uint32) bool {
	switch {
	case st.Uid == uid:
		return st.Mode&0o100 != 0
	case st.Gid == gid:
		return st.Mode&0o010 != 0
	}
	return st.Mode&0o001 != 0
}

// mountBoundaries tells where a walk leaves its directory's mount: by mount
// id where the kernel reports it (statx, Linux 5.8 and later), else by the
// mount points of /proc/self/mountinfo; never by st_dev, which an overlay
// without xino reports per layer for what is not a directory, so that a
// job's files in an overlay would look like another file system's.
type mountBoundaries struct {
	points map[string]bool // read when first needed
}

// crossed tells whether the entry at path (statx st) is on another mount
// than its directory (statx dir).
func (m *mountBoundaries) crossed(dir, st *unix.Statx_t, path string) bool {
	if dir.Mask&st.Mask&unix.STATX_MNT_ID != 0 {
		return st.Mnt_id != dir.Mnt_id
	}
	if m.points == nil {
		m.points = map[string]bool{}
		for _, mnt := range mountinfo() {
			m.points[mnt.point] = true
		}
	}
	return m.points[path]
}

// localMounts are the mount points of local file systems.
func localMounts() []string {
	var mounts []string
	for _, mnt := range mountinfo() {
		if slices.Contains(localFilesystems, mnt.fsType) && !strings.HasPrefix(mnt.point, "/proc") && !strings.HasPrefix(mnt.point, "/sys") {
			mounts = append(mounts, mnt.point)
		}
	}
	if mounts == nil {
		return []string{"/"}
	}
	slices.Sort(mounts)
	return slices.Compact(mounts)
}

type mount struct{ point, fsType string }

// mountinfo is the mounts of /proc/self/mountinfo.
func mountinfo() []mount {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var mounts []mount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, fsFields := strings.Fields(pre), strings.Fields(post)
		if ok && len(fields) >= 5 && len(fsFields) >= 1 {
			mounts = append(mounts, mount{point: unescapeMount(fields[4]), fsType: fsFields[0]})
		}
	}
	return mounts
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			ok := true
			for _, d := range s[i+1 : i+4] {
				if d < '0' || d > '7' {
					ok = false
				}
				c = c*8 + byte(d-'0')
			}
			if ok {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeOwned removes, below dir and on its mount, every entry owned by
// uid, whatever its type (a directory with all it holds). It follows no
// link: a dir reached only through one is left, as the scan finds the
// directory it points to.
func removeOwned(dir string, uid uint32) error {
	d, err := openDir(dir)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	st, err := lstatAt(d, "")
	if err != nil {
		return err
	}
	var mounts mountBoundaries
	return removeOwnedIn(d, dir, st, uid, &mounts)
}

func removeOwnedIn(dir *os.File, path string, st *unix.Statx_t, uid uint32, mounts *mountBoundaries) error {
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		sub := filepath.Join(path, name)
		est, err := lstatAt(dir, name)
		if err != nil {
			continue // gone meanwhile
		}
		switch {
		case mounts.crossed(st, est, sub):
			// another mount: wiped as its own, if it is one to wipe
		case est.Uid == uid:
			errs = append(errs, removeAllAt(dir, name))
		case est.Mode&unix.S_IFMT == unix.S_IFDIR:
			subDir, err := openDirAt(dir, name)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			errs = append(errs, removeOwnedIn(subDir, sub, est, uid, mounts))
			subDir.Close()
		}
	}
	return errors.Join(errs...)
}
