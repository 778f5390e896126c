// Package linux is the agent's Host and Runner on a Linux instance, run as
// root as EC2 runs user data: the wall between jobs and the pool, and the
// GitHub runner.
//
// Jobs are untrusted code, run as an unprivileged runner user on a machine
// the pool hands to the next run. The wall keeps them from the instance
// role (a firewall rule for the runner user in front of the instance
// metadata service), from the agent (processes hidden in /proc, the
// agent's state root's alone, no secret in any process's arguments or in
// the environment of a process the runner user can read), from the runner
// installation (root's, checked before every registration) and from the
// next run: the runner runs in a cgroup of its own and a System V IPC and
// POSIX message queue namespace of its own; at release every process of
// the runner user is killed with the cgroup, and the agent proves none is
// left before it uses a token; then it wipes the runner user's home, its
// files in every directory it can write, its IPC objects, its keyrings,
// its cron and at jobs and the containers of a Docker daemon.
//
// The runner and its jobs run in mount, cgroup and IPC namespaces of their
// own, started by the agent's start-runner command: the jobs' cgroup is
// the root of their cgroup namespace, and the cgroupfs mounted in their
// mount namespace shows that cgroup alone, so that no cgroup.procs lists a
// process /proc hides from them.
//
// The runner is registered as root, from a copy of the installation the
// runner user cannot reach, so that the registration token never reaches a
// process of the runner user, and the agent keeps its own copy of the
// registration: nothing the runner user can write decides where the
// removal token goes.
package linux
