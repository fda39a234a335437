// admission_test.go: the Go peer's admission counts as kopc's
// operators/ctf/admission.c does: a team's quota, the total, a Challenge
// admitted once however often it is asked about, and the informer's events
// (a Challenge shown admitted enters, one being deleted or deleted leaves).
package main

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

func chal(uid, team string) *Challenge {
	return &Challenge{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ctf", UID: types.UID(uid)},
		Spec: ChallengeSpec{Definition: "bench", Team: team}}
}

func TestAdmissionQuotas(t *testing.T) {
	r := &Reconciler{MaxPerTeam: 2, MaxTotal: 3, adm: newAdmission()}
	ctx := context.Background()
	var o observation
	if !r.admit(ctx, chal("a1", "a"), &o) || !r.admit(ctx, chal("a2", "a"), &o) {
		t.Fatal("a team's first two instances refused")
	}
	if !r.admit(ctx, chal("a1", "a"), &o) {
		t.Fatal("an admitted Challenge refused when asked again")
	}
	o = observation{}
	if r.admit(ctx, chal("a3", "a"), &o) || o.reason != "QuotaExceeded" {
		t.Fatalf("a team's third instance admitted past its quota of 2 (%+v)", o)
	}
	if !r.admit(ctx, chal("b1", "b"), &o) {
		t.Fatal("another team's first instance refused")
	}
	o = observation{}
	if r.admit(ctx, chal("c1", "c"), &o) || o.reason != "QuotaExceeded" {
		t.Fatalf("a fourth instance admitted past the total of 3 (%+v)", o)
	}
	r.forget(chal("a1", "a"))
	if r.adm.total != 2 || r.adm.perTeam["ctf/a"] != 1 {
		t.Fatalf("after forget: total %d, team a %d", r.adm.total, r.adm.perTeam["ctf/a"])
	}
	if !r.admit(ctx, chal("c1", "c"), &o) {
		t.Fatal("an instance refused with room left")
	}
}

func TestAdmissionFromInformer(t *testing.T) {
	a := newAdmission()
	h := a.handler()
	shown := chal("x", "t")
	shown.Status.Namespace = "ctf-bench-t" // admitted before a restart
	h.OnAdd(shown, true)
	h.OnAdd(chal("y", "t"), true) // not admitted yet: not counted
	if a.total != 1 || a.perTeam["ctf/t"] != 1 {
		t.Fatalf("after adds: total %d, team %d", a.total, a.perTeam["ctf/t"])
	}
	refused := chal("z", "t")
	refused.Status = ChallengeStatus{Namespace: "ns", CurrentStatus: "Error", Reason: "QuotaExceeded"}
	h.OnUpdate(nil, refused)
	if a.total != 1 {
		t.Fatalf("a Challenge refused for quota counted: total %d", a.total)
	}
	going := shown.DeepCopy()
	now := metav1.NewTime(time.Now())
	going.DeletionTimestamp = &now
	h.OnUpdate(shown, going)
	if a.total != 0 || len(a.perTeam) != 0 {
		t.Fatalf("a Challenge being deleted still counted: total %d", a.total)
	}
	h.OnAdd(shown, false)
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ctf/x", Obj: shown})
	if a.total != 0 || len(a.admitted) != 0 {
		t.Fatalf("a deleted Challenge still counted: total %d", a.total)
	}
}
