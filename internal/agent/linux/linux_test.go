package linux

import (
	"archive/tar"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// archive writes a .tar.gz of entries and returns its path.
func archive(t *testing.T, entries ...*tar.Header) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "runner.tar.gz")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for _, h := range entries {
		body := "content of " + h.Name
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// An archive unpacks with no write bit but the owner's and no set-id bit,
// and one with an entry outside the installation, or a device, does not.
func TestUnpack(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "v")
	err := unpack(archive(t,
		&tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o777},
		&tar.Header{Name: "bin/Runner.Listener", Typeflag: tar.TypeReg, Mode: 0o4777},
		&tar.Header{Name: "config.sh", Typeflag: tar.TypeReg, Mode: 0o755},
		&tar.Header{Name: "run", Typeflag: tar.TypeSymlink, Linkname: "config.sh"},
	), dir)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{"bin": os.ModeDir | 0o755, "bin/Runner.Listener": 0o755, "config.sh": 0o755} {
		if info, err := os.Lstat(filepath.Join(dir, path)); err != nil || info.Mode() != want {
			t.Errorf("%s: %v, %v; want mode %v", path, info.Mode(), err, want)
		}
	}
	for name, h := range map[string]*tar.Header{
		"parent":   {Name: "../escaped", Typeflag: tar.TypeReg, Mode: 0o644},
		"absolute": {Name: "/etc/escaped", Typeflag: tar.TypeReg, Mode: 0o644},
		"device":   {Name: "dev", Typeflag: tar.TypeChar, Mode: 0o644},
	} {
		if err := unpack(archive(t, h), filepath.Join(t.TempDir(), "v")); err == nil {
			t.Errorf("%s entry %q unpacked", name, h.Name)
		}
	}
}

// The manifest finds a changed file, an added one, a removed one and one
// others may write.
func TestManifestVerify(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the installation's check wants root's files: run as root (CI does)")
	}
	fresh := func() (string, manifest) {
		dir := filepath.Join(t.TempDir(), "v")
		if err := unpack(archive(t,
			&tar.Header{Name: "config.sh", Typeflag: tar.TypeReg, Mode: 0o755},
			&tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755},
			&tar.Header{Name: "bin/lib.so", Typeflag: tar.TypeReg, Mode: 0o644},
		), dir); err != nil {
			t.Fatal(err)
		}
		m, err := manifestOf(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.verify(dir); err != nil {
			t.Fatalf("a fresh installation: %v", err)
		}
		return dir, m
	}
	for name, change := range map[string]func(dir string) error{
		"changed":  func(dir string) error { return os.WriteFile(filepath.Join(dir, "config.sh"), []byte("pwned"), 0o755) },
		"added":    func(dir string) error { return os.WriteFile(filepath.Join(dir, "bin", "extra"), nil, 0o644) },
		"removed":  func(dir string) error { return os.Remove(filepath.Join(dir, "bin", "lib.so")) },
		"writable": func(dir string) error { return os.Chmod(filepath.Join(dir, "bin"), 0o777) },
		"owned":    func(dir string) error { return os.Chown(filepath.Join(dir, "config.sh"), 1000, 1000) },
	} {
		dir, m := fresh()
		if err := change(dir); err != nil {
			t.Fatal(err)
		}
		if err := m.verify(dir); err == nil || !strings.Contains(err.Error(), "differs from what was installed") {
			t.Errorf("%s: verify = %v", name, err)
		}
	}
}

// IPC objects are found by their owner or their creator: a job can hand an
// object it created to root.
func TestIPCObjectsOf(t *testing.T) {
	table := filepath.Join(t.TempDir(), "shm")
	content := `       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap
1162031698          3   666                  4096   120   120      0     0     0  1002  1002          0          0 1764222000                     0                     0
         0          4   600                  4096   121   121      0  1002  1002  1002  1002          0          0 1764222000                     0                     0
         0          5   600                  4096   122   122      0     0     0     0     0          0          0 1764222000                     0                     0
`
	if err := os.WriteFile(table, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	ids, err := ipcObjectsOf(table, "shmid", 1002)
	if err != nil || len(ids) != 2 || ids[0] != 3 || ids[1] != 4 {
		t.Errorf("objects of uid 1002: %v, %v; want [3 4] (3 handed to root)", ids, err)
	}
}

func TestUnescapeMount(t *testing.T) {
	if got := unescapeMount(`/mnt/with\040space`); got != "/mnt/with space" {
		t.Errorf("got %q", got)
	}
}

// The cgroup2 mount found is the one its path reaches: not one a later
// mount hides, and one moved before the root mount all the same.
func TestVisibleCgroup2Mount(t *testing.T) {
	const hybridHost = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/root rw
23 22 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw
31 23 0:28 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,nosuid,nodev,noexec,relatime shared:10 - cgroup cgroup rw,cpu
41 31 0:38 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:11 - cgroup2 cgroup2 rw
`
	for name, c := range map[string]struct{ mountinfo, want string }{
		"hybrid host": {hybridHost, "/sys/fs/cgroup/unified"},
		// The instance stand-in's: cgroup2 of its own over the host's
		// /sys/fs/cgroup, which hides the host's at unified, listed first.
		"cgroup2 over the hybrid tree": {hybridHost + `400 31 0:38 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw
`, "/sys/fs/cgroup"},
		"the hybrid tree covered": {hybridHost + `400 31 0:60 / /sys/fs/cgroup ro,relatime - tmpfs tmpfs ro
`, ""},
		"unified covered by a mount above it": {hybridHost + `400 23 0:60 / /sys/fs ro,relatime - tmpfs tmpfs ro
`, ""},
		// An initramfs's /sys, moved to the root it switched to: listed
		// before the root mount, and reached all the same.
		"moved before the root": {`20 28 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw
25 20 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
28 1 259:1 / / rw,noatime shared:1 - xfs /dev/nvme0n1p1 rw
`, "/sys/fs/cgroup"},
		"none": {`1 1 0:1 / / rw - rootfs rootfs rw
`, ""},
	} {
		got, err := visibleCgroup2Mount(strings.NewReader(c.mountinfo))
		if got != c.want || (err == nil) != (c.want != "") {
			t.Errorf("%s: %q, %v; want %q", name, got, err, c.want)
		}
	}
}
