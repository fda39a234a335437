// flightticket-go: the FlightTicket operator of examples/flightticket written
// the idiomatic controller-runtime way, as a benchmark peer for kopc (see
// docs/benchmarks.md). Same behaviour: for every FlightTicket it keeps a
// "boarding pass" ConfigMap the ticket controls, and confirms the booking in
// status (phase, seats, confirmedAt, observedGeneration), written only when
// it would change. Same settings as the C example: GenerationChanged
// predicate on tickets, owned ConfigMaps, 2 concurrent reconciles.
//
//	flightticket-go [--kubeconfig PATH] [--metrics-bind-address ADDR]
//	                [--health-probe-bind-address ADDR] [--max-concurrent N]
package main

import (
	"context"
	"errors"
	"net/http"
	"flag"
	"os"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// ---- the API types (what controller-gen would generate, by hand) ----------

var GroupVersion = schema.GroupVersion{Group: "flights.com", Version: "v1"}

type FlightTicketSpec struct {
	From   string `json:"from,omitempty"`
	To     string `json:"to,omitempty"`
	Number int64  `json:"number,omitempty"`
}

type FlightTicketStatus struct {
	Phase              string       `json:"phase,omitempty"`
	Seats              int64        `json:"seats,omitempty"`
	ConfirmedAt        *metav1.Time `json:"confirmedAt,omitempty"`
	ObservedGeneration int64        `json:"observedGeneration,omitempty"`
}

type FlightTicket struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              FlightTicketSpec   `json:"spec,omitempty"`
	Status            FlightTicketStatus `json:"status,omitempty"`
}

type FlightTicketList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FlightTicket `json:"items"`
}

func (in *FlightTicket) DeepCopyInto(out *FlightTicket) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec = in.Spec
	out.Status = in.Status
	if in.Status.ConfirmedAt != nil {
		out.Status.ConfirmedAt = in.Status.ConfirmedAt.DeepCopy()
	}
}

func (in *FlightTicket) DeepCopy() *FlightTicket {
	if in == nil {
		return nil
	}
	out := new(FlightTicket)
	in.DeepCopyInto(out)
	return out
}

func (in *FlightTicket) DeepCopyObject() runtime.Object { return in.DeepCopy() }

func (in *FlightTicketList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(FlightTicketList)
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]FlightTicket, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

func addToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &FlightTicket{}, &FlightTicketList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// ---- the reconciler ---------------------------------------------------------

type TicketReconciler struct {
	client.Client
	Scheme *runtime.Scheme
}

// Reconcile makes the boarding pass match the ticket, then confirms the ticket.
func (r *TicketReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	var t FlightTicket
	if err := r.Get(ctx, req.NamespacedName, &t); err != nil {
		// Deleted: the garbage collector removes the boarding pass.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !t.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}

	// 1. The boarding pass, created or updated to match.
	pass := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: t.Name + "-boarding-pass", Namespace: t.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, pass, func() error {
		pass.Data = map[string]string{
			"from":      t.Spec.From,
			"to":        t.Spec.To,
			"passenger": t.Name,
			"seats":     strconv.FormatInt(t.Spec.Number, 10),
		}
		return controllerutil.SetControllerReference(&t, pass, r.Scheme)
	}); err != nil {
		return ctrl.Result{}, err
	}

	// 2. The status, written only when it would change.
	if t.Status.Phase == "Confirmed" && t.Status.Seats == t.Spec.Number &&
		t.Status.ObservedGeneration == t.Generation {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(t.DeepCopy())
	t.Status.Phase = "Confirmed"
	t.Status.Seats = t.Spec.Number
	t.Status.ObservedGeneration = t.Generation
	if t.Status.ConfirmedAt == nil { // the first confirmation stays
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		t.Status.ConfirmedAt = &now
	}
	if err := r.Status().Patch(ctx, &t, patch); err != nil {
		return ctrl.Result{}, err
	}
	log.Info("ticket confirmed", "seats", t.Spec.Number)
	return ctrl.Result{}, nil
}

func main() {
	var metricsAddr, probeAddr string
	var workers int
	flag.StringVar(&metricsAddr, "metrics-bind-address", "127.0.0.1:8080", "metrics endpoint")
	flag.StringVar(&probeAddr, "health-probe-bind-address", "127.0.0.1:8081", "health probes")
	flag.IntVar(&workers, "max-concurrent", 2, "MaxConcurrentReconciles (the C example uses 2)")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	setupLog := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := addToScheme(scheme); err != nil {
		panic(err)
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		// managedFields dropped from every cached object, as libkop's cache
		// does (docs/benchmarks.md, "What runs": equal cache settings).
		Cache: cache.Options{DefaultTransform: cache.TransformStripManagedFields()},
	})
	if err != nil {
		setupLog.Error(err, "unable to create manager")
		os.Exit(1)
	}
	err = ctrl.NewControllerManagedBy(mgr).
		For(&FlightTicket{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.ConfigMap{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(&TicketReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme()})
	if err != nil {
		setupLog.Error(err, "unable to create controller")
		os.Exit(1)
	}
	_ = mgr.AddHealthzCheck("healthz", healthz.Ping)
	// Ready once the caches have synced, like kopc's /readyz.
	_ = mgr.AddReadyzCheck("readyz", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("caches not synced")
		}
		return nil
	})
	setupLog.Info("starting manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		setupLog.Error(err, "manager stopped")
		os.Exit(1)
	}
}
