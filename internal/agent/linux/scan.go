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
	"syscall"
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
// background from the first preparation, since walking a large image can
// take long; a release waits for it.
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
	var found []string
	for _, mount := range localMounts() {
		var root syscall.Stat_t
		if syscall.Stat(mount, &root) != nil {
			continue
		}
		_ = filepath.WalkDir(mount, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if slices.ContainsFunc(skip, func(s string) bool { return path == s || strings.HasPrefix(path, s+"/") }) {
				return filepath.SkipDir
			}
			var st syscall.Stat_t
			if syscall.Lstat(path, &st) != nil {
				return nil
			}
			if st.Dev != root.Dev {
				return filepath.SkipDir // another mount: walked as its own, if local
			}
			if st.Mode&0o002 != 0 || st.Uid == uid || (st.Gid == gid && st.Mode&0o020 != 0) {
				found = append(found, path)
			}
			if !searchable(st, uid, gid) {
				return filepath.SkipDir
			}
			return nil
		})
	}
	logf("directories the runner user can write: %v", found)
	return found
}

// searchable tells whether uid of group gid may search the directory st.
func searchable(st syscall.Stat_t, uid, gid uint32) bool {
	switch {
	case st.Uid == uid:
		return st.Mode&0o100 != 0
	case st.Gid == gid:
		return st.Mode&0o010 != 0
	}
	return st.Mode&0o001 != 0
}

// localMounts are the mount points of local file systems.
func localMounts() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return []string{"/"}
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, fsFields := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(fsFields) < 1 || !slices.Contains(localFilesystems, fsFields[0]) {
			continue
		}
		if strings.HasPrefix(fields[4], "/proc") || strings.HasPrefix(fields[4], "/sys") {
			continue
		}
		mounts = append(mounts, unescapeMount(fields[4]))
	}
	slices.Sort(mounts)
	return slices.Compact(mounts)
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

// removeOwned removes, below dir and on its file system, every file and
// directory owned by uid (a directory with all it holds).
func removeOwned(dir string, uid uint32) error {
	var root syscall.Stat_t
	if err := syscall.Lstat(dir, &root); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	var errs []error
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return nil
		}
		var st syscall.Stat_t
		if syscall.Lstat(path, &st) != nil {
			return nil // gone meanwhile
		}
		if st.Dev != root.Dev {
			return skipIfDir(d) // another file system: wiped as its own, if it is one to wipe
		}
		if st.Uid == uid {
			if err := os.RemoveAll(path); err != nil {
				errs = append(errs, err)
			}
			if d.IsDir() {
				return filepath.SkipDir
			}
		}
		return nil
	})
	return errors.Join(errs...)
}

// skipIfDir skips d's tree when it is a directory (SkipDir on a file would
// skip the rest of its directory).
func skipIfDir(d fs.DirEntry) error {
	if d.IsDir() {
		return filepath.SkipDir
	}
	return nil
}
