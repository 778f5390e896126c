package linux

import (
	"crypto/rand"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The runner user of these tests: a user id of no one's on the machine,
// whose processes the tests start themselves.
const (
	testUID = 61234
	testGID = 61234
)

// racerEnv makes the test binary the racer (race): the directory it
// watches, the victim file and the victim directory, colon-separated.
const racerEnv = "EC2RUNNERS_TEST_RACER"

// race is what a job that outlived its run could do while root builds in a
// directory it can write, until killed: swap every entry it can rename for
// a symbolic link to a victim of root's outside (a directory for a
// directory, a file for anything else), as fast as it can, and look into
// what it cannot rename.
func race(watch, victimFile, victimDir string) {
	for {
		swapEntries(watch, victimFile, victimDir, 4)
	}
}

func swapEntries(dir, victimFile, victimDir string, depth int) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if strings.HasPrefix(e.Name(), "moved-") || e.Type()&fs.ModeSymlink != 0 {
			continue
		}
		victim := victimFile
		if e.IsDir() {
			victim = victimDir
		}
		if os.Rename(path, filepath.Join(dir, "moved-"+rand.Text())) == nil {
			if os.Symlink(victim, path) == nil {
				_, _ = os.Stdout.WriteString("s") // one swap, for the test to count
			}
		} else if e.IsDir() && depth > 0 {
			swapEntries(path, victimFile, victimDir, depth-1)
		}
	}
}

// racedDir is a directory for a race: the runner user's home in it, the
// victims of root's beside it, and a racer running as the runner user that
// swaps what appears in the home for links to the victims. check, once the
// builds are done, stops the racer and fails the test if root changed a
// victim or wrote anything into the victim directory.
type racedDir struct {
	base, home            string
	victimFile, victimDir string
}

const victimContent = "root's, untouched"

func newRacedDir(t *testing.T) *racedDir {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the race needs root, as the agent runs: run as root (CI does)")
	}
	base := t.TempDir()
	// The racer, as the runner user, must reach the home and run a copy of
	// this binary.
	for _, dir := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := &racedDir{base: base, home: filepath.Join(base, "home"),
		victimFile: filepath.Join(base, "victim-file"), victimDir: filepath.Join(base, "victim-dir")}
	if err := os.WriteFile(r.victimFile, []byte(victimContent), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(r.victimDir, 0o700); err != nil {
		t.Fatal(err)
	}
	mustMkdirOwned(t, r.home, 0o700)
	return r
}

func mustMkdirOwned(t *testing.T, dir string, perm fs.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, testUID, testGID); err != nil {
		t.Fatal(err)
	}
}

// startRacer starts the racer as the runner user on the home, and returns
// its end: stop kills it, waits for it and fails the test unless it
// swapped something (a race that never happened shows nothing).
func (r *racedDir) startRacer(t *testing.T) (stop func()) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	racer := filepath.Join(r.base, "racer")
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(racer, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(racer)
	cmd.Env = []string{racerEnv + "=" + r.home + ":" + r.victimFile + ":" + r.victimDir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: testUID, Gid: testGID}}
	var swaps strings.Builder
	cmd.Stdout = &swaps
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kill := sync.OnceFunc(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	t.Cleanup(kill)
	return func() {
		t.Helper()
		kill()
		if swaps.Len() == 0 {
			t.Error("the racer swapped nothing")
		}
		t.Logf("the racer swapped %d entries for links", swaps.Len())
	}
}

// checkVictims fails the test if a victim is not as it was: owner, mode,
// content, and the victim directory empty.
func (r *racedDir) checkVictims(t *testing.T) {
	t.Helper()
	for path, mode := range map[string]fs.FileMode{r.victimFile: 0o600, r.victimDir: fs.ModeDir | 0o700} {
		info, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st := info.Sys().(*syscall.Stat_t); st.Uid != 0 || st.Gid != 0 || info.Mode() != mode {
			t.Errorf("root changed the victim %s: owner %d:%d, mode %v; want root's, %v", path, st.Uid, st.Gid, info.Mode(), mode)
		}
	}
	if b, err := os.ReadFile(r.victimFile); err != nil || string(b) != victimContent {
		t.Errorf("root wrote into the victim file: %q, %v", b, err)
	}
	if entries, err := os.ReadDir(r.victimDir); err != nil || len(entries) > 0 {
		t.Errorf("root wrote into the victim directory: %v, %v", entries, err)
	}
}

