package scripttest

import (
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/await"
)

// removeUser deletes the user an instance's script created, with its home,
// mail spool and group. userdel fails while another process (another
// instance's useradd, say) holds the lock of /etc/passwd, so it is tried
// until the user is gone.
func removeUser(name string) error {
	u, err := user.Lookup(name)
	if errors.As(err, new(user.UnknownUserError)) {
		return nil // never created
	}
	if err != nil {
		return err
	}
	err = await.Poll(await.Patience, func() error {
		if _, err := user.Lookup(name); errors.As(err, new(user.UnknownUserError)) {
			return nil
		}
		return run("userdel", "--remove", name)
	})
	if err != nil {
		return err
	}
	// What userdel may leave: the home (when it was not the user's own) and
	// the user's group (when the system keeps it). The names are the
	// instance's own, so nothing else's goes.
	if filepath.Base(u.HomeDir) == name && strings.HasPrefix(u.HomeDir, "/home/") {
		if err := os.RemoveAll(u.HomeDir); err != nil {
			return err
		}
	}
	if _, err := user.LookupGroup(name); err == nil {
		return run("groupdel", name)
	}
	return nil
}
