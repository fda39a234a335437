// gateway.go: the Gateway API on the devcluster (--gateway, --gateway-domain D).
//
// What it makes, once the cluster is ready:
//
//   - the Gateway API CRDs of the experimental channel of
//     sigs.k8s.io/gateway-api (tools/gateway-api/go.mod pins the version;
//     make devcluster copies them beside this binary, into
//     gateway-api-crds/), applied server-side, waited for until Established.
//     The experimental channel, because the Traefik built here reads
//     TLSRoute as v1alpha2, which the standard channel no longer serves;
//     it serves v1 as well, and v1 is the stored version.
//   - a wildcard certificate for *.D and D, signed by a CA of its own that
//     may only vouch for names under D (a critical name constraint), so that
//     trusting DIR/gateway/ca.crt risks nothing else; the Secret
//     kopc-gateway/wildcard-tls holds it (what cert-manager would write).
//   - the GatewayClass "traefik" and the Gateway kopc-gateway/ctf with two
//     listeners on port 443 for *.D, both terminating TLS with that Secret:
//     "tls" (protocol TLS, mode Terminate: TLSRoutes, forwarded as plain
//     TCP) and "https" (protocol HTTPS: HTTPRoutes, by Host). Routes may
//     attach from every namespace, since each instance has its own.
//
// With real nodes it also runs the implementation: Traefik (tools/traefik,
// pushed as an image the way CoreDNS is), a Deployment in kopc-gateway
// behind the ClusterIP Service "traefik", with its Kubernetes Gateway
// provider; start-up waits until Traefik is Ready and the Gateway is
// Programmed. The host reaches it on 127.0.0.1:P (DIR/devcluster.json,
// "gatewayPort"): the devcluster forwards each connection there to a ready
// Traefik pod's port 443, as a cloud load balancer would, since the nodes'
// addresses are not this machine's. Without real nodes only the objects are
// made: routes can be written and read, nothing answers.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

const (
	defaultGatewayDomain = "ctf.localhost"
	gatewayNamespace     = "kopc-gateway"
	gatewayClassName     = "traefik"
	gatewayName          = "ctf"
	gatewaySecret        = "wildcard-tls"
	gatewayPort          = 443 // both listeners', and Traefik's entry point's
	traefikController    = "traefik.io/gateway-controller"
	traefikVersion       = "3.6.12" // tools/traefik/go.mod
	fieldManager         = "devcluster"
)

func traefikImage() string { return registryHost + "/traefik:" + traefikVersion }

var (
	crdGVR          = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	gatewayClassGVR = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gatewayclasses"}
	gatewayGVR      = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"}
)

// checkGatewayDomain refuses a domain that cannot carry a wildcard: it must
// be a DNS-1123 subdomain with room for a 63-character label in front.
func checkGatewayDomain(d string) error {
	if errs := validation.IsDNS1123Subdomain(d); len(errs) > 0 {
		return fmt.Errorf("--gateway-domain %q: %s", d, strings.Join(errs, "; "))
	}
	if !strings.Contains(d, ".") {
		return fmt.Errorf("--gateway-domain %q: give at least two labels (e.g. %s)", d, defaultGatewayDomain)
	}
	if len(d) > 253-64 {
		return fmt.Errorf("--gateway-domain %q: too long for a host under it", d)
	}
	return nil
}

// gatewayDir is where the gateway's CA and certificate live.
func gatewayDir(dir string) string { return filepath.Join(dir, "gateway") }

