package scripttest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// The instance's network namespace holds nothing but its loopback device,
// which carries the metadata service's addresses as EC2's link-local ones.
// The harness serves that namespace's sockets from this process: a socket
// belongs, for good, to the network namespace of the thread that created it,
// so each listener is created on a thread switched into the namespace and
// then served from ordinary goroutines. No veth, NAT or firewall rule on the
// host is needed, and parallel instances never meet.
const (
	imdsIPv4 = "169.254.169.254"
	imdsIPv6 = "fd00:ec2::254"
)

// netns is a network namespace made with iproute2, so that it is a file in
// /var/run/netns that both "ip netns exec" and setns(2) open by name.
type netns struct{ name string }

// netnsMu serializes "ip netns add": the first one mounts /var/run/netns,
// and two at once can race at that.
var netnsMu sync.Mutex

func newNetns() (*netns, error) {
	n := &netns{name: "ec2r-" + randomHex(5)}
	netnsMu.Lock()
	err := run("ip", "netns", "add", n.name)
	netnsMu.Unlock()
	if err != nil {
		return nil, err
	}
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", imdsIPv4 + "/32", "dev", "lo"},
		{"-6", "addr", "add", imdsIPv6 + "/128", "dev", "lo", "nodad"},
	} {
		if err := run("ip", append([]string{"-n", n.name}, args...)...); err != nil {
			return n, err
		}
	}
	return n, nil
}

func (n *netns) delete() error { return run("ip", "netns", "delete", n.name) }

// listen listens on addr inside the namespace.
func (n *netns) listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := n.do(func() (err error) {
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// do runs fn on a thread of its own switched into the namespace. The thread
// stays locked to its goroutine and so ends with it: no other goroutine ever
// runs in the instance's namespace. (The Go runtime starts new threads from
// a clean template thread, never from a locked one.)
func (n *netns) do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open(filepath.Join("/var/run/netns", n.name))
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("entering network namespace %s: %w", n.name, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// forwarder makes a TCP address of the host reachable at the same address
// inside the namespace: it accepts there and dials from an ordinary
// goroutine, whose thread is in the host's namespace. Its port is free
// inside, as nothing else listens in a new namespace, and the URL is the
// same on both sides (a SigV4 signature covers the Host header).
type forwarder struct {
	l     net.Listener
	addr  string
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func (n *netns) forward(addr string) (*forwarder, error) {
	l, err := n.listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	f := &forwarder{l: l, addr: addr, conns: map[net.Conn]struct{}{}}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go f.pipe(c)
		}
	}()
	return f, nil
}

func (f *forwarder) pipe(in net.Conn) {
	out, err := net.Dial("tcp", f.addr)
	if err != nil {
		in.Close()
		return
	}
	if !f.track(in, out) {
		return
	}
	defer f.untrack(in, out)
	done := make(chan struct{})
	go func() {
		copyHalf(out, in)
		close(done)
	}()
	copyHalf(in, out)
	<-done
}

// copyHalf copies one direction and passes its end on, keeping the other
// direction open: HTTP clients may close their sending side first.
func copyHalf(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

func (f *forwarder) track(conns ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil { // closed
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *forwarder) untrack(conns ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(f.conns, c)
	}
}

func (f *forwarder) Close() error {
	err := f.l.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.conns {
		c.Close()
	}
	f.conns = nil
	return err
}

// run runs a command, its output in the error when it fails.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// errNotRoot is why an instance stand-in cannot start without root.
var errNotRoot = errors.New("the instance stand-in needs root: it creates a user, a network namespace and firewall rules; run the tests as root, as CI does")
