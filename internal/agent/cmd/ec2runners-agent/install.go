package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
)

// unitName is the agent's systemd service.
const unitName = "ec2runners-agent.service"

// install installs the agent's systemd service and starts it, so that
// cloud-init finishes booting, and systemd restarts the agent if it dies
// and runs it again at every boot. Delegate=yes leaves the service's
// cgroup subtree to the agent: the jobs' cgroup is made there.
func install(args []string) error {
	flags := flag.NewFlagSet("install", flag.ExitOnError)
	configPath := flags.String("config", agent.DefaultConfig, "the agent's configuration")
	systemdDir := flags.String("systemd-dir", "/etc/systemd/system", "where systemd units are installed")
	_ = flags.Parse(args)
	if err := needRoot(); err != nil {
		return err
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	unit := fmt.Sprintf(`[Unit]
Description=ec2runners agent: keeps this instance in the runner pool %s
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=%s run -config %s
Restart=always
RestartSec=5
Delegate=yes

[Install]
WantedBy=multi-user.target
`, cfg.Pool, self, *configPath)
	if err := os.WriteFile(filepath.Join(*systemdDir, unitName), []byte(unit), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{{"daemon-reload"}, {"enable", "--now", unitName}} {
		if out, err := exec.Command("systemctl", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("systemctl %v: %v: %s", args, err, out)
		}
	}
	return nil
}