// startGateway makes the gateway's objects and, with real nodes, runs
// Traefik and the host's forwarder (a component). It returns once the
// Gateway is Programmed (real nodes) or its objects exist (fake nodes).
func startGateway(ctx, compCtx context.Context, dir string, st state, admin *kubernetes.Clientset, comps []component) ([]component, error) {
	dyn, err := dynamicFor(filepath.Join(dir, "pki", "admin.kubeconfig"))
	if err != nil {
		return nil, err
	}
	if err := applyGatewayCRDs(ctx, dyn); err != nil {
		return nil, fmt.Errorf("gateway CRDs: %w", err)
	}
	certPEM, keyPEM, err := ensureGatewayCert(dir, st.GatewayDomain)
	if err != nil {
		return nil, fmt.Errorf("gateway certificate: %w", err)
	}
	if err := applyGatewayObjects(ctx, admin, dyn, st.GatewayDomain, certPEM, keyPEM); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if st.RealNodes == 0 {
		klog.Infof("devcluster: gateway objects for *.%s made; no real node, so nothing serves them", st.GatewayDomain)
		return nil, nil
	}
	if err := pushTraefik(dir, st); err != nil {
		return nil, fmt.Errorf("traefik image: %w", err)
	}
	if err := applyTraefik(ctx, admin); err != nil {
		return nil, fmt.Errorf("traefik: %w", err)
	}
	fwd, err := startGatewayForwarder(compCtx, admin, st.GatewayPort)
	if err != nil {
		return nil, err
	}
	if err := waitGateway(ctx, admin, dyn, append(comps, fwd)); err != nil {
		return []component{fwd}, err
	}
	klog.Infof("devcluster: gateway for *.%s on 127.0.0.1:%d (trust %s)", st.GatewayDomain, st.GatewayPort, filepath.Join(gatewayDir(dir), "ca.crt"))
	return []component{fwd}, nil
}

func dynamicFor(kubeconfig string) (*dynamic.DynamicClient, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	return dynamic.NewForConfig(cfg)
}

// apply server-side applies obj (its own fields win over anyone's).
func apply(ctx context.Context, r dynamic.ResourceInterface, obj *unstructured.Unstructured) error {
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return err
	}
	_, err = r.Patch(ctx, obj.GetName(), types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: fieldManager, Force: ptr.To(true)})
	return err
}

// applyGatewayCRDs applies every CRD in gateway-api-crds/ beside this binary
// and waits until each is Established.
func applyGatewayCRDs(ctx context.Context, dyn *dynamic.DynamicClient) error {
	crdDir, err := binPath("gateway-api-crds")
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(crdDir, "*.yaml"))
	if err != nil {
		return err
	}
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		for _, doc := range strings.Split(string(data), "\n---") {
			js, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			obj := &unstructured.Unstructured{}
			if string(js) == "null" || obj.UnmarshalJSON(js) != nil || obj.GetKind() != "CustomResourceDefinition" {
				continue // an empty document, or not a CRD
			}
			if err := apply(ctx, dyn.Resource(crdGVR), obj); err != nil {
				return fmt.Errorf("%s: %w", obj.GetName(), err)
			}
			names = append(names, obj.GetName())
		}
	}
	if !slices.Contains(names, "tlsroutes.gateway.networking.k8s.io") || !slices.Contains(names, "gateways.gateway.networking.k8s.io") {
		return fmt.Errorf("%s holds no Gateway or TLSRoute CRD (make devcluster copies them there)", crdDir)
	}
	deadline := time.Now().Add(time.Minute)
	for _, name := range names {
		for {
			crd, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err == nil && conditionTrue(crd, "Established") {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s not Established after 1m", name)
			}
			if err := pause(ctx, 100*time.Millisecond); err != nil {
				return err
			}
		}
	}
	return nil
}

// conditionTrue tells whether obj's status has condition typ with status True.
func conditionTrue(obj *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}

func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return errors.New("interrupted during start-up")
	case <-time.After(d):
		return nil
	}
}