// testInstallation is a runner installation, root's, with a directory
// tree, a link and a registration beside it.
func testInstallation(t *testing.T, base string) (install, regDir string) {
	t.Helper()
	install, regDir = filepath.Join(base, "install"), filepath.Join(base, "registration")
	for _, dir := range []string{"bin/lib/deeper", "externals/node/bin"} {
		if err := os.MkdirAll(filepath.Join(install, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, file := range []string{"config.sh", "run.sh", "bin/Runner.Listener", "bin/lib/a.so", "bin/lib/deeper/b.so", "externals/node/bin/node"} {
		if err := os.WriteFile(filepath.Join(install, file), []byte("content of "+file), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("bin/Runner.Listener", filepath.Join(install, "listener")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(regDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{".runner", ".credentials", ".credentials_rsaparams"} {
		if err := os.WriteFile(filepath.Join(regDir, file), []byte("registration "+file), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return install, regDir
}

func testAccount(home string) account {
	return account{name: "racer", uid: testUID, gid: testGID, home: home}
}

// races is how many builds each race test runs against the racer.
const races = 200

// A job's process left running while root builds the run's runner
// directory in its home swaps each entry root makes for a link to a file
// or directory of root's: root changes none of them and writes nothing
// outside the home.
func TestPrepareRunDir_raceGetsNothingOutside(t *testing.T) {
	r := newRacedDir(t)
	install, regDir := testInstallation(t, r.base)
	stop := r.startRacer(t)
	failed := 0
	for range races {
		if _, err := prepareRunDir(install, regDir, testAccount(r.home)); err != nil {
			if failed == 0 {
				t.Logf("the first failure: %v", err)
			}
			failed++ // the racer may spoil a build; it must not reach outside
		}
	}
	stop()
	t.Logf("%d of %d builds failed in the race", failed, races)
	r.checkVictims(t)
}

// The same racer while root makes the runner user's home again from skel.
func TestResetHome_raceGetsNothingOutside(t *testing.T) {
	r := newRacedDir(t)
	skel := filepath.Join(r.base, "skel")
	for _, dir := range []string{".config/app", ".local/share"} {
		if err := os.MkdirAll(filepath.Join(skel, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, file := range []string{".bashrc", ".profile", ".config/app/settings", ".local/share/data"} {
		if err := os.WriteFile(filepath.Join(skel, file), []byte("skel's "+file), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stop := r.startRacer(t)
	failed := 0
	for range races {
		if err := resetHome(testAccount(r.home), skel); err != nil {
			if failed == 0 {
				t.Logf("the first failure: %v", err)
			}
			failed++
		}
		time.Sleep(time.Millisecond) // the racer's turn to spoil what root made
	}
	stop()
	t.Logf("%d of %d resets failed in the race", failed, races)
	r.checkVictims(t)
}

// Without a racer, the run's runner directory is the runner user's, with
// the installation's files root's and the registration's its own.
func TestPrepareRunDir_layout(t *testing.T) {
	base := t.TempDir()
	install, regDir := testInstallation(t, base)
	home := filepath.Join(base, "home")
	mustMkdirOwned(t, home, 0o700)
	if err := os.Mkdir(filepath.Join(home, "runner"), 0o755); err != nil { // the last run's
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "runner", "left"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	runDir, err := prepareRunDir(install, regDir, testAccount(home))
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]struct {
		uid  uint32
		mode fs.FileMode
	}{
		".":                   {testUID, fs.ModeDir | 0o755},
		"bin":                 {testUID, fs.ModeDir | 0o755},
		"bin/lib/deeper":      {testUID, fs.ModeDir | 0o755},
		"bin/lib/deeper/b.so": {0, 0o755},
		"run.sh":              {0, 0o755},
		"listener":            {testUID, fs.ModeSymlink | 0o777},
		".runner":             {testUID, 0o600},
		".credentials":        {testUID, 0o600},
	} {
		info, err := os.Lstat(filepath.Join(runDir, rel))
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		if st := info.Sys().(*syscall.Stat_t); st.Uid != want.uid || info.Mode() != want.mode {
			t.Errorf("%s: owner %d, mode %v; want %d, %v", rel, st.Uid, info.Mode(), want.uid, want.mode)
		}
	}
	if link, err := os.Readlink(filepath.Join(runDir, "listener")); err != nil || link != "bin/Runner.Listener" {
		t.Errorf("listener links to %q (%v)", link, err)
	}
	entries, _ := os.ReadDir(home)
	if len(entries) != 1 || entries[0].Name() != "runner" {
		t.Errorf("the home holds %v; want the runner directory alone (no stage, nothing of the last run's)", entries)
	}
	if _, err := os.Lstat(filepath.Join(runDir, "left")); err == nil {
		t.Error("the last run's file is in the new runner directory")
	}
}

// mountTmpfs mounts a tmpfs at dir until the test's end.
func mountTmpfs(t *testing.T, dir string) {
	t.Helper()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "mode=0755"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
}

// leaveFiles makes, in dir, what a job of the runner user leaves: a fifo, a
// socket, hidden, newline and dash names, a file of mode 000, a directory
// of its own with files, and a file of its own in a world-writable
// directory of root's; the names start with prefix.
func leaveFiles(t *testing.T, dir, prefix string) {
	t.Helper()
	p := func(name string) string { return filepath.Join(dir, prefix+name) }
	if err := unix.Mkfifo(p("fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	sock, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(sock, &unix.SockaddrUnix{Name: p("socket")}); err != nil {
		t.Fatal(err)
	}
	unix.Close(sock)
	for _, name := range []string{".hidden", "new\nline", "-rf", "locked"} {
		if err := os.WriteFile(p(name), []byte("left"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(p("own/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p("own/sub/file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p("shared"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p("shared/left"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fifo", "socket", ".hidden", "new\nline", "-rf", "locked", "own", "own/sub", "own/sub/file", "shared/left"} {
		if err := os.Lchown(p(name), testUID, testGID); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(p("locked"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p("roots"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// An overlay without xino whose layers are on two file systems (a job's
// files in the upper layer, the image's in the lower) reports each layer's
// st_dev for files: the runner user's files in it, in both layers, are
// removed all the same, and root's stay.
func TestRemoveOwned_overlayWithoutXino(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the overlay needs root: run as root (CI does)")
	}
	base := t.TempDir()
	lower, upper, work, merged := filepath.Join(base, "lower"), filepath.Join(base, "upper"), filepath.Join(base, "work"), filepath.Join(base, "merged")
	for _, dir := range []string{lower, upper, work, merged} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mountTmpfs(t, lower) // the upper layer is on the test's disk
	leaveFiles(t, lower, "image-")
	if err := unix.Mount("overlay", merged, "overlay", 0, "lowerdir="+lower+",upperdir="+upper+",workdir="+work+",xino=off"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(merged, unix.MNT_DETACH) })
	leaveFiles(t, merged, "job-")
	var dir, file unix.Stat_t
	if unix.Stat(merged, &dir) != nil || unix.Lstat(filepath.Join(merged, "job--rf"), &file) != nil || dir.Dev == file.Dev {
		t.Fatalf("the overlay reports its own st_dev (%d) for a file (%d): not the case under test", dir.Dev, file.Dev)
	}
	if err := removeOwned(merged, testUID); err != nil {
		t.Fatal(err)
	}
	var left []string
	_ = filepath.WalkDir(merged, func(path string, d fs.DirEntry, err error) error {
		if path != merged {
			left = append(left, strings.TrimPrefix(path, merged+"/"))
		}
		return nil
	})
	want := []string{"image-roots", "image-shared", "job-roots", "job-shared"}
	if strings.Join(left, "|") != strings.Join(want, "|") {
		t.Errorf("left in the overlay: %q; want root's alone: %q", left, want)
	}
}

// Without mount ids from the kernel, a walk learns where it leaves its
// mount from the mount points of /proc/self/mountinfo.
func TestMountBoundaries_withoutMountIDs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("mounting needs root: run as root (CI does)")
	}
	base := t.TempDir()
	for _, dir := range []string{"mounted", "plain"} {
		if err := os.Mkdir(filepath.Join(base, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mountTmpfs(t, filepath.Join(base, "mounted"))
	d, err := openDir(base)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	stat := func(name string) *unix.Statx_t {
		st, err := lstatAt(d, name)
		if err != nil {
			t.Fatal(err)
		}
		st.Mask &^= unix.STATX_MNT_ID
		return st
	}
	var m mountBoundaries
	dir := stat("")
	if !m.crossed(dir, stat("mounted"), filepath.Join(base, "mounted")) {
		t.Error("the mount point is not another mount")
	}
	if m.crossed(dir, stat("plain"), filepath.Join(base, "plain")) {
		t.Error("a plain directory is another mount")
	}
}

// Root works by path only in trees root alone can change: a directory of
// another user on the way, one writable by others and not sticky, or a
// link on the way is refused; sticky /tmp with root's directory below it
// is not.
func TestRootsAlone(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the check reads root's directories: run as root (CI does)")
	}
	base := t.TempDir()
	mk := func(rel string, mode os.FileMode, uid int) string {
		path := filepath.Join(base, rel)
		if err := os.MkdirAll(path, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(path, uid, uid); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := mk("good/state", 0o700, 0)
	sticky := mk("sticky", 0o777|os.ModeSticky, 0)
	belowSticky := mk("sticky/root", 0o755, 0)
	owned := mk("owned", 0o755, 61234)
	belowOwned := mk("owned/state", 0o700, 0)
	writable := mk("writable", 0o777, 0)
	belowWritable := mk("writable/state", 0o700, 0)
	link := filepath.Join(base, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	for path, ok := range map[string]bool{good: true, belowSticky: true, sticky: true, belowOwned: false, owned: false, writable: false, belowWritable: false, link: false} {
		if err := rootsAlone(path); (err == nil) != ok {
			t.Errorf("rootsAlone(%s) = %v, want ok %v", path, err, ok)
		}
	}
}
