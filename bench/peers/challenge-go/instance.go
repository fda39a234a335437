package main

// The objects of one instance, built as typed server-side apply
// configurations: the same objects, names and labels as ctf-operator's
// ctf_build_children (docs/ctf-resources.md) for what the benchmark's
// definition uses: pods, NodePort exposures (TCP or HTTP without an
// ingress domain), a static flag.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	netv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
)

const (
	labelManagedBy   = "app.kubernetes.io/managed-by"
	managedBy        = "kopc-ctf"
	labelTeam        = "ctf.kopc.io/team"
	labelDefinition  = "ctf.kopc.io/definition"
	labelChallenge   = "ctf.kopc.io/challenge"
	labelChallengeNS = "ctf.kopc.io/challenge-namespace"
	labelPod         = "ctf.kopc.io/pod"
	annotationUID    = "ctf.kopc.io/challenge-uid"
	flagSecret       = "flag"
)

// instanceNamespace is ctf-<definition, sanitized, <= 30>-<12 hex of SHA-256>.
func instanceNamespace(challengeNS, definition, team string) string {
	var part []byte
	for i := 0; i < len(definition) && len(part) < 30; i++ {
		c := definition[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') {
			part = append(part, c)
		} else if len(part) > 0 && part[len(part)-1] != '-' {
			part = append(part, '-')
		}
	}
	p := strings.TrimRight(string(part), "-")
	h := sha256.New()
	for _, s := range []string{challengeNS, definition, team} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	sum := hex.EncodeToString(h.Sum(nil))[:12]
	if p == "" {
		return "ctf-" + sum
	}
	return "ctf-" + p + "-" + sum
}

func instanceLabels(chal *Challenge, pod string) map[string]string {
	l := map[string]string{
		labelManagedBy: managedBy, labelTeam: chal.Spec.Team,
		labelDefinition: chal.Spec.Definition, labelChallenge: chal.Name,
		labelChallengeNS: chal.Namespace,
	}
	if pod != "" {
		l[labelPod] = pod
	}
	return l
}

// hardenPodSpec applies the operator's hardening to a copy of the template.
func hardenPodSpec(spec *corev1.PodSpec, sec *Security, withFlag bool) {
	f, t := false, true
	spec.HostNetwork, spec.HostPID, spec.HostIPC = false, false, false
	spec.AutomountServiceAccountToken = &f
	spec.EnableServiceLinks = &f
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	spec.SecurityContext.RunAsNonRoot = &t
	if p := spec.SecurityContext.SeccompProfile; p == nil ||
		(p.Type != corev1.SeccompProfileTypeRuntimeDefault && p.Type != corev1.SeccompProfileTypeLocalhost) {
		spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	}
	readOnly := sec != nil && sec.ReadOnlyRootFilesystem
	if sec != nil && sec.RuntimeClassName != "" {
		rc := sec.RuntimeClassName
		spec.RuntimeClassName = &rc
	}
	harden := func(c *corev1.Container) {
		if c.SecurityContext == nil {
			c.SecurityContext = &corev1.SecurityContext{}
		}
		sc := c.SecurityContext
		bind := false
		if sc.Capabilities != nil {
			for _, a := range sc.Capabilities.Add {
				bind = bind || a == "NET_BIND_SERVICE"
			}
		}
		sc.Capabilities = &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
		if bind {
			sc.Capabilities.Add = []corev1.Capability{"NET_BIND_SERVICE"}
		}
		sc.AllowPrivilegeEscalation, sc.Privileged, sc.RunAsNonRoot = &f, &f, &t
		if p := sc.SeccompProfile; p != nil && p.Type != corev1.SeccompProfileTypeRuntimeDefault &&
			p.Type != corev1.SeccompProfileTypeLocalhost {
			sc.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
		}
		if readOnly {
			sc.ReadOnlyRootFilesystem = &t
		}
		if len(c.Resources.Requests) == 0 && len(c.Resources.Limits) == 0 {
			c.Resources.Requests = corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
			c.Resources.Limits = corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")}
		}
		if withFlag {
			env := []corev1.EnvVar{{Name: "FLAG", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: flagSecret}, Key: "flag"}}}}
			for _, e := range c.Env {
				if e.Name != "FLAG" {
					env = append(env, e)
				}
			}
			c.Env = env
			var mounts []corev1.VolumeMount
			for _, m := range c.VolumeMounts {
				if m.Name != flagSecret {
					mounts = append(mounts, m)
				}
			}
			c.VolumeMounts = append(mounts, corev1.VolumeMount{Name: flagSecret, MountPath: "/flag", ReadOnly: true})
		}
	}
	for i := range spec.InitContainers {
		harden(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		harden(&spec.Containers[i])
	}
	if withFlag {
		mode := int32(0o444)
		var vols []corev1.Volume
		for _, v := range spec.Volumes {
			if v.Name != flagSecret {
				vols = append(vols, v)
			}
		}
		spec.Volumes = append(vols, corev1.Volume{Name: flagSecret, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: flagSecret, DefaultMode: &mode,
				Items: []corev1.KeyToPath{{Key: "flag", Path: "flag"}}}}})
	}
}

