// realnode.go: the host side of real nodes: start each node's init process
// in new namespaces, hand it its network, stop it, and remove what the host
// made for it.
//
// A real node's init (node.go) runs with Pdeathsig SIGKILL, so a devcluster
// that dies, however it dies, takes its nodes with it: the kernel kills the
// init, then everything in its PID namespace. The next start or stop on the
// same DIR finds the bridge and cgroups left behind and removes them.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// nodeStopTimeout bounds a node's own shutdown before it is killed.
const nodeStopTimeout = 20 * time.Second

// startRealNode starts real node i and returns once its init has its
// network; the node registers itself with the apiserver when its kubelet is
// up. The component ends when the node exits; cancelling ctx stops it.
func startRealNode(ctx context.Context, dir string, p netplan, i int) (component, error) {
	l := newNodeLayout(dir, i)
	if err := os.MkdirAll(l.root, 0o755); err != nil {
		return component{}, err
	}
	self, err := os.Executable()
	if err != nil {
		return component{}, err
	}
	logf, err := os.OpenFile(l.path("node.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return component{}, err
	}
	defer logf.Close()
	rd, wr, err := os.Pipe()
	if err != nil {
		return component{}, err
	}
	defer wr.Close()

	cmd := exec.Command(self, "node", "--dir", dir, "--index", strconv.Itoa(i))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{rd} // fd 3: nodeGoFD
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET |
			syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC,
		Pdeathsig: syscall.SIGKILL,
	}
	started := make(chan error, 1)
	done := make(chan error, 1)
	// Pdeathsig fires when the thread that forked exits; this goroutine
	// keeps its thread for the node's whole life.
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			rd.Close()
			started <- err
			return
		}
		rd.Close()
		started <- nil
		done <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return component{}, fmt.Errorf("%s: %w", realNodeName(i), err)
	}
	if err := plugNode(p, i, cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		<-done
		return component{}, err
	}
	if _, err := wr.Write([]byte("go\n")); err != nil {
		_ = cmd.Process.Kill()
		<-done
		return component{}, fmt.Errorf("%s: %w", realNodeName(i), err)
	}

	c := component{name: realNodeName(i), done: make(chan error, 1)}
	go func() {
		select {
		case err := <-done:
			c.done <- nodeExit(i, l, err)
			return
		case <-ctx.Done():
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(nodeStopTimeout):
			_ = cmd.Process.Kill()
			<-done
		}
		c.done <- nil
	}()
	return c, nil
}

func nodeExit(i int, l nodeLayout, err error) error {
	if err == nil {
		err = fmt.Errorf("exited")
	}
	return fmt.Errorf("%s stopped: %v\n--- last lines of %s ---\n%s", realNodeName(i), err, l.path("node.log"), tail(l.path("node.log"), 15))
}

// cleanupRealNodes removes what the host made for cluster p's real nodes:
// the bridge (with its routes and veths) and the nodes' cgroups. The nodes'
// processes must be gone; their namespaces, mounts and rules went with them.
func cleanupRealNodes(p netplan, dir string) error {
	if br, err := netlinkBridgeAlias(p); err == nil && br != dir {
		return nil // another cluster's now; ours went with the range
	}
	if err := deleteBridge(p); err != nil {
		return err
	}
	var firstErr error
	for i := 0; i < maxRealNodes; i++ {
		// A cgroup is removable only once the kernel has finished with its
		// last task; give it a moment.
		var err error
		for try := 0; try < 50; try++ {
			if err = removeCgroups(p, i); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}
