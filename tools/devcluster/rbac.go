// rbac.go: the roles the devcluster's own node components need beyond
// Kubernetes' bootstrap policy.
package main

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// kubeRouterRole is what kube-router's network-policy controller reads: it
// watches pods, namespaces, policies and (through its shared informers)
// nodes, services and endpoints; it writes nothing but Events.
var kubeRouterRole = &rbacv1.ClusterRole{
	ObjectMeta: metav1.ObjectMeta{Name: "devcluster:kube-router"},
	Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "namespaces", "nodes", "services", "endpoints"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	},
}

// ensureNodeRBAC creates kube-router's ClusterRole and binds it to the
// identity pki.go gives it; existing objects are left as they are.
func ensureNodeRBAC(ctx context.Context, c *kubernetes.Clientset) error {
	_, err := c.RbacV1().ClusterRoles().Create(ctx, kubeRouterRole, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kube-router role: %w", err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "devcluster:kube-router"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: kubeRouterRole.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "system:kube-router"}},
	}
	_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kube-router role binding: %w", err)
	}
	return nil
}
