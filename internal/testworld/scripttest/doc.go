// Package scripttest runs the real user data (internal/agentscript) and the
// real agent (internal/agent, built as a release builds it) on this machine
// for tests, as EC2 runs them: a stand-in for the instance metadata
// service, a stub GitHub (the REST API for tokens, just-in-time runners and
// the runner's releases, the release archives of the runner and of the
// agent, and the service the stub runner registers with and takes jobs
// from, enforcing GitHub's runner version policy and its routing of jobs:
// a repository's jobs reach only its own runners and its organization's
// runners in groups it may use, by any runs-on), a proxy that checks
// every AWS request's SigV4 signature before passing it to the emulator,
// and the instance stand-in (Instance).
//
// Env.StartInstance runs the rendered user data in an instance stand-in:
// as root, with bash and no argument, so that the bootstrap installs the
// agent (downloaded from the stub release, or baked into the image) and
// starts its systemd unit through a minimal systemctl; in network, PID,
// mount and cgroup namespaces of its own (netns.go), where the metadata
// service answers at 169.254.169.254 and fd00:ec2::254 and the stub GitHub
// and the SigV4 proxy at their host URLs. It needs root and cgroup v2, and
// fails a test without them. The stub runner's run.sh runs the jobs a test
// queues (GitHub.QueueJob, or GitHub.QueueJobFor a repository and a
// runs-on) as the runner user, so a test sees what a workflow's job would; the jobtool command does for hostile jobs what a
// shell script cannot. An instance stand-in stops and starts as EC2's
// instances do (power.go): the agent's StopInstances powers it off,
// keeping its disk, StartInstances on the emulator boots it again, and a
// TerminateInstances shuts it down for good.
package scripttest
