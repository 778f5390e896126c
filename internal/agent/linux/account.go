package linux

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"slices"
	"strconv"
)

// account is the unprivileged user jobs run as.
type account struct {
	name     string
	uid, gid uint32
	home     string
}

// privilegedGroups give their members root, or what root can reach.
var privilegedGroups = []string{"root", "sudo", "wheel", "admin", "adm", "docker", "lxd", "disk"}

// ensureAccount creates the runner user when it does not exist, with a
// home and a group of its own, and returns it. logf hears of a group that
// gives jobs root.
func ensureAccount(ctx context.Context, name string, logf func(string, ...any)) (account, error) {
	u, err := user.Lookup(name)
	if _, missing := err.(user.UnknownUserError); missing {
		if out, err := exec.CommandContext(ctx, "useradd", "--create-home", "--user-group", "--shell", "/bin/bash", name).CombinedOutput(); err != nil {
			return account{}, fmt.Errorf("creating the runner user %s: %v: %s", name, err, out)
		}
		u, err = user.Lookup(name)
	}
	if err != nil {
		return account{}, fmt.Errorf("the runner user %s: %w", name, err)
	}
	uid, errU := strconv.ParseUint(u.Uid, 10, 32)
	gid, errG := strconv.ParseUint(u.Gid, 10, 32)
	if errU != nil || errG != nil || uid == 0 || u.HomeDir == "" || u.HomeDir == "/" {
		return account{}, fmt.Errorf("the runner user %s (uid %s, home %q) must be an unprivileged user with a home of its own", name, u.Uid, u.HomeDir)
	}
	if gids, err := u.GroupIds(); err == nil {
		for _, id := range gids {
			if g, err := user.LookupGroupId(id); err == nil && slices.Contains(privilegedGroups, g.Name) {
				logf("warning: the runner user is in group %s, which gives jobs root: they can reach everything this agent protects (guide Runner security)", g.Name)
			}
		}
	}
	// Its home is its own alone, whatever useradd's default.
	if err := os.Chmod(u.HomeDir, 0o700); err != nil {
		return account{}, fmt.Errorf("the runner user's home: %w", err)
	}
	return account{name: name, uid: uint32(uid), gid: uint32(gid), home: u.HomeDir}, nil
}