// ensureGatewayCert returns the wildcard certificate (with its CA after it)
// and key for domain, made once per domain in DIR/gateway: ca.crt (what a
// client trusts), ca.key, tls.crt and tls.key.
func ensureGatewayCert(dir, domain string) (certPEM, keyPEM []byte, err error) {
	gd := gatewayDir(dir)
	if err := os.MkdirAll(gd, 0o700); err != nil {
		return nil, nil, err
	}
	caPath, caKeyPath := filepath.Join(gd, "ca.crt"), filepath.Join(gd, "ca.key")
	crtPath, keyPath := filepath.Join(gd, "tls.crt"), filepath.Join(gd, "tls.key")
	if leaf, err := readCertFile(crtPath); err == nil && slices.Equal(leaf.DNSNames, []string{"*." + domain, domain}) &&
		time.Now().Add(24*time.Hour).Before(leaf.NotAfter) && exists(keyPath) && exists(caPath) {
		crt, err1 := os.ReadFile(crtPath)
		key, err2 := os.ReadFile(keyPath)
		if err1 == nil && err2 == nil {
			return crt, key, nil
		}
	}
	now := time.Now()
	caKey, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:                sn,
		Subject:                     pkix.Name{CommonName: "kopc devcluster gateway CA for " + domain},
		NotBefore:                   now.Add(-time.Hour),
		NotAfter:                    now.AddDate(5, 0, 0),
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid:       true,
		IsCA:                        true,
		MaxPathLenZero:              true,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         []string{domain},
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, err
	}
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	if sn, err = serial(); err != nil {
		return nil, nil, err
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: "*." + domain},
		DNSNames:     []string{"*." + domain, domain},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = ecKeyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	caKeyPEM, err := ecKeyPEM(caKey)
	if err != nil {
		return nil, nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	certPEM = append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}), caPEM...)
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{caKeyPath, caKeyPEM, 0o600}, {keyPath, keyPEM, 0o600}, {caPath, caPEM, 0o644}, {crtPath, certPEM, 0o644}} {
		if err := os.WriteFile(f.path, f.data, f.mode); err != nil {
			return nil, nil, err
		}
	}
	return certPEM, keyPEM, nil
}

func ecKeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func readCertFile(path string) (*x509.Certificate, error) {
	der, err := readPEM(path)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

// applyGatewayObjects makes the namespace, the certificate's Secret, the
// GatewayClass and the Gateway, or brings them to what this start says.
func applyGatewayObjects(ctx context.Context, c *kubernetes.Clientset, dyn *dynamic.DynamicClient, domain string, certPEM, keyPEM []byte) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gatewayNamespace}}
	if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); create(err) != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: gatewaySecret, Namespace: gatewayNamespace},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
	}
	if _, err := c.CoreV1().Secrets(gatewayNamespace).Update(ctx, secret, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
		_, err = c.CoreV1().Secrets(gatewayNamespace).Create(ctx, secret, metav1.CreateOptions{})
		if create(err) != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	class := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1",
		"kind":       "GatewayClass",
		"metadata":   map[string]any{"name": gatewayClassName},
		"spec":       map[string]any{"controllerName": traefikController},
	}}
	if err := apply(ctx, dyn.Resource(gatewayClassGVR), class); err != nil {
		return fmt.Errorf("GatewayClass: %w", err)
	}
	tls := map[string]any{
		"mode":            "Terminate",
		"certificateRefs": []any{map[string]any{"group": "", "kind": "Secret", "name": gatewaySecret}},
	}
	listener := func(name, protocol, kind string) map[string]any {
		return map[string]any{
			"name":     name,
			"protocol": protocol,
			"port":     int64(gatewayPort),
			"hostname": "*." + domain,
			"tls":      tls,
			"allowedRoutes": map[string]any{
				"namespaces": map[string]any{"from": "All"},
				"kinds":      []any{map[string]any{"group": "gateway.networking.k8s.io", "kind": kind}},
			},
		}
	}
	gw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1",
		"kind":       "Gateway",
		"metadata":   map[string]any{"name": gatewayName, "namespace": gatewayNamespace},
		"spec": map[string]any{
			"gatewayClassName": gatewayClassName,
			"listeners":        []any{listener("tls", "TLS", "TLSRoute"), listener("https", "HTTPS", "HTTPRoute")},
		},
	}}
	if err := apply(ctx, dyn.Resource(gatewayGVR).Namespace(gatewayNamespace), gw); err != nil {
		return fmt.Errorf("Gateway: %w", err)
	}
	return nil
}

// pushTraefik pushes the Traefik image built beside the devcluster.
func pushTraefik(dir string, st state) error {
	bin, err := binPath("traefik")
	if err != nil {
		return err
	}
	_, err = pushImage(dir, st, imageSpec{
		name:       "traefik:" + traefikVersion,
		base:       "scratch",
		files:      []imageFile{{src: bin, dst: "/traefik", mode: 0o755}},
		entrypoint: []string{"/traefik"},
		user:       "65532:65532",
		workdir:    "/",
		ports:      []string{"443/tcp", "8080/tcp"},
	})
	return err
}

