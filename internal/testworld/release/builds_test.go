package release

import (
	"archive/zip"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"io"
	"strings"
	"testing"
)

// providerBuild is the build info of the provider binary for this machine.
func providerBuild(t *testing.T, s *snapshot) *buildinfo.BuildInfo {
	t.Helper()
	info, err := buildinfo.Read(bytes.NewReader(providerBinary(t, s, hostPlatform())))
	if err != nil {
		t.Fatalf("the build info of the provider for %s: %v", hostPlatform(), err)
	}
	return info
}

// providerBinary is the binary in the archive of platform.
func providerBinary(t *testing.T, s *snapshot, platform string) []byte {
	t.Helper()
	r, err := zip.OpenReader(s.path(s.zips[platform]))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if len(r.File) != 1 {
		t.Fatalf("%s holds %d files, want the provider's binary alone", s.zips[platform], len(r.File))
	}
	return readZipFile(t, r.File[0])
}

// readZipFile is the content of a file in a zip.
func readZipFile(t *testing.T, file *zip.File) []byte {
	t.Helper()
	f, err := file.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func setting(info *buildinfo.BuildInfo, key string) string {
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// checkLinuxBinary: binary (named name in messages) is a static, stripped
// linux/arch build of the main package pkg, made with the provider's Go and
// flags, and holds the release's version. (With -trimpath the Go toolchain
// records no -ldflags: the version is looked for in the binary.)
func checkLinuxBinary(t *testing.T, s *snapshot, name string, binary []byte, pkg, arch string, provider *buildinfo.BuildInfo) {
	t.Helper()
	info, err := buildinfo.Read(bytes.NewReader(binary))
	if err != nil {
		t.Errorf("%s: no Go build info: %v", name, err)
		return
	}
	if info.Path != pkg {
		t.Errorf("%s is a build of %s, want %s", name, info.Path, pkg)
	}
	if info.GoVersion != provider.GoVersion {
		t.Errorf("%s was built with %s, the provider with %s", name, info.GoVersion, provider.GoVersion)
	}
	for key, want := range map[string]string{"GOOS": "linux", "GOARCH": arch, "CGO_ENABLED": "0", "-trimpath": "true"} {
		if got := setting(info, key); got != want {
			t.Errorf("%s: built with %s=%q, want %q", name, key, got, want)
		}
		if key == "CGO_ENABLED" || key == "-trimpath" {
			if p := setting(provider, key); p != want {
				t.Errorf("the provider was built with %s=%q, want %q as %s", key, p, want, name)
			}
		}
	}
	f, err := elf.NewFile(bytes.NewReader(binary))
	if err != nil {
		t.Errorf("%s is not an ELF binary: %v", name, err)
		return
	}
	defer f.Close()
	if want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]; f.Machine != want {
		t.Errorf("%s is for %s, want %s", name, f.Machine, want)
	}
	var unstripped []string
	for _, section := range f.Sections {
		if section.Name == ".symtab" || strings.HasPrefix(section.Name, ".debug_") || strings.HasPrefix(section.Name, ".zdebug_") {
			unstripped = append(unstripped, section.Name)
		}
	}
	if len(unstripped) > 0 {
		t.Errorf("%s has the sections %v: not built with -s -w", name, unstripped)
	}
	if !bytes.Contains(binary, []byte(s.version)) {
		t.Errorf("%s does not hold the version %s (-X main.version)", name, s.version)
	}
}
