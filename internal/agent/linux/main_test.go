package linux

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// The test binary plays two processes of the tests: the agent's executable
// for runnerCommand (StartRunnerCommand, as the agent runs it), and the
// racer of the runner user (racerEnv).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == StartRunnerCommand {
		fmt.Fprintln(os.Stderr, StartRunner(os.Args[2:]))
		os.Exit(1)
	}
	if args := os.Getenv(racerEnv); args != "" {
		watch, victims, _ := strings.Cut(args, ":")
		victimFile, victimDir, _ := strings.Cut(victims, ":")
		race(watch, victimFile, victimDir)
	}
	os.Exit(m.Run())
}
