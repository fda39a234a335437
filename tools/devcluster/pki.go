// pki.go: the cluster's certificates, keys and kubeconfigs.
//
// One CA signs everything: the apiserver's serving certificate (valid for
// 127.0.0.1, localhost and the in-cluster service names) and one client
// certificate per identity. The files are made once and reused, so a cluster
// restarted on the same DIR keeps its identity and old kubeconfigs keep
// working. Keys are ECDSA P-256: quick to make, accepted by OpenSSL and Go.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// identity is a client of the apiserver that authenticates with a certificate.
type identity struct {
	file   string // base name under pki/ and of its kubeconfig
	user   string // certificate CommonName: the Kubernetes user name
	groups []string
}

// identities lists every client the devcluster itself creates. The admin is
// in system:masters; the controller manager and scheduler use the users that
// RBAC's bootstrap policy already grants; KWOK plays every kubelet at once,
// which no bootstrap role covers, so it is a master too.
var identities = []identity{
	{file: "admin", user: "kubernetes-admin", groups: []string{"system:masters"}},
	{file: "controller-manager", user: "system:kube-controller-manager"},
	{file: "scheduler", user: "system:kube-scheduler"},
	{file: "kwok", user: "kwok-controller", groups: []string{"system:masters"}},
}

// ServiceIP is the ClusterIP of the "kubernetes" Service: the first address of
// the service range passed to the apiserver.
const (
	serviceCIDR = "10.96.0.0/16"
	serviceIP   = "10.96.0.1"
)

type pki struct{ dir string }

func (p pki) path(name string) string { return filepath.Join(p.dir, "pki", name) }

// ensure creates whatever is missing of the CA, the serving certificate, the
// client certificates, the service-account key pair and the admin token.
// With real nodes (plan not nil) it also makes what they need: the
// apiserver's and the registry's certificates valid for the bridge address,
// each kubelet's client and serving certificates, and the identities of
// kube-proxy and kube-router; a certificate whose addresses no longer match
// (another address range was chosen) is made again.
func (p pki) ensure(plan *netplan, realNodes int) error {
	if err := os.MkdirAll(filepath.Join(p.dir, "pki"), 0o700); err != nil {
		return err
	}
	caCert, caKey, err := p.ensureCA()
	if err != nil {
		return fmt.Errorf("CA: %w", err)
	}
	apiserverIPs := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(serviceIP)}
	if plan != nil {
		apiserverIPs = append(apiserverIPs, plan.gateway())
	}
	serving := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: apiserverIPs,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if err := p.ensureLeaf("apiserver", serving, caCert, caKey); err != nil {
		return fmt.Errorf("apiserver certificate: %w", err)
	}
	ids := identities
	if plan != nil {
		ids = append(append([]identity{}, identities...), realNodeIdentities(realNodes)...)
		if err := p.ensureRealNodeServing(*plan, realNodes, caCert, caKey); err != nil {
			return err
		}
	}
	for _, id := range ids {
		tmpl := &x509.Certificate{
			Subject:     pkix.Name{CommonName: id.user, Organization: id.groups},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		if err := p.ensureLeaf(id.file, tmpl, caCert, caKey); err != nil {
			return fmt.Errorf("%s certificate: %w", id.file, err)
		}
	}
	if err := p.ensureServiceAccountKey(); err != nil {
		return fmt.Errorf("service-account key: %w", err)
	}
	if err := p.ensureToken(); err != nil {
		return fmt.Errorf("admin token: %w", err)
	}
	// DIR/ca.crt is the copy users point their clients at.
	ca, err := os.ReadFile(p.path("ca.crt"))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(p.dir, "ca.crt"), ca, 0o644)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func newKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}

func writeCert(path string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func readPEM(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block", path)
	}
	return block.Bytes, nil
}

