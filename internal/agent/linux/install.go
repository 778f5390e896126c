package linux

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/retry"
)

// manifest is what an installation holds, to check it against before every
// registration: each path (relative, slash-separated) with its mode, and a
// file's digest or a link's target.
type manifest map[string]entry

type entry struct {
	Mode   fs.FileMode `json:"mode"`
	SHA256 string      `json:"sha256,omitempty"`
	Link   string      `json:"link,omitempty"`
}

// install downloads the archive, checks its digest, unpacks it root's and
// written by no one else into RunnerDir/<version>, and records its
// manifest.
func (r *Runner) install(ctx context.Context, a agent.Archive) error {
	archive := filepath.Join(r.cfg.Paths.StateDir, "runner-"+a.Version+".tar.gz")
	defer os.Remove(archive)
	digest, err := download(ctx, a.URL, archive)
	if err != nil {
		return fmt.Errorf("downloading %s: %w", a.URL, err)
	}
	if a.SHA256 != "" && !strings.EqualFold(digest, a.SHA256) {
		return fmt.Errorf("the runner archive %s has the SHA-256 %s, not %s: not installed", a.URL, digest, a.SHA256)
	}
	if a.SHA256 == "" {
		r.logf("warning: runner %s installed without checking its digest (runner_sha256 unset)", a.Version)
	}
	// Every directory above the installation stays open to the runner user.
	if err := mkdirAll(r.cfg.Paths.RunnerDir, 0o755); err != nil {
		return err
	}
	dir := filepath.Join(r.cfg.Paths.RunnerDir, a.Version)
	staging := dir + ".new"
	if err := os.RemoveAll(staging); err != nil {
		return err
	}
	if err := unpack(archive, staging); err != nil {
		os.RemoveAll(staging)
		return fmt.Errorf("unpacking %s: %w", a.URL, err)
	}
	if deps := filepath.Join(staging, "bin", "installdependencies.sh"); exists(deps) {
		cmd := exec.CommandContext(ctx, deps)
		cmd.Dir, cmd.Env = staging, rootEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			r.logf("the runner's installdependencies.sh failed (continuing): %v: %s", err, tail(out))
		}
	}
	m, err := manifestOf(staging)
	if err != nil {
		return err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := writeAtomic(r.manifestFile(a.Version), b); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(staging, dir)
}

// download fetches url into path, retrying, and returns its SHA-256.
func download(ctx context.Context, url, path string) (string, error) {
	// Waits of 2, 4, 8 and 8 s ride out a brief outage of the release host.
	policy := retry.Policy{Backoff: retry.Backoff{First: 2 * time.Second, Max: 8 * time.Second}, Attempts: 5}
	var digest string
	err := retry.Do(ctx, policy, func() (err error) {
		digest, err = downloadOnce(ctx, url, path)
		return err
	})
	return digest, err
}

func downloadOnce(ctx context.Context, url, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("User-Agent", "ec2runners-agent")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(f, h), resp.Body); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// unpack unpacks a .tar.gz into dir: directories 0755, files with their
// modes less any write bit but the owner's and any set-id bit, links as
// they are; an entry that would land outside dir fails it.
func unpack(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(h.Name)
		if name == "." {
			continue
		}
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("entry %q lies outside the installation", h.Name)
		}
		path := filepath.Join(dir, name)
		if err := mkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := mkdirAll(path, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			mode := fs.FileMode(h.Mode).Perm() &^ 0o022
			out, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if err == nil {
				err = out.Chmod(mode)
			}
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, path); err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q: type %c is not in a runner installation", h.Name, h.Typeflag)
		}
	}
}

// manifestOf records every entry below dir.
func manifestOf(dir string) (manifest, error) {
	m := manifest{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := entry{Mode: info.Mode()}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			if e.Link, err = os.Readlink(path); err != nil {
				return err
			}
		case d.Type().IsRegular():
			if e.SHA256, err = fileDigest(path); err != nil {
				return err
			}
		}
		m[filepath.ToSlash(rel)] = e
		return nil
	})
	return m, err
}

// verify fails unless dir holds exactly what m records, every entry root's
// and writable by root only.
func (m manifest) verify(dir string) error {
	found, err := manifestOf(dir)
	if err != nil {
		return err
	}
	var problems []string
	for path, want := range m {
		if got, ok := found[path]; !ok || got != want {
			problems = append(problems, path)
		}
	}
	for path := range found {
		if _, ok := m[path]; !ok {
			problems = append(problems, path+" (added)")
		}
	}
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		var st syscall.Stat_t
		if syscall.Lstat(path, &st) == nil && d.Type()&fs.ModeSymlink == 0 && (st.Uid != 0 || st.Mode&0o022 != 0) {
			problems = append(problems, path+" (not root's alone)")
		}
		return nil
	})
	if len(problems) > 0 {
		slices.Sort(problems)
		return fmt.Errorf("the runner installation differs from what was installed: %s", strings.Join(problems[:min(len(problems), 10)], ", "))
	}
	return nil
}

func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeAtomic replaces path with data (root's alone): readers see the old
// content or the new, never part of it.
func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
