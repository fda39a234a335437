// image.go: `devcluster image`, OCI images built without a daemon and
// pushed to the cluster's registry.
//
// An image here is a few files made on this machine (a statically linked
// program, a config file) on one of two bases: nothing at all, or
// Debian's busybox-static (/bin/busybox and its applet links, plus an
// /etc/passwd with an unprivileged user), never a layer pulled from a
// public registry. Layers are built by go-containerregistry from tar
// streams with fixed timestamps and owners, so the same files always make
// the same digest and a push of an unchanged image uploads nothing.
package main

import (
	"archive/tar"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// nonRootUID is the unprivileged user of the busybox base ("ctf").
const nonRootUID = 65532

// imageSpec describes one image.
type imageSpec struct {
	name       string // repository:tag under registryHost, e.g. kopc/ctf-greeter:0.1
	base       string // "scratch" or "busybox"
	files      []imageFile
	entrypoint []string
	cmd        []string
	user       string
	env        []string
	workdir    string
	ports      []string
	labels     map[string]string
}

// imageFile is one file of the top layer.
type imageFile struct {
	src  string // path on this machine
	dst  string // absolute path in the image
	mode int64
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// imageMain is `devcluster image --dir DIR --name REPO:TAG ...`.
func imageMain(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, `usage: devcluster image --dir DIR --name REPO:TAG [flags]

Builds an OCI image from files on this machine and pushes it to the registry
of the cluster running on DIR (started with --real-nodes). Pods pull it as
%s/REPO:TAG. Prints that reference with its digest.

flags:
`, registryHost)
		fs.PrintDefaults()
	}
	var (
		dir, nameFlag, base, user, workdir        string
		files, entry, cmdArgs, env, ports, labels stringList
	)
	fs.StringVar(&dir, "dir", "", "state directory of a running cluster with real nodes")
	fs.StringVar(&nameFlag, "name", "", "repository:tag, e.g. kopc/ctf-greeter:0.1")
	fs.StringVar(&base, "base", "busybox", "base: busybox (Debian's busybox-static) or scratch")
	fs.Var(&files, "file", "SRC:DST[:MODE] a file of the image (repeatable); MODE in octal, default 0755 for executables, 0644 otherwise")
	fs.Var(&entry, "entrypoint", "one element of the entrypoint (repeatable)")
	fs.Var(&cmdArgs, "arg", "one element of the default arguments (repeatable)")
	fs.StringVar(&user, "user", strconv.Itoa(nonRootUID), "numeric uid[:gid] the image runs as")
	fs.Var(&env, "env", "KEY=VALUE (repeatable)")
	fs.StringVar(&workdir, "workdir", "/", "working directory")
	fs.Var(&ports, "expose", "PORT[/tcp] (repeatable)")
	fs.Var(&labels, "label", "KEY=VALUE (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if dir == "" || nameFlag == "" || fs.NArg() != 0 {
		fs.Usage()
		return errors.New("--dir and --name are required")
	}
	spec := imageSpec{name: nameFlag, base: base, entrypoint: entry, cmd: cmdArgs, user: user,
		env: env, workdir: workdir, ports: ports, labels: map[string]string{}}
	for _, f := range files {
		file, err := parseImageFile(f)
		if err != nil {
			return err
		}
		spec.files = append(spec.files, file)
	}
	for _, kv := range labels {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("--label %q: want KEY=VALUE", kv)
		}
		spec.labels[k] = v
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	st, err := readState(abs)
	if err != nil {
		return err
	}
	if st.RealNodes == 0 || st.RegistryPort == 0 {
		return fmt.Errorf("the cluster in %s has no registry: start it with --real-nodes N", abs)
	}
	if up, _ := running(abs); !up {
		return fmt.Errorf("no cluster is running in %s", abs)
	}
	ref, err := pushImage(abs, st, spec)
	if err != nil {
		return err
	}
	fmt.Println(ref)
	return nil
}

func parseImageFile(s string) (imageFile, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || !strings.HasPrefix(parts[1], "/") {
		return imageFile{}, fmt.Errorf("--file %q: want SRC:/DST[:MODE]", s)
	}
	f := imageFile{src: parts[0], dst: path.Clean(parts[1]), mode: -1}
	if len(parts) == 3 {
		m, err := strconv.ParseInt(parts[2], 8, 32)
		if err != nil || m < 0 || m > 0o7777 {
			return imageFile{}, fmt.Errorf("--file %q: MODE must be octal, e.g. 0755", s)
		}
		f.mode = m
	}
	return f, nil
}