// traefikRole is what Traefik's Kubernetes Gateway provider reads and
// writes: the Gateway API objects and their status, and the Services,
// EndpointSlices, Secrets (certificates), ConfigMaps (CA bundles of
// BackendTLSPolicies) and Namespaces the routes name.
var traefikRole = &rbacv1.ClusterRole{
	ObjectMeta: metav1.ObjectMeta{Name: "devcluster:traefik"},
	Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces", "services", "secrets", "configmaps"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"gateway.networking.k8s.io"}, Resources: []string{"gatewayclasses", "gateways", "httproutes", "grpcroutes", "tcproutes", "tlsroutes", "referencegrants", "backendtlspolicies"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"gateway.networking.k8s.io"}, Resources: []string{"gatewayclasses/status", "gateways/status", "httproutes/status", "grpcroutes/status", "tcproutes/status", "tlsroutes/status", "backendtlspolicies/status"}, Verbs: []string{"update", "patch"}},
	},
}

func traefikArgs() []string {
	return []string{
		"--entryPoints.websecure.address=:" + strconv.Itoa(gatewayPort),
		"--entryPoints.traefik.address=:8080",
		"--ping=true",
		"--providers.kubernetesGateway=true",
		"--providers.kubernetesGateway.experimentalChannel=true",
		"--providers.kubernetesGateway.statusAddress.ip=127.0.0.1",
		"--global.checkNewVersion=false",
		"--global.sendAnonymousUsage=false",
		"--log.level=INFO",
		"--log.noColor=true",
	}
}

// applyTraefik creates (or keeps) Traefik's role, account, Deployment and Service.
func applyTraefik(ctx context.Context, c *kubernetes.Clientset) error {
	labels := map[string]string{"app.kubernetes.io/name": "traefik"}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "devcluster:traefik"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: traefikRole.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "traefik", Namespace: gatewayNamespace}},
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "traefik", Namespace: gatewayNamespace}}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "traefik", Namespace: gatewayNamespace, Labels: labels},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "websecure", Port: gatewayPort, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(gatewayPort)}},
		},
	}
	steps := []func() error{
		func() error {
			_, err := c.RbacV1().ClusterRoles().Update(ctx, traefikRole, metav1.UpdateOptions{})
			if apierrors.IsNotFound(err) {
				_, err = c.RbacV1().ClusterRoles().Create(ctx, traefikRole, metav1.CreateOptions{})
			}
			return create(err)
		},
		func() error {
			_, err := c.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
			return create(err)
		},
		func() error {
			_, err := c.CoreV1().ServiceAccounts(gatewayNamespace).Create(ctx, sa, metav1.CreateOptions{})
			return create(err)
		},
		func() error {
			_, err := c.CoreV1().Services(gatewayNamespace).Create(ctx, svc, metav1.CreateOptions{})
			return create(err)
		},
		func() error {
			d := traefikDeployment(labels)
			_, err := c.AppsV1().Deployments(gatewayNamespace).Update(ctx, d, metav1.UpdateOptions{})
			if apierrors.IsNotFound(err) {
				_, err = c.AppsV1().Deployments(gatewayNamespace).Create(ctx, d, metav1.CreateOptions{})
			}
			return create(err)
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// traefikDeployment runs one unprivileged Traefik on a real node: port 443
// is allowed by the pod's own ip_unprivileged_port_start sysctl, as CoreDNS's
// port 53 is; /ping on the "traefik" entry point is its readiness.
func traefikDeployment(labels map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "traefik", Namespace: gatewayNamespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: "traefik",
					NodeSelector:       map[string]string{"devcluster.kopc.dev/node": "real"},
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To[int64](65532),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
						Sysctls:        []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: strconv.Itoa(gatewayPort)}},
					},
					Containers: []corev1.Container{{
						Name:  "traefik",
						Image: traefikImage(),
						Args:  traefikArgs(),
						Ports: []corev1.ContainerPort{
							{Name: "websecure", ContainerPort: gatewayPort, Protocol: corev1.ProtocolTCP},
							{Name: "traefik", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
						},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ping", Port: intstr.FromInt32(8080)}},
							PeriodSeconds: 1,
						},
						LivenessProbe: &corev1.Probe{
							ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ping", Port: intstr.FromInt32(8080)}},
							InitialDelaySeconds: 30,
						},
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
				},
			},
		},
	}
}

