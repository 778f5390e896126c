package linux

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The instance metadata service, which hands out the instance role's
// credentials.
const (
	metadataIPv4 = "169.254.169.254"
	metadataIPv6 = "fd00:ec2::254"
)

// hideProcesses lets every user see only their own processes in /proc, so
// that jobs see nothing of the agent's (no secret is in a process's
// arguments either: this is a second wall).
func hideProcesses(logf func(string, ...any)) {
	for _, opt := range []string{"hidepid=invisible", "hidepid=2"} {
		if unix.Mount("proc", "/proc", "proc", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opt) == nil {
			return
		}
	}
	logf("warning: /proc cannot be remounted with hidepid; jobs can list the agent's processes")
}

// blockMetadata keeps the runner user's processes away from the instance
// metadata service: an owner-matched firewall rule each for IPv4 and IPv6,
// with iptables and ip6tables, or nftables, installed when the image has
// neither (stock Amazon Linux 2023).
func blockMetadata(ctx context.Context, uid uint32, logf func(string, ...any)) error {
	has := func(tool string) bool { _, err := exec.LookPath(tool); return err == nil }
	if !has("iptables") && !has("nft") {
		logf("installing nftables")
		for _, install := range [][]string{{"dnf", "-y", "-q", "install", "nftables"}, {"apt-get", "-y", "-qq", "install", "nftables"}} {
			if has(install[0]) && exec.CommandContext(ctx, install[0], install[1:]...).Run() == nil {
				break
			}
		}
	}
	switch {
	case has("iptables") && has("ip6tables"):
		rule := []string{"-m", "owner", "--uid-owner", strconv.FormatUint(uint64(uid), 10), "-j", "REJECT"}
		for _, r := range []struct{ tool, addr string }{{"iptables", metadataIPv4}, {"ip6tables", metadataIPv6}} {
			spec := append([]string{"OUTPUT", "-d", r.addr}, rule...)
			if exec.CommandContext(ctx, r.tool, append([]string{"-C"}, spec...)...).Run() == nil {
				continue
			}
			if out, err := exec.CommandContext(ctx, r.tool, append([]string{"-I"}, spec...)...).CombinedOutput(); err != nil {
				return fmt.Errorf("%s: %v: %s", r.tool, err, out)
			}
		}
	case has("nft"):
		if exec.CommandContext(ctx, "nft", "list", "table", "inet", "ec2runners").Run() == nil {
			break
		}
		table := fmt.Sprintf(`table inet ec2runners {
	chain output {
		type filter hook output priority filter; policy accept;
		meta skuid %[1]d ip daddr %[2]s reject
		meta skuid %[1]d ip6 daddr %[3]s reject
	}
}
`, uid, metadataIPv4, metadataIPv6)
		cmd := exec.CommandContext(ctx, "nft", "-f", "-")
		cmd.Stdin = strings.NewReader(table)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("nft: %v: %s", err, out)
		}
	default:
		return errors.New("neither iptables nor nft is installed: cannot keep jobs away from the instance metadata service")
	}
	logf("jobs are kept away from the instance metadata service")
	return nil
}
