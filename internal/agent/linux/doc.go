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
//
// # Root where the runner user can write
//
// A process of the runner user may outlive its run, and swap an entry for
// a symbolic link between two of root's calls. Each of root's calls inside
// a directory the runner user can write, and its guard (fsat.go):
//
//   - prepareRunDir, the run's runner directory in the home: built in a
//     staging directory mkdirat makes in the home, root's 0700, filled
//     through descriptors (mkdirat + openat O_NOFOLLOW, linkat, openat
//     O_CREAT|O_EXCL|O_NOFOLLOW, symlinkat + fchownat AT_SYMLINK_NOFOLLOW);
//     the last run's runner removed with removeAllAt; renameat in the
//     home's descriptor; handed over last, fchown and fchmod on the stage's
//     descriptor.
//   - resetHome, the home: removed with removeAllAt through its parent's
//     descriptor (the parent is root's), made again with mkdirat, filled
//     from /etc/skel through descriptors while root's 0700, handed over
//     last with fchown and fchmod on its descriptor.
//   - removeOwned, the wipe of every directory the runner user can write:
//     each opened one name at a time with O_NOFOLLOW, entries read with
//     statx AT_SYMLINK_NOFOLLOW, removed with removeAllAt (unlinkat, never
//     following a link), subdirectories entered with openat O_NOFOLLOW;
//     mounts told apart by mount id, never st_dev.
//   - scanWritable, the search for those directories (it only reads): the
//     same descriptor walk.
//   - ensureAccount, chmod of the home by path: its entry is in the home's
//     parent, root's, where the runner user can replace nothing.
//   - Runner.Restart, the run's runner started again during the run: only
//     after endJobs (the jobs' cgroup killed, no process of the runner user
//     left), then through prepareRunDir as above.
//
// Everything else root does by path is in trees root alone can change (its
// state directory and the runner installations, checked by rootsAlone at
// every boot: each directory on the way root's, no link, and writable by
// root alone or sticky; /etc/skel, which it only reads). The run's run.sh
// is executed only once start-runner has become the runner user: root
// never opens it.
//
// # Nothing decided from what a job can write
//
// The runner's output is the jobs' to forge (a job can write to its
// runner's output, or replace its runner): it is logged quoted, a line of at
// most 1 KiB at a time, and decides nothing. Whether the runner runs is
// what the kernel says of its process; which release it runs is what
// GitHub publishes (agent.Releases, and the pool's runner release item).
package linux