// waitGateway waits until Traefik is Ready and has marked the Gateway
// Programmed, or a component fails, or a pod cannot get better.
func waitGateway(ctx context.Context, c *kubernetes.Clientset, dyn *dynamic.DynamicClient, comps []component) error {
	deadline := time.Now().Add(3 * time.Minute)
	why := "not started"
	for time.Now().Before(deadline) {
		if err := componentFailed(comps); err != nil {
			return err
		}
		d, err := c.AppsV1().Deployments(gatewayNamespace).Get(ctx, "traefik", metav1.GetOptions{})
		switch {
		case err != nil:
			why = err.Error()
		case d.Status.ReadyReplicas < 1 || d.Status.ObservedGeneration < d.Generation:
			if why, err = podProblem(ctx, c, gatewayNamespace, "app.kubernetes.io/name=traefik"); err != nil {
				return fmt.Errorf("traefik: %w", err)
			}
		default:
			gw, err := dyn.Resource(gatewayGVR).Namespace(gatewayNamespace).Get(ctx, gatewayName, metav1.GetOptions{})
			if err == nil && conditionTrue(gw, "Programmed") {
				return nil
			}
			why = "Traefik is Ready, the Gateway not yet Programmed"
			if err == nil {
				if conds, _, _ := unstructured.NestedSlice(gw.Object, "status", "conditions"); len(conds) > 0 {
					b, _ := json.Marshal(conds)
					why += ": " + string(b)
				}
			}
		}
		if err := pause(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("gateway not Programmed after 3m: %s", why)
}

// gatewayBackends finds the ready Traefik pods' addresses, and remembers
// them for a second, so that a burst of connections asks the apiserver once.
type gatewayBackends struct {
	c    *kubernetes.Clientset
	mu   sync.Mutex
	at   time.Time
	addr []string
}

func (b *gatewayBackends) get(ctx context.Context, fresh bool) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !fresh && len(b.addr) > 0 && time.Since(b.at) < time.Second {
		return b.addr, nil
	}
	list, err := b.c.DiscoveryV1().EndpointSlices(gatewayNamespace).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=traefik"})
	if err != nil {
		return nil, err
	}
	var addr []string
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				addr = append(addr, net.JoinHostPort(a, strconv.Itoa(gatewayPort)))
			}
		}
	}
	b.addr, b.at = addr, time.Now()
	if len(addr) == 0 {
		return nil, errors.New("no ready Traefik pod")
	}
	return addr, nil
}

// startGatewayForwarder listens on 127.0.0.1:port and copies each
// connection to and from a ready Traefik pod's port 443, byte for byte (the
// TLS stays end to end). It stops when ctx ends.
func startGatewayForwarder(ctx context.Context, c *kubernetes.Clientset, port int) (component, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return component{}, fmt.Errorf("gateway forwarder: %w", err)
	}
	b := &gatewayBackends{c: c}
	return goComponent("gateway forwarder", func() error {
		go func() { <-ctx.Done(); ln.Close() }()
		for {
			conn, err := ln.Accept()
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					continue
				}
				return err
			}
			go forward(ctx, b, conn)
		}
	}), nil
}

// forward connects conn to a Traefik pod (asking afresh when the cached one
// does not answer) and copies both ways until either side closes.
func forward(ctx context.Context, b *gatewayBackends, conn net.Conn) {
	defer conn.Close()
	var up net.Conn
	for _, fresh := range []bool{false, true} {
		addr, err := b.get(ctx, fresh)
		if err != nil {
			klog.V(2).Infof("gateway forwarder: %v", err)
			continue
		}
		d := net.Dialer{Timeout: 3 * time.Second}
		if up, err = d.DialContext(ctx, "tcp", addr[0]); err == nil {
			break
		}
	}
	if up == nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, conn)
	go pipe(conn, up)
	<-done
	<-done
}
