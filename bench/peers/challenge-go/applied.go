// What each instance was last applied as, so that a pass that would apply the
// same children again writes nothing: the same decisions as
// operators/ctf/applied.c, so that both operators make the same writes.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	appliedLag    = 10 * time.Second // how long the cache may lag behind an apply
	appliedResync = 10 * time.Minute // every child applied again at least this often
)

type verdict int

const (
	apply verdict = iota
	skipApply
	waitApply
)

type appliedRecord struct {
	digest      [32]byte
	generations int64
	at          time.Time
}

type appliedTable struct {
	mu      sync.Mutex
	records map[types.UID]appliedRecord
}

func digestOf(objs []runtime.ApplyConfiguration) ([32]byte, bool) {
	raw, err := json.Marshal(objs)
	if err != nil {
		return [32]byte{}, false
	}
	return sha256.Sum256(raw), true
}

// seen counts the children missing from the cache (or being deleted) and sums
// the cached Deployments' generations.
func (r *Reconciler) seen(ctx context.Context, objs []runtime.ApplyConfiguration) (missing int, gens int64) {
	present := func(key types.NamespacedName, obj client.Object) bool {
		return r.Get(ctx, key, obj) == nil && obj.GetDeletionTimestamp().IsZero()
	}
	for _, obj := range objs {
		switch ac := obj.(type) {
		case *corev1ac.NamespaceApplyConfiguration:
			if !present(types.NamespacedName{Name: *ac.Name}, &corev1.Namespace{}) {
				missing++
			}
		case *corev1ac.ServiceApplyConfiguration:
			if !present(types.NamespacedName{Namespace: *ac.Namespace, Name: *ac.Name}, &corev1.Service{}) {
				missing++
			}
		case *appsv1ac.DeploymentApplyConfiguration:
			var d appsv1.Deployment
			if present(types.NamespacedName{Namespace: *ac.Namespace, Name: *ac.Name}, &d) {
				gens += d.Generation
			} else {
				missing++
			}
		}
	}
	return missing, gens
}

func (t *appliedTable) decide(uid types.UID, digest [32]byte, missing int, gens int64, now time.Time) (verdict, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rec, ok := t.records[uid]
	age := now.Sub(rec.at)
	switch {
	case !ok || rec.digest != digest || age < 0 || age >= appliedResync:
		return apply, 0
	case missing == 0 && gens == rec.generations:
		return skipApply, 0
	case gens <= rec.generations && age < appliedLag:
		return waitApply, appliedLag - age
	}
	return apply, 0
}

func (t *appliedTable) record(uid types.UID, digest [32]byte, gens int64, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.records[uid] = appliedRecord{digest: digest, generations: gens, at: now}
}

func (t *appliedTable) forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.records, uid)
}

// appliedGenerations sums the Deployments' generations the apply answers gave.
func appliedGenerations(objs []runtime.ApplyConfiguration) int64 {
	var gens int64
	for _, obj := range objs {
		if d, ok := obj.(*appsv1ac.DeploymentApplyConfiguration); ok && d.Generation != nil {
			gens += *d.Generation
		}
	}
	return gens
}
