// nodes.go: fake nodes. KWOK's controllers play the kubelet for every Node
// object: they mark nodes Ready, renew their leases (without heartbeats the
// node lifecycle controller would taint them unreachable) and move pods
// bound to them to Running and Ready, or through deletion. The devcluster
// registers the Node objects itself, as kwokctl does.
package main

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
	"sigs.k8s.io/kwok/pkg/apis/internalversion"
	"sigs.k8s.io/kwok/pkg/config"
	"sigs.k8s.io/kwok/pkg/kwok/controllers"
	"sigs.k8s.io/kwok/pkg/utils/client"
)

func nodeName(i int) string { return fmt.Sprintf("kwok-node-%d", i) }

// devcluster's own stages, for testing operators' error handling and what a
// user sees while an instance starts: images whose reference contains
// "kwok-image-pull-fails", "kwok-crashloop" or "kwok-slow-start".
var (
	//go:embed stages/pod-image-pull-fails.yaml
	stageImagePullFails string
	//go:embed stages/pod-crashloop.yaml
	stageCrashLoop string
	//go:embed stages/pod-slow-start.yaml
	stageSlowStart string
)

// kwokStages are the lifecycles KWOK plays: nodes come up at once and renew
// a lease; pods become ready at once, complete when their containers would,
// and go away when deleted; two failures operators must handle (an image
// that cannot be pulled, a container that crash-loops) and a pod that takes
// 6 s to become Ready, chosen by image name.
func kwokStages() (map[internalversion.StageResourceRef][]*internalversion.Stage, error) {
	groups := map[internalversion.StageResourceRef][]*internalversion.Stage{}
	for _, raw := range []string{
		nodefast.DefaultNodeInit,
		nodeheartbeat.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
		stageImagePullFails,
		stageCrashLoop,
		stageSlowStart,
	} {
		stage, err := config.UnmarshalWithType[*internalversion.Stage](raw)
		if err != nil {
			return nil, err
		}
		ref := stage.Spec.ResourceRef
		groups[ref] = append(groups[ref], stage)
	}
	return groups, nil
}

func startKWOK(ctx context.Context, p pki) (component, error) {
	stages, err := kwokStages()
	if err != nil {
		return component{}, fmt.Errorf("kwok stages: %w", err)
	}
	cs, err := client.NewClientset("", p.path("kwok.kubeconfig"))
	if err != nil {
		return component{}, err
	}
	restConfig, err := cs.ToRESTConfig()
	if err != nil {
		return component{}, err
	}
	restConfig.QPS, restConfig.Burst = 500, 1000
	dynamicClient, err := cs.ToDynamicClient()
	if err != nil {
		return component{}, err
	}
	restMapper, err := cs.ToRESTMapper()
	if err != nil {
		return component{}, err
	}
	restClient, err := rest.RESTClientFor(restConfig)
	if err != nil {
		return component{}, err
	}
	typedClient, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return component{}, err
	}
	id, err := controllers.Identity()
	if err != nil {
		return component{}, err
	}
	ctr, err := controllers.NewController(controllers.Config{
		Clock:                      clock.RealClock{},
		DynamicClient:              dynamicClient,
		RESTClient:                 restClient,
		RESTMapper:                 restMapper,
		ImpersonatingDynamicClient: cs.ToImpersonatingDynamicClient(),
		ImpersonatingTypedClient:   cs.ToImpersonatingTypedClient(),
		TypedClient:                typedClient,
		// Only the fake nodes: pods on real nodes are the kubelet's.
		ManageNodesWithAnnotationSelector: "kwok.x-k8s.io/node=fake",
		CIDR:                              "10.244.0.0/16",
		NodeIP:                            "127.0.0.1",
		LocalStages:                       stages,
		PodPlayStageParallelism:           8,
		NodePlayStageParallelism:          4,
		NodeLeaseParallelism:              4,
		NodeLeaseDurationSeconds:          40,
		PodsOnNodeSyncParallelism:         4,
		ID:                                id,
	})
	if err != nil {
		return component{}, fmt.Errorf("kwok: %w", err)
	}
	if err := ctr.Start(ctx); err != nil {
		return component{}, fmt.Errorf("kwok: %w", err)
	}
	return goComponent("kwok", func() error { <-ctx.Done(); return nil }), nil
}

// fakeNodeTaint keeps ordinary pods off fake nodes in a cluster that also
// has real ones: a pod lands on a fake node only if it tolerates this (scale
// tests do), so what needs to run, runs.
var fakeNodeTaint = corev1.Taint{Key: "kwok.x-k8s.io/node", Value: "fake", Effect: corev1.TaintEffectNoSchedule}

// ensureNodes registers nodes kwok-node-0..n-1; existing ones are kept,
// with fakeNodeTaint added or removed as tainted says.
func ensureNodes(ctx context.Context, c *kubernetes.Clientset, n int, tainted bool) error {
	for i := 0; i < n; i++ {
		name := nodeName(i)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				"type":                   "kwok",
			},
			Annotations: map[string]string{
				"kwok.x-k8s.io/node":           "fake",
				"node.alpha.kubernetes.io/ttl": "0",
			},
		}}
		if tainted {
			node.Spec.Taints = []corev1.Taint{fakeNodeTaint}
		}
		_, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = setFakeTaint(ctx, c, name, tainted)
		}
		if err != nil {
			return fmt.Errorf("node %s: %w", name, err)
		}
	}
	return nil
}

// setFakeTaint adds or removes fakeNodeTaint on an existing node.
func setFakeTaint(ctx context.Context, c *kubernetes.Clientset, name string, tainted bool) error {
	node, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	var taints []corev1.Taint
	has := false
	for _, t := range node.Spec.Taints {
		if t.Key == fakeNodeTaint.Key && t.Effect == fakeNodeTaint.Effect {
			has = true
			if !tainted {
				continue
			}
		}
		taints = append(taints, t)
	}
	if has == tainted {
		return nil
	}
	if tainted {
		taints = append(taints, fakeNodeTaint)
	}
	node.Spec.Taints = taints
	_, err = c.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	return err
}

// waitClusterReady waits until n nodes are Ready and the default namespace
// has its service account, so that the first pod a user creates can run.
func waitClusterReady(ctx context.Context, c *kubernetes.Clientset, n int, comps []component) error {
	deadline := time.Now().Add(3 * time.Minute)
	why := "starting"
	for time.Now().Before(deadline) {
		if err := componentFailed(comps); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted during start-up")
		case <-time.After(250 * time.Millisecond):
		}
		ready, err := readyNodes(ctx, c)
		if err != nil {
			why = err.Error()
			continue
		}
		if ready < n {
			why = fmt.Sprintf("%d of %d nodes Ready", ready, n)
			continue
		}
		if _, err := c.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			why = "default service account: " + err.Error()
			continue
		}
		return nil
	}
	return fmt.Errorf("cluster not ready after 3m: %s", why)
}

func readyNodes(ctx context.Context, c *kubernetes.Clientset) (int, error) {
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	ready := 0
	for _, node := range nodes.Items {
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	return ready, nil
}
