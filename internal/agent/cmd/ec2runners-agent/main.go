// Command ec2runners-agent is the agent of one runner instance of an
// ec2runners pool (package agent). The user data ec2runners_runner_script
// renders writes its configuration, then runs "ec2runners-agent install",
// which installs the systemd service that runs "ec2runners-agent run" at
// every boot.
//
//	ec2runners-agent install [-config FILE] [-systemd-dir DIR]
//	ec2runners-agent run [-config FILE]
//	ec2runners-agent version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/agent/linux"
)

// version is the release's, set by the linker (-X main.version=...).
var version = "dev"

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "version":
		fmt.Println(version)
		return
	case "clear-keyrings":
		// As the runner user, run by the agent at every release.
		err = linux.ClearKeyrings()
	case linux.StartRunnerCommand:
		// As root, run by the agent to start the runner in its namespaces.
		err = linux.StartRunner(os.Args[2:])
	case "install":
		err = install(os.Args[2:])
	case "run":
		err = run(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		logf("%v", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: ec2runners-agent install [-config FILE] [-systemd-dir DIR] | run [-config FILE] | version")
	os.Exit(2)
}

// logf writes a line for the journal, as EC2 keeps the console's.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s ec2runners-agent: %s\n", time.Now().UTC().Format(time.RFC3339), fmt.Sprintf(format, args...))
}

func loadConfig(path string) (agent.Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return agent.Config{}, err
	}
	return agent.ParseConfig(data)
}

func needRoot() error {
	if os.Geteuid() != 0 {
		return errors.New("the agent runs as root, as EC2 runs user data")
	}
	return nil
}

// run is the agent's service: one boot of the instance.
func run(args []string) error {
	flags := flag.NewFlagSet("run", flag.ExitOnError)
	configPath := flags.String("config", agent.DefaultConfig, "the agent's configuration")
	_ = flags.Parse(args)
	if err := needRoot(); err != nil {
		return err
	}
	syscall.Umask(0o077)
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	w, err := connect(ctx, cfg)
	if err != nil {
		return err
	}
	host, runner := linux.New(cfg, self, logf)
	a := agent.New(cfg, w.identity, agent.Deps{
		Table: w.dynamoDB, EC2: w.ec2, Clock: agent.SystemClock{}, Host: host, Runner: runner, Broker: w.broker, Logf: logf,
		Releases: agent.GitHubReleases{URL: cfg.Runner.ReleasesURL, UserAgent: "ec2runners-agent/" + version},
	})
	switch a.Run(ctx) {
	case agent.EndStopped, agent.EndTerminated:
		// The instance goes down: wait for it rather than be started again.
		<-ctx.Done()
	}
	return nil
}
