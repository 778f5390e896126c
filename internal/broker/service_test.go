package broker

import (
	"strings"
	"testing"
)

// The broker serves the pool its environment names, and refuses to start
// without a valid one.
func TestSettingsFromEnv(t *testing.T) {
	t.Setenv("EC2RUNNERS_POOL", "builds")
	t.Setenv("EC2RUNNERS_AUDIENCE", "")
	t.Setenv("EC2RUNNERS_OIDC_ISSUER", "https://issuer.test")
	t.Setenv("GITHUB_API_URL", "")
	s, err := SettingsFromEnv("1.2.3")
	if err != nil || s != (Settings{Pool: "builds", Issuer: "https://issuer.test", Version: "1.2.3"}) {
		t.Errorf("settings %+v (%v)", s, err)
	}
	t.Setenv("EC2RUNNERS_POOL", "")
	if _, err := SettingsFromEnv("1.2.3"); err == nil || !strings.HasPrefix(err.Error(), "EC2RUNNERS_POOL: pool name") {
		t.Errorf("without a pool: %v, want EC2RUNNERS_POOL refused", err)
	}
}
