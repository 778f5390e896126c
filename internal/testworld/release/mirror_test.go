package release

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// newMirror is a filesystem mirror of the release build in the packed
// layout: <hostname>/<namespace>/<type>/<archive>.zip.
func newMirror(t *testing.T, s *snapshot) string {
	t.Helper()
	mirror := t.TempDir()
	pkgDir := filepath.Join(mirror, filepath.FromSlash(providerAddress))
	mkdir(t, pkgDir)
	for _, name := range s.zips {
		src, err := filepath.Abs(s.path(name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(src, filepath.Join(pkgDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return mirror
}

// mirrorConfig installs this provider from the mirror alone.
func mirrorConfig(mirror string) string {
	return fmt.Sprintf(`provider_installation {
  filesystem_mirror {
    path    = %q
    include = [%q]
  }
}
`, filepath.ToSlash(mirror), providerAddress)
}
