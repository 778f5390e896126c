#!/bin/bash
# PID 1 of the instance stand-in (scripttest.Instance) in the instance's own
# PID, mount, cgroup and network namespaces, at every boot; ROOT, the
# instance's directory, is set by the harness. It boots as systemd and cloud-init
# would: it starts the units enabled for multi-user.target, runs the user
# data as root with bash and no argument at the instance's first boot only,
# then stays up as init does until the harness ends the namespace. While it
# waits for a child, bash reaps every child that ends, reparented orphans
# included, as init must.
set -u
# A private /tmp, /dev/shm and /run/lock (world-writable tmpfs, as on
# Ubuntu): what the instance leaves there goes with it.
for dir in /tmp /dev/shm /run/lock; do
	[ -d "$dir" ] && mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$dir"
done
# The image's overlay (InstanceConfig.Overlay, set by the harness like
# ROOT): a world-writable directory as an overlay without xino, a tmpfs
# below the instance's disk, so that its files report their layer's st_dev;
# the layers then go out of sight under an empty tmpfs, as a live image's
# are.
if [ -n "$OVERLAY" ]; then
	layers=$ROOT/var/lib/overlay
	mkdir -p "$layers/lower" "$layers/upper" "$layers/work"
	chmod 1777 "$layers/upper"
	mount -t tmpfs -o mode=0755 lower "$layers/lower"
	mount -t overlay -o "lowerdir=$layers/lower,upperdir=$layers/upper,workdir=$layers/work,xino=off" overlay "$OVERLAY"
	mount -t tmpfs -o mode=0700 hidden "$layers"
fi
# The cgroup2 hierarchy where current images mount it, as the instance's
# cgroup namespace sees it: its own cgroup is the root, as a machine's is.
mount -t cgroup2 cgroup2 /sys/fs/cgroup
cd / || exit 1
# /run is a tmpfs on an instance: no unit's main pid outlives a boot.
rm -f "$ROOT"/run/*.pid
for unit in "$ROOT"/etc/systemd/system/multi-user.target.wants/*; do
	[ -e "$unit" ] && systemctl start "${unit##*/}"
done
# cloud-init runs the user data once per instance.
done_marker=$ROOT/var/lib/cloud/user-data.done
if [ ! -e "$done_marker" ]; then
	echo "instance stand-in: running the user data"
	bash "$ROOT/var/lib/cloud/user-data" </dev/null
	status=$?
	touch "$done_marker"
	echo "user-data exited $status" >"$ROOT/run/events"
fi
while :; do
	sleep 3600 &
	wait $!
done
