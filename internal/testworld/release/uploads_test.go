package release

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/template"

	"gopkg.in/yaml.v3"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agentscript"
)

// repositoryRoot is where goreleaser ran, relative to this package's
// directory: release.extra_files name files there.
const repositoryRoot = "../../.."

// checkReleaseUploads: what a release uploads beside goreleaser's own
// artifacts, release.extra_files, is what the snapshot holds, and no more:
// the agent's binaries and the broker's zips, each with its SHA256SUMS and
// that file's signature, and the renamed manifest.
// A snapshot publishes nothing, so tools/release-snapshot.sh copies them
// into dist/; the files release.extra_files names in the repository must
// be those copies. goreleaser writes its effective configuration to
// dist/config.yaml.
func checkReleaseUploads(t *testing.T, s *snapshot) {
	t.Helper()
	data, err := os.ReadFile(s.path("config.yaml"))
	if err != nil {
		if os.Getenv(DistEnv) != "" {
			t.Logf("not checking release.extra_files: %v", err)
			return
		}
		t.Fatalf("goreleaser's effective configuration: %v", err)
	}
	var config struct {
		Release struct {
			ExtraFiles []struct {
				Glob         string `yaml:"glob"`
				NameTemplate string `yaml:"name_template"`
			} `yaml:"extra_files"`
		} `yaml:"release"`
	}
	if err := yaml.Unmarshal(data, &config); err != nil {
		t.Fatalf("dist/config.yaml: %v", err)
	}
	apply := func(text string) string {
		t.Helper()
		tmpl, err := template.New("").Option("missingkey=error").Parse(text)
		var b strings.Builder
		if err == nil {
			err = tmpl.Execute(&b, map[string]string{"ProjectName": projectName, "Version": s.version})
		}
		if err != nil {
			t.Fatalf("release.extra_files: %q: %v (the test knows {{ .ProjectName }} and {{ .Version }} only)", text, err)
		}
		return b.String()
	}
	uploads := map[string]string{} // name to file in the repository
	for _, extra := range config.Release.ExtraFiles {
		files, err := filepath.Glob(filepath.Join(repositoryRoot, apply(extra.Glob)))
		if err != nil {
			t.Fatalf("release.extra_files: %q: %v", extra.Glob, err)
		}
		for _, file := range files {
			name := filepath.Base(file)
			if extra.NameTemplate != "" {
				name = apply(extra.NameTemplate)
			}
			uploads[name] = file
		}
	}
	want := []string{
		projectName + "_" + s.version + "_manifest.json",
		agentSumsFile(s.version), agentSumsFile(s.version) + ".sig",
		brokerSumsFile(s.version), brokerSumsFile(s.version) + ".sig",
	}
	for _, arch := range agentscript.Architectures {
		want = append(want, agentscript.AssetName(s.version, arch))
	}
	for _, arch := range brokerArchitectures {
		want = append(want, brokerZip(s.version, arch))
	}
	slices.Sort(want)
	if got := slices.Sorted(maps.Keys(uploads)); !slices.Equal(got, want) {
		t.Errorf("release.extra_files uploads %v, want %v", got, want)
	}
	for _, name := range want {
		if file, ok := uploads[name]; ok && fileSHA256(t, file) != fileSHA256(t, s.path(name)) {
			t.Errorf("release.extra_files uploads %s as %s, which differs from the snapshot's", file, name)
		}
	}
}
