package linux

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// removeIPC removes the System V IPC objects of the agent's IPC namespace
// that uid created or owns: a job can hand an object it created to another
// owner (IPC_SET), root included, and the next run could read it. (The
// runner's own objects live in its IPC namespace, which ends with its last
// process; these are of what runs outside it, a cron job say.)
func removeIPC(uid uint32) error {
	var errs []error
	for _, kind := range []struct {
		file, idColumn string
		remove         func(id int) error
	}{
		{"/proc/sysvipc/shm", "shmid", func(id int) error { _, err := unix.SysvShmCtl(id, unix.IPC_RMID, nil); return err }},
		{"/proc/sysvipc/msg", "msqid", func(id int) error { return syscallErr(unix.Syscall(unix.SYS_MSGCTL, uintptr(id), unix.IPC_RMID, 0)) }},
		{"/proc/sysvipc/sem", "semid", func(id int) error {
			return syscallErr(unix.Syscall6(unix.SYS_SEMCTL, uintptr(id), 0, unix.IPC_RMID, 0, 0, 0))
		}},
	} {
		ids, err := ipcObjectsOf(kind.file, kind.idColumn, uid)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, id := range ids {
			if err := kind.remove(id); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EIDRM) {
				errs = append(errs, fmt.Errorf("removing IPC object %d (%s): %w", id, kind.file, err))
			}
		}
	}
	return errors.Join(errs...)
}

func syscallErr(_, _ uintptr, errno unix.Errno) error {
	if errno != 0 {
		return errno
	}
	return nil
}

// ipcObjectsOf lists the ids of the objects in a /proc/sysvipc table whose
// owner (uid) or creator (cuid) is uid.
func ipcObjectsOf(file, idColumn string, uid uint32) ([]int, error) {
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // no System V IPC in this kernel
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return nil, sc.Err()
	}
	header := strings.Fields(sc.Text())
	col := func(name string) int { return slices.Index(header, name) }
	idCol, uidCol, cuidCol := col(idColumn), col("uid"), col("cuid")
	if idCol < 0 || uidCol < 0 || cuidCol < 0 {
		return nil, fmt.Errorf("%s: unexpected header %q", file, sc.Text())
	}
	want := strconv.FormatUint(uint64(uid), 10)
	var ids []int
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) <= max(idCol, uidCol, cuidCol) || (fields[uidCol] != want && fields[cuidCol] != want) {
			continue
		}
		if id, err := strconv.Atoi(fields[idCol]); err == nil {
			ids = append(ids, id)
		}
	}
	return ids, sc.Err()
}

// ClearKeyrings empties the calling user's kernel keyrings: its user
// keyring, user session keyring and persistent keyring outlive its
// processes, and the next run of the same user would find their keys. The
// agent runs it as the runner user (its clear-keyrings command), once no
// other process of the runner user is left.
func ClearKeyrings() error {
	var errs []error
	for _, ring := range []int{unix.KEY_SPEC_USER_KEYRING, unix.KEY_SPEC_USER_SESSION_KEYRING} {
		if _, err := unix.KeyctlInt(unix.KEYCTL_CLEAR, ring, 0, 0, 0); err != nil && !errors.Is(err, unix.ENOKEY) {
			errs = append(errs, fmt.Errorf("clearing keyring %d: %w", ring, err))
		}
	}
	// The persistent keyring, linked into the process keyring to reach it.
	persistent, err := unix.KeyctlInt(unix.KEYCTL_GET_PERSISTENT, -1, unix.KEY_SPEC_PROCESS_KEYRING, 0, 0)
	switch {
	case err == nil:
		if _, err := unix.KeyctlInt(unix.KEYCTL_CLEAR, persistent, 0, 0, 0); err != nil {
			errs = append(errs, fmt.Errorf("clearing the persistent keyring: %w", err))
		}
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
		// persistent keyrings are not configured in this kernel
	default:
		errs = append(errs, fmt.Errorf("the persistent keyring: %w", err))
	}
	return errors.Join(errs...)
}