func (p pki) ensureCA() (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPath, keyPath := p.path("ca.crt"), p.path("ca.key")
	if !exists(certPath) || !exists(keyPath) {
		key, err := newKey()
		if err != nil {
			return nil, nil, err
		}
		sn, err := serial()
		if err != nil {
			return nil, nil, err
		}
		now := time.Now()
		tmpl := &x509.Certificate{
			SerialNumber:          sn,
			Subject:               pkix.Name{CommonName: "devcluster-ca"},
			NotBefore:             now.Add(-time.Hour),
			NotAfter:              now.AddDate(10, 0, 0),
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
			BasicConstraintsValid: true,
			IsCA:                  true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			return nil, nil, err
		}
		if err := writeKey(keyPath, key); err != nil {
			return nil, nil, err
		}
		if err := writeCert(certPath, der); err != nil {
			return nil, nil, err
		}
	}
	certDER, err := readPEM(certPath)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(certDER)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := readPEM(keyPath)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(keyDER)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// ensureLeaf makes name.crt/name.key signed by the CA unless both exist
// and the certificate already carries every IP address tmpl asks for.
func (p pki) ensureLeaf(name string, tmpl *x509.Certificate, ca *x509.Certificate, caKey *ecdsa.PrivateKey) error {
	certPath, keyPath := p.path(name+".crt"), p.path(name+".key")
	if exists(certPath) && exists(keyPath) && hasIPs(certPath, tmpl.IPAddresses) {
		return nil
	}
	key, err := newKey()
	if err != nil {
		return err
	}
	sn, err := serial()
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl.SerialNumber = sn
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.AddDate(5, 0, 0)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	if err := writeKey(keyPath, key); err != nil {
		return err
	}
	return writeCert(certPath, der)
}

// ensureServiceAccountKey makes sa.key (signs tokens) and sa.pub (verifies).
func (p pki) ensureServiceAccountKey() error {
	if exists(p.path("sa.key")) && exists(p.path("sa.pub")) {
		return nil
	}
	key, err := newKey()
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := writeKey(p.path("sa.key"), key); err != nil {
		return err
	}
	return os.WriteFile(p.path("sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

// ensureToken makes the static token file: one admin token in system:masters.
// DIR/admin.token holds the bare token for clients that want a bearer token.
func (p pki) ensureToken() error {
	tokenPath := filepath.Join(p.dir, "admin.token")
	if !exists(tokenPath) {
		raw := make([]byte, 24)
		if _, err := rand.Read(raw); err != nil {
			return err
		}
		if err := os.WriteFile(tokenPath, []byte(hex.EncodeToString(raw)+"\n"), 0o600); err != nil {
			return err
		}
	}
	tok, err := os.ReadFile(tokenPath)
	if err != nil {
		return err
	}
	token := string(tok[:len(tok)-1])
	if len(token) < 16 {
		return errors.New(tokenPath + ": token too short")
	}
	// token,user,uid,"group1,group2"
	line := fmt.Sprintf("%s,token-admin,token-admin,\"system:masters\"\n", token)
	return os.WriteFile(p.path("tokens.csv"), []byte(line), 0o600)
}

// writeKubeconfig writes a kubeconfig for id to path, with the CA, the
// certificate and the key embedded so the file works wherever it is copied.
func (p pki) writeKubeconfig(path, server string, id identity) error {
	ca, err := os.ReadFile(p.path("ca.crt"))
	if err != nil {
		return err
	}
	crt, err := os.ReadFile(p.path(id.file + ".crt"))
	if err != nil {
		return err
	}
	key, err := os.ReadFile(p.path(id.file + ".key"))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["devcluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[id.user] = &clientcmdapi.AuthInfo{ClientCertificateData: crt, ClientKeyData: key}
	cfg.Contexts["devcluster"] = &clientcmdapi.Context{Cluster: "devcluster", AuthInfo: id.user, Namespace: "default"}
	cfg.CurrentContext = "devcluster"
	return clientcmd.WriteToFile(*cfg, path)
}

// hasIPs reports whether the certificate at path is valid for every ip.
func hasIPs(path string, ips []net.IP) bool {
	der, err := readPEM(path)
	if err != nil {
		return false
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return false
	}
	for _, want := range ips {
		found := false
		for _, have := range cert.IPAddresses {
			found = found || have.Equal(want)
		}
		if !found {
			return false
		}
	}
	return true
}

// realNodeIdentities are the clients real nodes bring: one kubelet per node
// (system:node:NAME in system:nodes, which the Node authorizer and the
// NodeRestriction admission plugin confine to its own node), kube-proxy
// (the user RBAC's bootstrap policy binds to system:node-proxier),
// kube-router (bound to the role rbac.go creates) and the apiserver's own
// client identity towards the kubelets.
func realNodeIdentities(n int) []identity {
	ids := []identity{
		{file: "kube-proxy", user: "system:kube-proxy"},
		{file: "kube-router", user: "system:kube-router"},
		{file: "apiserver-kubelet-client", user: "kube-apiserver-kubelet-client", groups: []string{"system:masters"}},
	}
	for i := 0; i < n; i++ {
		ids = append(ids, identity{file: realNodeName(i), user: "system:node:" + realNodeName(i), groups: []string{"system:nodes"}})
	}
	return ids
}

// ensureRealNodeServing makes the registry's and each kubelet's serving
// certificates, valid for their addresses on the cluster's bridge.
func (p pki) ensureRealNodeServing(plan netplan, n int, ca *x509.Certificate, caKey *ecdsa.PrivateKey) error {
	reg := &x509.Certificate{
		Subject:     pkix.Name{CommonName: registryHost},
		DNSNames:    []string{registryHost},
		IPAddresses: []net.IP{plan.gateway()},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if err := p.ensureLeaf("registry", reg, ca, caKey); err != nil {
		return fmt.Errorf("registry certificate: %w", err)
	}
	for i := 0; i < n; i++ {
		tmpl := &x509.Certificate{
			Subject:     pkix.Name{CommonName: realNodeName(i)},
			DNSNames:    []string{realNodeName(i)},
			IPAddresses: []net.IP{plan.nodeIP(i)},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}
		if err := p.ensureLeaf(realNodeName(i)+"-serving", tmpl, ca, caKey); err != nil {
			return fmt.Errorf("%s serving certificate: %w", realNodeName(i), err)
		}
	}
	return nil
}
