#!/bin/bash
# PID 1 of the instance stand-in (scripttest.Instance) in the instance's own
# PID, mount and network namespaces; ROOT, the instance's directory, is set
# by the harness. It boots as cloud-init would, running the user data as
# root with bash and no argument, then stays up as init does until the
# harness ends the namespace. While it waits for a child, bash reaps every
# child that ends, reparented orphans included, as init must.
set -u
# A private /tmp and /dev/shm: what the instance leaves there goes with it.
for dir in /tmp /dev/shm; do
	[ -d "$dir" ] && mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$dir"
done
cd / || exit 1
echo "instance stand-in: running the user data"
bash "$ROOT/var/lib/cloud/user-data" </dev/null
echo "user-data exited $?" >"$ROOT/run/events"
while :; do
	sleep 3600 &
	wait $!
done