// pushImage builds spec and pushes it; it returns registryHost/name@digest.
func pushImage(dir string, st state, spec imageSpec) (string, error) {
	img, err := buildImage(spec)
	if err != nil {
		return "", err
	}
	addr := fmt.Sprintf("%s:%d", netplan{st.NetIndex}.gateway(), st.RegistryPort)
	ref, err := name.ParseReference(addr + "/" + spec.name)
	if err != nil {
		return "", fmt.Errorf("image name %q: %w", spec.name, err)
	}
	transport, err := registryTransport(dir)
	if err != nil {
		return "", err
	}
	if err := remote.Write(ref, img, remote.WithTransport(transport)); err != nil {
		return "", fmt.Errorf("push %s: %w", spec.name, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s/%s@%s", registryHost, spec.name, digest), nil
}

// registryTransport trusts the cluster's CA only.
func registryTransport(dir string) (http.RoundTripper, error) {
	ca, err := os.ReadFile(filepath.Join(dir, "pki", "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("pki/ca.crt: no certificate")
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	t.Proxy = nil // the registry is on this machine, whatever HTTPS_PROXY says
	return t, nil
}

// epoch is every timestamp of our images, so that builds are reproducible.
var epoch = time.Unix(0, 0).UTC()

func buildImage(spec imageSpec) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	var layers []v1.Layer
	switch spec.base {
	case "scratch":
	case "busybox":
		l, err := busyboxLayer()
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	default:
		return nil, fmt.Errorf("--base %q: want busybox or scratch", spec.base)
	}
	if len(spec.files) > 0 {
		l, err := filesLayer(spec.files)
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	img, err := mutate.AppendLayers(img, layers...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint = spec.entrypoint
	cf.Config.Cmd = spec.cmd
	cf.Config.User = spec.user
	cf.Config.WorkingDir = spec.workdir
	cf.Config.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, spec.env...)
	cf.Config.Labels = spec.labels
	if len(spec.ports) > 0 {
		cf.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range spec.ports {
			if !strings.Contains(p, "/") {
				p += "/tcp"
			}
			cf.Config.ExposedPorts[p] = struct{}{}
		}
	}
	cf.History = nil
	return mutate.ConfigFile(img, cf)
}

// tarEntry is one entry of a layer being built.
type tarEntry struct {
	hdr  tar.Header
	data []byte
}

// layerFrom makes a layer from entries, in path order, with every parent
// directory present.
func layerFrom(entries []tarEntry) (v1.Layer, error) {
	dirs := map[string]bool{}
	for _, e := range entries {
		if e.hdr.Typeflag == tar.TypeDir {
			dirs[e.hdr.Name] = true
		}
	}
	for _, e := range entries {
		for d := path.Dir(strings.TrimSuffix(e.hdr.Name, "/")); d != "." && d != "/" && d != ""; d = path.Dir(d) {
			if !dirs[d+"/"] {
				dirs[d+"/"] = true
				entries = append(entries, tarEntry{hdr: tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755}})
			}
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].hdr.Name < entries[j].hdr.Name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.hdr
		h.ModTime, h.Format = epoch, tar.FormatPAX
		h.Uname, h.Gname = "", ""
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(&h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

func filesLayer(files []imageFile) (v1.Layer, error) {
	var entries []tarEntry
	for _, f := range files {
		data, err := os.ReadFile(f.src)
		if err != nil {
			return nil, err
		}
		mode := f.mode
		if mode < 0 {
			mode = 0o644
			if fi, err := os.Stat(f.src); err == nil && fi.Mode()&0o111 != 0 {
				mode = 0o755
			}
		}
		entries = append(entries, tarEntry{
			hdr:  tar.Header{Name: strings.TrimPrefix(f.dst, "/"), Typeflag: tar.TypeReg, Mode: mode},
			data: data,
		})
	}
	return layerFrom(entries)
}

// busyboxPath is where Debian's busybox-static installs the binary.
const busyboxPath = "/bin/busybox"

// busyboxLayer is Debian's busybox-static with a link per applet, an
// /etc/passwd and /etc/group with root, nobody and ctf (nonRootUID), and a
// world-writable /tmp.
func busyboxLayer() (v1.Layer, error) {
	bin, err := os.ReadFile(busyboxPath)
	if err != nil {
		return nil, fmt.Errorf("%w (Debian package busybox-static)", err)
	}
	out, err := exec.Command(busyboxPath, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list-full: %w", busyboxPath, err)
	}
	entries := []tarEntry{
		{hdr: tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755}, data: bin},
		{hdr: tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777}},
		{hdr: tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644}, data: []byte(fmt.Sprintf(
			"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\nctf:x:%d:%d:ctf:/tmp:/bin/sh\n", nonRootUID, nonRootUID))},
		{hdr: tar.Header{Name: "etc/group", Typeflag: tar.TypeReg, Mode: 0o644}, data: []byte(fmt.Sprintf(
			"root:x:0:\nnogroup:x:65534:\nctf:x:%d:\n", nonRootUID))},
	}
	seen := map[string]bool{"bin/busybox": true}
	for _, applet := range strings.Fields(string(out)) {
		applet = strings.TrimPrefix(applet, "/")
		if seen[applet] || strings.Contains(applet, "..") {
			continue
		}
		seen[applet] = true
		entries = append(entries, tarEntry{hdr: tar.Header{Name: applet, Typeflag: tar.TypeSymlink, Linkname: "/bin/busybox", Mode: 0o777}})
	}
	return layerFrom(entries)
}
