// registry.go: the cluster's OCI registry, for real nodes.
//
// distribution's registry (built from its module in tools/registry) runs as
// a child process on the bridge address, the one address both this machine
// and the nodes reach, over TLS with a certificate from the cluster's CA.
// Its storage is DIR/registry, so images survive a restart. Nodes know it
// as registryHost (nodeconf.go).
//
// At start the devcluster pushes the pause image, built from the pause.c of
// the pinned Kubernetes module (the Makefile compiles it beside the
// devcluster binary), before any node starts: every pod sandbox needs it.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
)

func registryConfig(dir string, st state) (string, error) {
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return "", err
	}
	p := pki{dir: dir}
	return fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: %s:%d
  secret: %s
  draintimeout: 1s
  tls:
    certificate: %s
    key: %s
    minimumtls: tls1.2
`, filepath.Join(dir, "registry", "data"), netplan{st.NetIndex}.gateway(), st.RegistryPort,
		hex.EncodeToString(secret), p.path("registry.crt"), p.path("registry.key")), nil
}

// startRegistry runs the registry until ctx ends and waits until it serves.
func startRegistry(ctx context.Context, dir string, st state) (component, error) {
	bin, err := binPath("registry")
	if err != nil {
		return component{}, err
	}
	cfg, err := registryConfig(dir, st)
	if err != nil {
		return component{}, err
	}
	cfgPath := filepath.Join(dir, "registry", "config.yml")
	if err := writeFile(cfgPath, cfg, 0o600); err != nil {
		return component{}, err
	}
	logPath := filepath.Join(dir, "registry", "registry.log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return component{}, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "serve", cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	// No tracing exporter: there is no collector, and none is wanted.
	cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none", "OTEL_SDK_DISABLED=true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started, done := make(chan error, 1), make(chan error, 1)
	go func() {
		runtime.LockOSThread() // Pdeathsig follows the forking thread
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		done <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return component{}, fmt.Errorf("registry: %w", err)
	}
	c := component{name: "registry", done: make(chan error, 1)}
	go func() {
		select {
		case err := <-done:
			if err == nil {
				err = fmt.Errorf("exited")
			}
			c.done <- fmt.Errorf("%v (see %s)", err, logPath)
			return
		case <-ctx.Done():
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		c.done <- nil
	}()
	if err := waitRegistry(dir, st, c); err != nil {
		return c, fmt.Errorf("registry: %w\n--- last lines of %s ---\n%s", err, logPath, tail(logPath, 15))
	}
	return c, nil
}

// waitRegistry polls /v2/ over TLS until the registry answers.
func waitRegistry(dir string, st state, c component) error {
	transport, err := registryTransport(dir)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: transport, Timeout: 2 * time.Second}
	url := fmt.Sprintf("https://%s:%d/v2/", netplan{st.NetIndex}.gateway(), st.RegistryPort)
	deadline := time.Now().Add(60 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		select {
		case err := <-c.done:
			c.done <- err
			return err
		default:
		}
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET /v2/: %s", resp.Status)
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not serving after 60s: %v", last)
}

// pushPause pushes the sandbox image built from Kubernetes' pause.c.
func pushPause(dir string, st state) error {
	bin, err := binPath("pause")
	if err != nil {
		return err
	}
	_, err = pushImage(dir, st, imageSpec{
		name:       "pause:" + pauseVersion,
		base:       "scratch",
		files:      []imageFile{{src: bin, dst: "/pause", mode: 0o755}},
		entrypoint: []string{"/pause"},
		user:       "65535:65535",
		workdir:    "/",
	})
	return err
}
