// Package scripttest runs the real agent script (internal/agentscript) on
// this machine for tests: a stand-in for the instance metadata service, a
// stub GitHub (REST API for tokens, web side and jobs for the stub runner,
// and the runner tarball), a proxy that checks every AWS request's SigV4
// signature before passing it to the emulator, and the agent itself.
//
// The agent runs in one of two ways. StartAgent runs "agent run" as the
// current user in temporary directories, against a metadata service on a
// host port: quick, and enough for the protocol. Env.StartInstance runs the
// rendered user data as EC2 does, in an instance stand-in (Instance): as
// root, with bash and no argument, so that it creates its runner user,
// installs itself and starts its systemd unit through a minimal systemctl;
// in network, PID and mount namespaces of its own (netns.go), where the
// metadata service answers at 169.254.169.254 and fd00:ec2::254 and the
// stub GitHub and the SigV4 proxy at their host URLs. It needs root, and
// fails a test without it. The stub runner's run.sh runs the jobs a test
// queues (GitHub.QueueJob) as the runner user, so a test sees what a
// workflow's job would. An instance stand-in stops and starts as EC2's
// instances do (power.go): the agent's StopInstances powers it off, keeping
// its disk, and StartInstances on the emulator boots it again.
package scripttest
