package release

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// registry plays the Terraform Registry for this provider, over HTTPS, with
// the provider registry protocol
// (https://developer.hashicorp.com/terraform/internals/provider-registry-protocol):
// the versions, then for a platform the archive's URL and SHA-256, the
// SHA256SUMS and signature URLs, and the public signing key, all from the
// release build. terraform then downloads the archive, verifies the
// signature with the key and the archive against SHA256SUMS, as it does with
// registry.terraform.io, and records every platform's zh: hash from
// SHA256SUMS in the lock file. A `host` block in the CLI configuration sends
// terraform here for registry.terraform.io; SSL_CERT_FILE makes it trust the
// server's certificate.
type registry struct {
	srv      *httptest.Server
	certFile string
	keyID    string
}

func newRegistry(t *testing.T, s *snapshot) *registry {
	t.Helper()
	armored, err := os.ReadFile(s.path(signingKeyFile))
	if err != nil {
		t.Fatalf("the signing key's public half: %v", err)
	}
	r := &registry{keyID: keyID(t, s.path(signingKeyFile))}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/providers/ec2runners/ec2runners/versions", func(w http.ResponseWriter, _ *http.Request) {
		var platforms []map[string]string
		for _, p := range s.platforms() {
			goos, goarch, _ := strings.Cut(p, "_")
			platforms = append(platforms, map[string]string{"os": goos, "arch": goarch})
		}
		writeJSON(w, map[string]any{"versions": []any{map[string]any{
			"version": s.version, "protocols": []string{"6.0"}, "platforms": platforms,
		}}})
	})
	mux.HandleFunc("GET /v1/providers/ec2runners/ec2runners/{version}/download/{os}/{arch}", func(w http.ResponseWriter, req *http.Request) {
		platform := req.PathValue("os") + "_" + req.PathValue("arch")
		name, ok := s.zips[platform]
		if req.PathValue("version") != s.version || !ok {
			http.NotFound(w, req)
			return
		}
		files := r.srv.URL + "/files/"
		writeJSON(w, map[string]any{
			"protocols":             []string{"6.0"},
			"os":                    req.PathValue("os"),
			"arch":                  req.PathValue("arch"),
			"filename":              name,
			"download_url":          files + name,
			"shasums_url":           files + s.sumsFile(),
			"shasums_signature_url": files + s.sumsFile() + ".sig",
			"shasum":                s.sums[name],
			"signing_keys": map[string]any{"gpg_public_keys": []any{map[string]any{
				"key_id": r.keyID, "ascii_armor": string(armored),
			}}},
		})
	})
	mux.Handle("GET /files/", http.StripPrefix("/files/", http.FileServer(http.Dir(s.dir))))
	r.srv = httptest.NewTLSServer(mux)
	t.Cleanup(r.srv.Close)

	r.certFile = filepath.Join(t.TempDir(), "registry.pem")
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})
	if err := os.WriteFile(r.certFile, cert, 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

// cliConfig sends terraform to this registry for registry.terraform.io and
// installs this provider from it alone.
func (r *registry) cliConfig() string {
	return fmt.Sprintf(`host "registry.terraform.io" {
  services = {
    "providers.v1" = "%s/v1/providers/"
  }
}

provider_installation {
  direct {
    include = [%q]
  }
}
`, r.srv.URL, providerAddress)
}

// keyID is the long id of the (only) key in an armored public key file.
func keyID(t *testing.T, file string) string {
	t.Helper()
	home := gpgHome(t)
	out, err := exec.Command("gpg", "--homedir", home, "--batch", "--no-tty", "--with-colons", "--import-options", "show-only", "--import", file).Output()
	if err != nil {
		t.Fatalf("reading the signing key with gpg: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Split(line, ":"); f[0] == "pub" && len(f) > 4 {
			return f[4]
		}
	}
	t.Fatalf("no public key in %s:\n%s", file, out)
	return ""
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
