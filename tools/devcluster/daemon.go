// daemon.go: start in the background, stop, status, and the DIR lock.
//
// A cluster owns DIR through an exclusive flock on DIR/devcluster.lock, held
// for the life of the `run` process: a second cluster on the same DIR cannot
// start, and a crashed one leaves no stale lock behind (the kernel drops it).
// DIR/devcluster.pid names the process for `stop`.
//
// `start` runs `devcluster run` as a detached child with its output going to
// DIR/devcluster.log and waits on a pipe: the child writes "ok" once the
// cluster is ready, or the error that stopped it. If the child dies without a
// word, start prints the tail of the log, where the component's error is.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	readyFDEnv   = "DEVCLUSTER_READY_FD"
	startTimeout = 5 * time.Minute
	stopTimeout  = 60 * time.Second
)

func lockPath(dir string) string { return filepath.Join(dir, "devcluster.lock") }
func pidPath(dir string) string  { return filepath.Join(dir, "devcluster.pid") }
func logPath(dir string) string  { return filepath.Join(dir, "devcluster.log") }

// errRunning is returned when DIR already has a live cluster.
var errRunning = errors.New("already running")

// lockDir takes the DIR lock without waiting. The returned file must stay
// open for as long as the lock is to be held.
func lockDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(lockPath(dir), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errRunning
		}
		return nil, err
	}
	return f, nil
}

// running reports whether a cluster holds DIR's lock, and its pid if known.
func running(dir string) (bool, int) {
	f, err := lockDir(dir)
	if err == nil {
		f.Close()
		return false, 0
	}
	data, _ := os.ReadFile(pidPath(dir))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return true, pid
}

func start(o options) error {
	if up, pid := running(o.dir); up {
		return fmt.Errorf("a cluster is already running in %s (pid %d); stop it with: devcluster stop --dir %s", o.dir, pid, o.dir)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(logPath(o.dir), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	rd, wr, err := os.Pipe()
	if err != nil {
		return err
	}
	defer rd.Close()

	args := []string{"run", "--dir", o.dir, "--nodes", strconv.Itoa(o.nodes), "--real-nodes", strconv.Itoa(o.realNodes), "--port", strconv.Itoa(o.port),
		"--compaction-interval", o.compaction.String()}
	for _, a := range o.apiserverArgs {
		args = append(args, "--apiserver-arg="+a)
	}
	if o.gatewayDomain != "" {
		args = append(args, "--gateway-domain", o.gatewayDomain)
	} else {
		args = append(args, "--gateway=false")
	}
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{wr} // fd 3 in the child
	cmd.Env = append(os.Environ(), readyFDEnv+"=3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		wr.Close()
		return err
	}
	wr.Close() // the child holds the only write end now: EOF means it exited

	word := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(rd).ReadString('\n')
		word <- strings.TrimSpace(line)
	}()
	select {
	case w := <-word:
		if w == "ok" {
			pid := cmd.Process.Pid
			cmd.Process.Release()
			fmt.Printf("devcluster: ready (pid %d)\n  export KUBECONFIG=%s\n  log: %s\n",
				pid, filepath.Join(o.dir, "kubeconfig"), logPath(o.dir))
			return nil
		}
		cmd.Wait()
		if w == "" {
			w = "exited during start-up"
		}
		return fmt.Errorf("start failed: %s\n--- last lines of %s ---\n%s", w, logPath(o.dir), tail(logPath(o.dir), 30))
	case <-time.After(startTimeout):
		cmd.Process.Signal(syscall.SIGTERM)
		return fmt.Errorf("not ready after %s\n--- last lines of %s ---\n%s", startTimeout, logPath(o.dir), tail(logPath(o.dir), 30))
	}
}

// tail returns the last n lines of a file, for error reports.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const window = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > window {
		f.Seek(-window, io.SeekEnd)
	}
	data, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func stop(o options) error {
	up, pid := running(o.dir)
	if !up {
		fmt.Printf("devcluster: no cluster running in %s\n", o.dir)
		return cleanupLeftovers(o.dir)
	}
	if pid <= 0 {
		return fmt.Errorf("%s is locked but %s names no process", o.dir, pidPath(o.dir))
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal pid %d: %w", pid, err)
	}
	deadline := time.Now().Add(stopTimeout)
	for time.Now().Before(deadline) {
		if up, _ := running(o.dir); !up && !alive(pid) {
			fmt.Printf("devcluster: stopped (pid %d)\n", pid)
			return cleanupLeftovers(o.dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 100; i++ {
		if up, _ := running(o.dir); !up {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := cleanupLeftovers(o.dir); err != nil {
		return err
	}
	return fmt.Errorf("pid %d did not stop within %s and was killed", pid, stopTimeout)
}

// cleanupLeftovers removes what real nodes of a cluster that did not stop
// cleanly (killed, crashed) left on the host: their bridge and cgroups. A
// clean stop has already done it; this finds nothing then.
func cleanupLeftovers(dir string) error {
	st, err := readState(dir)
	if err != nil || st.RealNodes == 0 {
		return nil
	}
	return cleanupRealNodes(netplan{st.NetIndex}, dir)
}

// alive reports whether pid is a live process. The lock is released a moment
// before the process exits; stop waits for both so that a caller may reuse
// the ports at once. A zombie (exited, not yet reaped) counts as gone.
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name: "pid (comm) S ...".
	if i := strings.LastIndexByte(string(data), ')'); i >= 0 && i+2 < len(data) {
		return data[i+2] != 'Z'
	}
	return true
}

func status(o options) error {
	up, pid := running(o.dir)
	if !up {
		fmt.Printf("devcluster: not running in %s\n", o.dir)
		os.Exit(1)
	}
	fmt.Printf("devcluster: running in %s (pid %d)\n", o.dir, pid)
	return nil
}

// readySignal is how `run` tells a waiting `start` the outcome of start-up.
type readySignal struct{ f *os.File }

func readySignalFromEnv() *readySignal {
	fd, err := strconv.Atoi(os.Getenv(readyFDEnv))
	if err != nil || fd < 3 {
		return nil
	}
	os.Unsetenv(readyFDEnv)
	return &readySignal{f: os.NewFile(uintptr(fd), "ready")}
}

// send writes the word once and closes the pipe; later calls do nothing.
func (r *readySignal) send(word string) {
	if r == nil || r.f == nil {
		return
	}
	fmt.Fprintln(r.f, strings.ReplaceAll(word, "\n", " "))
	r.f.Close()
	r.f = nil
}
