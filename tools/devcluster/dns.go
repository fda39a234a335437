// dns.go: cluster DNS for pods on real nodes.
//
// CoreDNS, built from its module (tools/coredns) and pushed as an image the
// way the pause image is, runs as a Deployment in kube-system behind the
// Service kube-dns at clusterDNSIP, the address every kubelet hands its
// pods. It serves cluster.local from the apiserver (the kubernetes plugin)
// and nothing else: there is no upstream, since nothing off the machine is
// reachable. It runs unprivileged: no capabilities, a read-only root, port
// 53 allowed by the pod's own ip_unprivileged_port_start sysctl, so that
// NetworkPolicies that allow DNS by port 53 (the CTF operator's allow-dns)
// match the pod's real port.
package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

const (
	clusterDNSIP   = "10.96.0.10"
	corednsVersion = "1.15.0" // tools/coredns/go.mod
)

func corednsImage() string { return registryHost + "/coredns:" + corednsVersion }

const corefile = `.:53 {
    errors
    health :8080
    ready :8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    cache 30
}
`

// pushCoreDNS pushes the CoreDNS image built beside the devcluster.
func pushCoreDNS(dir string, st state) error {
	bin, err := binPath("coredns")
	if err != nil {
		return err
	}
	_, err = pushImage(dir, st, imageSpec{
		name:       "coredns:" + corednsVersion,
		base:       "scratch",
		files:      []imageFile{{src: bin, dst: "/coredns", mode: 0o755}},
		entrypoint: []string{"/coredns"},
		user:       "65532:65532",
		workdir:    "/",
		ports:      []string{"53/udp", "53/tcp"},
	})
	return err
}

// startClusterDNS creates (or keeps) CoreDNS's objects and waits until it
// answers (Ready), or a component fails.
func startClusterDNS(ctx context.Context, c *kubernetes.Clientset, comps []component) error {
	if err := applyCoreDNS(ctx, c); err != nil {
		return fmt.Errorf("coredns: %w", err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	why := "not started"
	for time.Now().Before(deadline) {
		if err := componentFailed(comps); err != nil {
			return err
		}
		d, err := c.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		if err == nil && d.Status.ReadyReplicas >= 1 && d.Status.ObservedGeneration >= d.Generation {
			return nil
		}
		if err != nil {
			why = err.Error()
		} else if why, err = podProblem(ctx, c, "kube-system", "k8s-app=kube-dns"); err != nil {
			return fmt.Errorf("coredns: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted during start-up")
		case <-time.After(250 * time.Millisecond):
		}
	}
	return fmt.Errorf("coredns not Ready after 3m: %s", why)
}

// podProblem describes why the pod of a system Deployment (CoreDNS's,
// Traefik's), found in ns by selector, is not Ready yet; a pod that cannot
// get better on its own (its image cannot be pulled, its container keeps
// crashing) is an error, with the container's last words.
func podProblem(ctx context.Context, c *kubernetes.Clientset, ns, selector string) (string, error) {
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil || len(pods.Items) == 0 {
		return "no pod yet", nil
	}
	p := pods.Items[0]
	for _, s := range p.Status.ContainerStatuses {
		w := s.State.Waiting
		if w == nil {
			continue
		}
		why := fmt.Sprintf("pod %s: %s: %s", p.Name, w.Reason, w.Message)
		switch w.Reason {
		case "CrashLoopBackOff":
			if t := s.LastTerminationState.Terminated; t != nil {
				why += fmt.Sprintf(" (last exit %d: %s)", t.ExitCode, t.Message)
			}
			return why, errors.New(why)
		case "ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError":
			return why, errors.New(why)
		}
		return why, nil
	}
	return fmt.Sprintf("pod %s is %s", p.Name, p.Status.Phase), nil
}

func componentFailed(comps []component) error {
	for _, comp := range comps {
		select {
		case err := <-comp.done:
			comp.done <- err
			if err == nil {
				err = fmt.Errorf("%s exited during start-up", comp.name)
			}
			return err
		default:
		}
	}
	return nil
}

// create makes an object, leaving an existing one as it is (a restart
// keeps the cluster's DNS as it was).
func create(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func applyCoreDNS(ctx context.Context, c *kubernetes.Clientset) error {
	labels := map[string]string{"k8s-app": "kube-dns"}
	ns := "kube-system"
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "devcluster:coredns"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "devcluster:coredns"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "coredns", Namespace: ns}},
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: ns}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: ns},
		Data: map[string]string{"Corefile": corefile}}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: ns, Labels: labels},
		Spec: corev1.ServiceSpec{
			ClusterIP: clusterDNSIP,
			Selector:  labels,
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
			},
		},
	}
	steps := []func() error{
		func() error {
			_, err := c.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
			return create(err)
		},
		func() error {
			_, err := c.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
			return create(err)
		},
		func() error {
			_, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{})
			return create(err)
		},
		func() error {
			_, err := c.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
			return create(err)
		},
		func() error {
			// Its fixed ClusterIP would be refused as taken before the name as
			// existing, so look first.
			if _, err := c.CoreV1().Services(ns).Get(ctx, svc.Name, metav1.GetOptions{}); err == nil {
				return nil
			}
			_, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
			return create(err)
		},
		func() error {
			_, err := c.AppsV1().Deployments(ns).Create(ctx, corednsDeployment(labels), metav1.CreateOptions{})
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

func corednsDeployment(labels map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: "kube-system", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: "coredns",
					NodeSelector:       map[string]string{"devcluster.kopc.dev/node": "real"},
					DNSPolicy:          corev1.DNSDefault,
					PriorityClassName:  "system-cluster-critical",
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To[int64](65532),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
						Sysctls:        []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "53"}},
					},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "coredns"}}}}},
					Containers: []corev1.Container{{
						Name:         "coredns",
						Image:        corednsImage(),
						Args:         []string{"-conf", "/etc/coredns/Corefile"},
						VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
						Ports: []corev1.ContainerPort{
							{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
							{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
						},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8181)}},
							PeriodSeconds: 1,
						},
						LivenessProbe: &corev1.Probe{
							ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8080)}},
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