func quantity(def *ChallengeDefinition, key, dflt string) resource.Quantity {
	if v, ok := def.Spec.Resources[key]; ok {
		if q, err := resource.ParseQuantity(v.String()); err == nil {
			return q
		}
	}
	return resource.MustParse(dflt)
}

// children returns the instance's objects in apply order.
func children(def *ChallengeDefinition, chal *Challenge, ns, flag string) ([]runtime.ApplyConfiguration, error) {
	labels := instanceLabels(chal, "")
	var out []runtime.ApplyConfiguration

	nsLabels := instanceLabels(chal, "")
	nsLabels["pod-security.kubernetes.io/enforce"] = "restricted"
	nsLabels["pod-security.kubernetes.io/enforce-version"] = "latest"
	nsAC := corev1ac.Namespace(ns).WithLabels(nsLabels)
	if chal.UID != "" {
		nsAC.WithAnnotations(map[string]string{annotationUID: string(chal.UID)})
	}
	out = append(out, nsAC)
	if flag != "" {
		out = append(out, corev1ac.Secret(flagSecret, ns).WithLabels(labels).
			WithType(corev1.SecretTypeOpaque).WithData(map[string][]byte{"flag": []byte(flag)}))
	}
	cpu, mem := quantity(def, "cpu", "1"), quantity(def, "memory", "1Gi")
	out = append(out, corev1ac.ResourceQuota("instance", ns).WithLabels(labels).WithSpec(
		corev1ac.ResourceQuotaSpec().WithHard(corev1.ResourceList{
			"limits.cpu": cpu, "limits.memory": mem, "requests.cpu": cpu, "requests.memory": mem,
			"pods": resource.MustParse("20"), "services": resource.MustParse("10"),
			"services.nodeports": resource.MustParse("10"), "secrets": resource.MustParse("10"),
			"configmaps": resource.MustParse("10"), "persistentvolumeclaims": resource.MustParse("0"),
		})))
	out = append(out, corev1ac.LimitRange("defaults", ns).WithLabels(labels).WithSpec(
		corev1ac.LimitRangeSpec().WithLimits(corev1ac.LimitRangeItem().WithType(corev1.LimitTypeContainer).
			WithDefault(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"),
				corev1.ResourceMemory: resource.MustParse("256Mi")}).
			WithDefaultRequest(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"),
				corev1.ResourceMemory: resource.MustParse("64Mi")}))))

	// NetworkPolicies: default-deny, one allow-exposed per exposed pod,
	// allow-same-instance, allow-dns.
	policy := func(name string) *netv1ac.NetworkPolicyApplyConfiguration {
		return netv1ac.NetworkPolicy(name, ns).WithLabels(labels)
	}
	out = append(out, policy("default-deny").WithSpec(netv1ac.NetworkPolicySpec().
		WithPodSelector(metav1ac.LabelSelector()).WithPolicyTypes("Ingress", "Egress")))
	seen := map[string]bool{}
	for _, e := range def.Spec.Expose {
		if seen[e.Pod] {
			continue
		}
		seen[e.Pod] = true
		var ports []*netv1ac.NetworkPolicyPortApplyConfiguration
		have := map[int32]bool{}
		for _, x := range def.Spec.Expose {
			if x.Pod == e.Pod && !have[x.Port] {
				have[x.Port] = true
				ports = append(ports, netv1ac.NetworkPolicyPort().WithProtocol(corev1.ProtocolTCP).
					WithPort(intstr.FromInt32(x.Port)))
			}
		}
		out = append(out, policy("allow-exposed-"+e.Pod).WithSpec(netv1ac.NetworkPolicySpec().
			WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{labelPod: e.Pod})).
			WithPolicyTypes("Ingress").
			WithIngress(netv1ac.NetworkPolicyIngressRule().WithPorts(ports...))))
	}
	out = append(out, policy("allow-same-instance").WithSpec(netv1ac.NetworkPolicySpec().
		WithPodSelector(metav1ac.LabelSelector()).WithPolicyTypes("Ingress", "Egress").
		WithIngress(netv1ac.NetworkPolicyIngressRule().WithFrom(
			netv1ac.NetworkPolicyPeer().WithPodSelector(metav1ac.LabelSelector()))).
		WithEgress(netv1ac.NetworkPolicyEgressRule().WithTo(
			netv1ac.NetworkPolicyPeer().WithPodSelector(metav1ac.LabelSelector())))))
	out = append(out, policy("allow-dns").WithSpec(netv1ac.NetworkPolicySpec().
		WithPodSelector(metav1ac.LabelSelector()).WithPolicyTypes("Egress").
		WithEgress(netv1ac.NetworkPolicyEgressRule().
			WithTo(netv1ac.NetworkPolicyPeer().WithNamespaceSelector(metav1ac.LabelSelector().
				WithMatchLabels(map[string]string{"kubernetes.io/metadata.name": "kube-system"}))).
			WithPorts(netv1ac.NetworkPolicyPort().WithProtocol(corev1.ProtocolUDP).WithPort(intstr.FromInt32(53)),
				netv1ac.NetworkPolicyPort().WithProtocol(corev1.ProtocolTCP).WithPort(intstr.FromInt32(53))))))
	if def.Spec.Network != nil && def.Spec.Network.Egress == "Internet" {
		return nil, fmt.Errorf("egress Internet is not implemented by this peer")
	}

	for _, p := range def.Spec.Pods {
		spec := p.Template.DeepCopy()
		hardenPodSpec(spec, def.Spec.Security, flag != "")
		// The typed, hardened spec as an apply configuration (same JSON).
		raw, err := json.Marshal(spec)
		if err != nil {
			return nil, err
		}
		podAC := corev1ac.PodSpec()
		if err := json.Unmarshal(raw, podAC); err != nil {
			return nil, err
		}
		replicas := int32(1)
		if p.Replicas != nil {
			replicas = *p.Replicas
		}
		out = append(out, appsv1ac.Deployment(p.Name, ns).WithLabels(instanceLabels(chal, p.Name)).
			WithSpec(appsv1ac.DeploymentSpec().WithReplicas(replicas).
				WithSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{labelPod: p.Name})).
				WithTemplate(corev1ac.PodTemplateSpec().WithLabels(instanceLabels(chal, p.Name)).
					WithSpec(podAC))))
	}
	exposed := map[string]bool{}
	for _, e := range def.Spec.Expose {
		exposed[e.Name] = true
	}
	for _, e := range def.Spec.Expose {
		portName := e.Name
		if len(portName) > 15 {
			portName = map[bool]string{true: "http", false: "tcp"}[e.Type == "HTTP"]
		}
		out = append(out, corev1ac.Service(e.Name, ns).WithLabels(labels).WithSpec(
			corev1ac.ServiceSpec().WithType(corev1.ServiceTypeNodePort).
				WithSelector(map[string]string{labelPod: e.Pod}).
				WithPorts(corev1ac.ServicePort().WithName(portName).WithProtocol(corev1.ProtocolTCP).
					WithPort(e.Port).WithTargetPort(intstr.FromInt32(e.Port)))))
	}
	// Each pod's ClusterIP Service (its declared ports), so the pods of an
	// instance reach each other by name, unless an exposure has its name: as
	// instance.c's pod_service_object.
	for _, p := range def.Spec.Pods {
		if exposed[p.Name] {
			continue
		}
		var ports []*corev1ac.ServicePortApplyConfiguration
		seen := map[string]bool{}
		for _, c := range p.Template.Containers {
			for _, cp := range c.Ports {
				proto := cp.Protocol
				if proto == "" {
					proto = corev1.ProtocolTCP
				}
				key := fmt.Sprintf("%s-%d", strings.ToLower(string(proto)), cp.ContainerPort)
				if seen[key] || cp.ContainerPort <= 0 || cp.ContainerPort > 65535 {
					continue
				}
				seen[key] = true
				ports = append(ports, corev1ac.ServicePort().WithName(key).WithProtocol(proto).
					WithPort(cp.ContainerPort).WithTargetPort(intstr.FromInt32(cp.ContainerPort)))
			}
		}
		if len(ports) == 0 {
			continue
		}
		out = append(out, corev1ac.Service(p.Name, ns).WithLabels(labels).WithSpec(
			corev1ac.ServiceSpec().WithType(corev1.ServiceTypeClusterIP).
				WithSelector(map[string]string{labelPod: p.Name}).WithPorts(ports...)))
	}
	return out, nil
}
