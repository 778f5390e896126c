//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package emulator

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
)

// TestLastUserStopsServer checks the hand-off between users of one server:
// only the last stop ends it, even when the first user started it.
func TestLastUserStopsServer(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL", "") // this test is about the local server, even when others use a LocalStack
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	saved := listenAddr
	listenAddr = addr
	defer func() { listenAddr = saved }()
	t.Cleanup(func() { // lock files for this one-off port
		base := filepath.Join(os.TempDir(), "ec2runners-emulator-"+strings.ReplaceAll(addr, ":", "-"))
		os.Remove(base + ".users.lock")
		os.Remove(base + ".start.lock")
	})

	// Starting moto is a process's work: it has Patience.
	ctx, cancel := context.WithTimeout(context.Background(), await.Patience)
	defer cancel()
	ep1, stop1, err := Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop1()
	ep2, stop2, err := Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop2()
	for _, ep := range []string{ep1, ep2} { // fronts of the server on addr
		resp, err := http.Get(ep + "/moto-api/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s/moto-api/: HTTP %d, want moto's answer", ep, resp.StatusCode)
		}
	}

	stop1() // the starter leaves first
	if !answers(addr) {
		t.Fatal("server stopped while a second user still holds it")
	}
	stop2()
	if answers(addr) {
		t.Fatal("server still answers after the last user stopped")
	}
}
