// challenge-go: the Challenge controller of ctf-operator (operators/ctf)
// written the idiomatic controller-runtime way, as a benchmark peer for kopc
// (docs/benchmarks.md). The same reconcile logic, step for step
// (operators/ctf/reconcile.c): finalizer; definition from the cache;
// lifetime and expiry; admission against the per-team and total quotas;
// every child of the instance server-side applied (namespace, flag Secret,
// ResourceQuota, LimitRange, NetworkPolicies, Deployment, the exposed
// Service and each pod's ClusterIP Service) when it
// changed since the last apply (applied.go decides as applied.c); then
// Running once the Deployment is available, the Service has its nodePort
// and a ready endpoint (an EndpointSlice, as observe.c asks), Pending until then; status written only when it changes, an
// Event on each transition. The same watches: Challenges (generation
// changes), definitions, and the instances' namespaces, Deployments, Pods,
// Services and EndpointSlices selected by the managed-by label (cached with that label
// selector only, as kopc's informers are), mapped back by labels. The same
// concurrency: 4 workers, ctf-operator's max_concurrent. The same cache
// settings: managedFields stripped (cache.TransformStripManagedFields, as
// libkop's cache drops them). The same admission: counts per team and in
// all kept under one lock, fed by the Challenge informer's events, O(1) per
// question (operators/ctf/admission.c), where it used to walk every
// admitted Challenge and list the cache.
//
// Not ported (the benchmark does not use them): the HTTP API, dynamic
// flags, ingresses, Internet egress, waking quota-refused Challenges when
// one is deleted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const (
	finalizer    = "ctf.kopc.io/instance"
	fieldManager = "kopc-ctf-operator"
	nsWait       = 2 * time.Second
	timeFormat   = "2006-01-02T15:04:05Z"
)

type Reconciler struct {
	client.Client
	APIReader   client.Reader
	Recorder    record.EventRecorder
	NodeAddress string
	MaxPerTeam  int
	MaxTotal    int

	adm     *admission   // the quotas' counts
	applied appliedTable // what each instance was last applied as
}

type observation struct {
	phase, reason, message string
	endpoints              []Endpoint
	requeue                time.Duration
}

func (o *observation) fail(reason, format string, args ...any) {
	o.phase, o.reason, o.message = "Error", reason, fmt.Sprintf(format, args...)
}

func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var chal Challenge
	if err := r.Get(ctx, req.NamespacedName, &chal); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err) // gone: the finalizer already ran
	}
	if !chal.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &chal)
	}
	if !controllerutil.ContainsFinalizer(&chal, finalizer) {
		orig := chal.DeepCopy()
		controllerutil.AddFinalizer(&chal, finalizer)
		if err := r.Patch(ctx, &chal, client.MergeFrom(orig)); err != nil {
			return ctrl.Result{}, err
		}
	}
	o, ns, expires, res, err := r.instance(ctx, &chal)
	if err != nil || res != nil {
		if res == nil {
			res = &ctrl.Result{}
		}
		return *res, err
	}
	if err := r.writeStatus(ctx, &chal, &o, ns, expires); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: o.requeue}, nil
}

// instance decides and does everything but the status: what to report, in
// which namespace, until when. A non-nil result ends the reconcile there.
func (r *Reconciler) instance(ctx context.Context, chal *Challenge) (observation, string, time.Time,
	*ctrl.Result, error) {
	o := observation{phase: "Pending"}
	var def ChallengeDefinition
	if err := r.Get(ctx, types.NamespacedName{Namespace: chal.Namespace, Name: chal.Spec.Definition}, &def); err != nil {
		o.fail("DefinitionNotFound", "ChallengeDefinition %s not found in namespace %s",
			chal.Spec.Definition, chal.Namespace)
		return o, "", time.Time{}, nil, client.IgnoreNotFound(err)
	}
	if len(def.Spec.Pods) == 0 || def.Spec.Flag != nil && def.Spec.Flag.Dynamic != nil {
		o.fail("InvalidDefinition", "pods are required; dynamic flags are not ported to this peer")
		return o, "", time.Time{}, nil, nil
	}

	// The lifetime: past it, the instance goes away.
	created := chal.CreationTimestamp.Time
	lifeDefault, lifeMax := 30*time.Minute, 2*time.Hour
	if lt := def.Spec.Lifetime; lt != nil {
		if d, err := time.ParseDuration(lt.Default); err == nil {
			lifeDefault = d
		}
		if d, err := time.ParseDuration(lt.Max); err == nil {
			lifeMax = d
		}
	}
	expires := created.Add(lifeDefault)
	if t, err := time.Parse(time.RFC3339, chal.Spec.ExpiresAt); err == nil {
		expires = t
	}
	if expires.After(created.Add(lifeMax)) {
		expires = created.Add(lifeMax)
	}
	left := time.Until(expires)
	if left <= 0 {
		r.Recorder.Event(chal, corev1.EventTypeNormal, "Expired", "instance expired")
		err := client.IgnoreNotFound(r.Delete(ctx, chal))
		return o, "", expires, &ctrl.Result{}, err
	}
	o.requeue = left + 500*time.Millisecond

	// Admission, then the instance itself.
	ns := instanceNamespace(chal.Namespace, chal.Spec.Definition, chal.Spec.Team)
	if !r.admit(ctx, chal, &o) {
		return o, "", expires, nil, nil
	}
	var existing corev1.Namespace
	if err := r.Get(ctx, types.NamespacedName{Name: ns}, &existing); err == nil {
		ours := existing.Annotations[annotationUID] == string(chal.UID)
		going := !existing.DeletionTimestamp.IsZero()
		if !ours && !going {
			o.fail("DuplicateInstance", "namespace %s already holds this team's instance of %s",
				ns, chal.Spec.Definition)
			r.forget(chal)
			return o, "", expires, nil, nil
		}
		if going {
			o.message, o.requeue = fmt.Sprintf("waiting for namespace %s to be removed", ns), nsWait
			return o, ns, expires, nil, nil
		}
	}
	flag := ""
	if def.Spec.Flag != nil {
		flag = def.Spec.Flag.Static
	}
	objs, err := children(&def, chal, ns, flag)
	if err != nil {
		o.fail("InvalidDefinition", "%v", err)
		return o, ns, expires, nil, nil
	}
	// Apply only what changed since the last apply (applied.go, as applied.c).
	now := time.Now()
	digest, hashed := digestOf(objs)
	v, wait := apply, time.Duration(0)
	if hashed {
		missing, gens := r.seen(ctx, objs)
		v, wait = r.applied.decide(chal.UID, digest, missing, gens, now)
	}
	if v == waitApply && wait < o.requeue {
		o.requeue = wait
	}
	if v == apply {
		r.applied.forget(chal.UID)
		for _, obj := range objs {
			if err := r.Apply(ctx, obj, client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
				if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
					o.fail("InvalidDefinition", "refused: %v", err)
					return o, ns, expires, nil, nil
				}
				return o, ns, expires, nil, err
			}
		}
		if hashed {
			r.applied.record(chal.UID, digest, appliedGenerations(objs), now)
		}
	}
	expiry := o.requeue
	r.observe(ctx, &def, chal, ns, &o)
	if expiry < o.requeue || o.requeue == 0 {
		o.requeue = expiry
	}
	return o, ns, expires, nil, nil
}

// ---- admission -----------------------------------------------------------------

func isAdmitted(c *Challenge) bool {
	if !c.DeletionTimestamp.IsZero() {
		return false
	}
	if c.Status.CurrentStatus == "Error" && c.Status.Reason == "QuotaExceeded" {
		return false
	}
	return c.Status.Namespace != ""
}

// admission keeps the quotas' counts as kopc's operators/ctf/admission.c
// does: the set of admitted Challenges (uid -> "namespace/team"), a count
// per team and a total, under one lock. Two sources fill it, united by uid:
// the reconciler's own decisions, and the Challenge cache's events (a
// Challenge the cache shows admitted enters the set, one being deleted or
// deleted leaves it), so every question is O(1) and nothing lists the cache.
type admission struct {
	mu       sync.Mutex
	admitted map[string]string // uid -> "namespace/team"
	perTeam  map[string]int
	total    int
}

func newAdmission() *admission {
	return &admission{admitted: map[string]string{}, perTeam: map[string]int{}}
}

// add puts uid in the set (lock held).
func (a *admission) add(uid, key string) {
	if _, ok := a.admitted[uid]; ok {
		return
	}
	a.admitted[uid] = key
	a.perTeam[key]++
	a.total++
}

// drop takes uid out of the set (lock held).
func (a *admission) drop(uid string) {
	key, ok := a.admitted[uid]
	if !ok {
		return
	}
	delete(a.admitted, uid)
	if a.perTeam[key]--; a.perTeam[key] <= 0 {
		delete(a.perTeam, key)
	}
	a.total--
}

// seen updates the set from a Challenge as the cache shows it now.
func (a *admission) seen(obj any) {
	c, ok := obj.(*Challenge)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !c.DeletionTimestamp.IsZero() {
		a.drop(string(c.UID))
	} else if isAdmitted(c) {
		a.add(string(c.UID), c.Namespace+"/"+c.Spec.Team)
	}
}

// handler feeds the set from the Challenge informer.
func (a *admission) handler() toolscache.ResourceEventHandlerFuncs {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.seen(obj) },
		UpdateFunc: func(_, obj any) { a.seen(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if c, ok := obj.(*Challenge); ok {
				a.mu.Lock()
				a.drop(string(c.UID))
				a.mu.Unlock()
			}
		},
	}
}

func (r *Reconciler) admit(ctx context.Context, chal *Challenge, o *observation) bool {
	teamKey := chal.Namespace + "/" + chal.Spec.Team
	uid := string(chal.UID)
	a := r.adm
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.admitted[uid]; ok || isAdmitted(chal) {
		a.add(uid, teamKey)
		return true
	}
	if a.perTeam[teamKey] >= r.MaxPerTeam {
		o.fail("QuotaExceeded", "team %s already has %d instances running (--max-instances-per-team); stop one first",
			chal.Spec.Team, r.MaxPerTeam)
		return false
	}
	if a.total >= r.MaxTotal {
		o.fail("QuotaExceeded", "the CTF runs its maximum of %d instances (--max-instances); try later", r.MaxTotal)
		return false
	}
	a.add(uid, teamKey)
	return true
}

func (r *Reconciler) forget(chal *Challenge) {
	r.adm.mu.Lock()
	r.adm.drop(string(chal.UID))
	r.adm.mu.Unlock()
}

// ---- observing the instance -------------------------------------------------------

func (r *Reconciler) observe(ctx context.Context, def *ChallengeDefinition, chal *Challenge, ns string, o *observation) {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(ns)); err == nil {
		for _, p := range pods.Items {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Waiting == nil {
					continue
				}
				switch cs.State.Waiting.Reason {
				case "ImagePullBackOff", "ErrImagePull", "InvalidImageName":
					o.fail("ImagePullFailed", "image %s of container %s cannot be pulled", cs.Image, cs.Name)
					return
				case "CrashLoopBackOff":
					o.fail("CrashLoop", "container %s of pod %s keeps crashing", cs.Name, p.Name)
					return
				}
			}
		}
	}
	var services corev1.ServiceList
	complete := r.List(ctx, &services, client.InNamespace(ns)) == nil
	o.endpoints = []Endpoint{}
	for _, e := range def.Spec.Expose {
		var nodePort int32
		for _, s := range services.Items {
			if s.Name != e.Name {
				continue
			}
			for _, p := range s.Spec.Ports {
				if p.Port == e.Port {
					nodePort = p.NodePort
				}
			}
		}
		if nodePort <= 0 {
			complete = false
			continue
		}
		typ, addr := "TCP", fmt.Sprintf("%s:%d", r.NodeAddress, nodePort)
		if e.Type == "HTTP" {
			typ, addr = "HTTP", "http://"+addr
		}
		o.endpoints = append(o.endpoints, Endpoint{Name: e.Name, Type: typ, Address: addr})
	}
	if complete && r.deploymentsAvailable(ctx, def, ns) && r.servicesReady(ctx, def, ns) {
		o.phase, o.message = "Running", "instance running"
		return
	}
	timeout := 5 * time.Minute
	if d, err := time.ParseDuration(def.Spec.StartTimeout); err == nil {
		timeout = d
	}
	age := time.Since(chal.CreationTimestamp.Time)
	if age >= timeout {
		o.fail("StartTimeout", "not running within %d s of the request", int(timeout.Seconds()))
		return
	}
	o.phase, o.message, o.requeue = "Pending", "starting", timeout-age+time.Second
}

func (r *Reconciler) deploymentsAvailable(ctx context.Context, def *ChallengeDefinition, ns string) bool {
	for _, p := range def.Spec.Pods {
		var d appsv1.Deployment
		if err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: p.Name}, &d); err != nil {
			return false
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		if d.Status.ObservedGeneration < d.Generation || d.Status.AvailableReplicas < want ||
			d.Status.UpdatedReplicas < want {
			return false
		}
	}
	return true
}

// servicesReady: every exposed Service has a ready endpoint in its EndpointSlices
// (the slices carry the Service's labels, so the managed-by cache holds them).
func (r *Reconciler) servicesReady(ctx context.Context, def *ChallengeDefinition, ns string) bool {
	var slices discoveryv1.EndpointSliceList
	if r.List(ctx, &slices, client.InNamespace(ns)) != nil {
		return false
	}
	for _, e := range def.Spec.Expose {
		ready := false
		for _, s := range slices.Items {
			if s.Labels[discoveryv1.LabelServiceName] != e.Name {
				continue
			}
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
					ready = true
				}
			}
		}
		if !ready {
			return false
		}
	}
	return true
}

// ---- status ------------------------------------------------------------------------

func (r *Reconciler) writeStatus(ctx context.Context, chal *Challenge, o *observation, ns string, expires time.Time) error {
	orig := chal.DeepCopy()
	s := &chal.Status
	was := s.CurrentStatus
	s.CurrentStatus, s.Reason, s.Message = o.phase, o.reason, o.message
	s.ObservedGeneration = chal.Generation
	if ns != "" {
		s.Namespace = ns
	}
	if !expires.IsZero() {
		s.ExpiresAt = expires.UTC().Format(timeFormat)
	}
	running := o.phase == "Running"
	if o.endpoints != nil {
		s.Endpoints = o.endpoints
	} else if !running {
		s.Endpoints = []Endpoint{}
	}
	if running && s.StartedAt == "" {
		s.StartedAt = time.Now().UTC().Format(timeFormat)
	}
	why := o.reason
	if why == "" {
		why = o.phase
	}
	cond := func(t string, on bool, reason string) {
		st := metav1.ConditionFalse
		if on {
			st = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: t, Status: st, Reason: reason,
			Message: o.message, ObservedGeneration: chal.Generation})
	}
	pick := func(cond bool, a, b string) string {
		if cond {
			return a
		}
		return b
	}
	cond("Ready", running, pick(running, "InstanceRunning", why))
	cond("Progressing", o.phase == "Pending", pick(o.phase == "Pending", "InstanceStarting", why))
	cond("Degraded", o.phase == "Error", pick(o.phase == "Error", why, "AsExpected"))
	if statusEqual(&orig.Status, s) {
		return nil
	}
	if err := r.Status().Patch(ctx, chal, client.MergeFrom(orig)); err != nil {
		return client.IgnoreNotFound(err)
	}
	if was != o.phase {
		typ := corev1.EventTypeNormal
		if o.phase == "Error" {
			typ = corev1.EventTypeWarning
		}
		logf.FromContext(ctx).Info("instance status", "status", o.phase, "reason", o.reason, "message", o.message)
		r.Recorder.Eventf(chal, typ, why, o.phase, "%s: %s", o.phase, o.message)
	}
	return nil
}

func statusEqual(a, b *ChallengeStatus) bool {
	if a.CurrentStatus != b.CurrentStatus || a.Reason != b.Reason || a.Message != b.Message ||
		a.Namespace != b.Namespace || a.ExpiresAt != b.ExpiresAt || a.StartedAt != b.StartedAt ||
		a.ObservedGeneration != b.ObservedGeneration || len(a.Endpoints) != len(b.Endpoints) ||
		(a.Endpoints == nil) != (b.Endpoints == nil) {
		return false
	}
	for i := range a.Endpoints {
		if a.Endpoints[i] != b.Endpoints[i] {
			return false
		}
	}
	return true
}

// ---- finalization ------------------------------------------------------------------

func (r *Reconciler) finalize(ctx context.Context, chal *Challenge) (ctrl.Result, error) {
	r.applied.forget(chal.UID) // nothing is applied any more
	if !controllerutil.ContainsFinalizer(chal, finalizer) {
		return ctrl.Result{}, nil
	}
	ns := instanceNamespace(chal.Namespace, chal.Spec.Definition, chal.Spec.Team)
	var nsObj corev1.Namespace
	err := r.APIReader.Get(ctx, types.NamespacedName{Name: ns}, &nsObj)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	if err == nil && nsObj.Annotations[annotationUID] == string(chal.UID) {
		o := observation{phase: "Terminating", message: "deleting namespace " + ns}
		if err := r.writeStatus(ctx, chal, &o, ns, time.Time{}); err != nil {
			return ctrl.Result{}, err
		}
		if nsObj.DeletionTimestamp.IsZero() {
			uid := nsObj.UID
			err := r.Delete(ctx, &nsObj, client.PropagationPolicy(metav1.DeletePropagationBackground),
				client.Preconditions{UID: &uid})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{RequeueAfter: nsWait}, nil
	}
	o := observation{phase: "Deleted", message: "instance removed"}
	if err := r.writeStatus(ctx, chal, &o, ns, time.Time{}); err != nil {
		return ctrl.Result{}, err
	}
	orig := chal.DeepCopy()
	controllerutil.RemoveFinalizer(chal, finalizer)
	if err := r.Patch(ctx, chal, client.MergeFrom(orig)); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	r.forget(chal)
	return ctrl.Result{}, nil
}

// ---- watches -----------------------------------------------------------------------

// byLabels maps an instance's child to its Challenge through its labels.
func byLabels(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[labelChallenge] == "" || l[labelChallengeNS] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{
		Namespace: l[labelChallengeNS], Name: l[labelChallenge]}}}
}

// byDefinition maps a definition to the Challenges that use it.
func (r *Reconciler) byDefinition(ctx context.Context, o client.Object) []reconcile.Request {
	var list ChallengeList
	if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace()),
		client.MatchingFields{"spec.definition": o.GetName()}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, c := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{
			Namespace: c.Namespace, Name: c.Name}})
	}
	return reqs
}

func main() {
	var metricsAddr, probeAddr, nodeAddress string
	var workers, maxPerTeam, maxTotal int
	flag.StringVar(&metricsAddr, "metrics-bind-address", "127.0.0.1:8080", "metrics endpoint")
	flag.StringVar(&probeAddr, "health-probe-bind-address", "127.0.0.1:8081", "health probes")
	flag.StringVar(&nodeAddress, "node-address", "127.0.0.1", "host shown in NodePort endpoints")
	flag.IntVar(&workers, "max-concurrent", 16, "MaxConcurrentReconciles (ctf-operator's --workers default is 16)")
	flag.IntVar(&maxPerTeam, "max-instances-per-team", 3, "instances one team may run at once")
	flag.IntVar(&maxTotal, "max-instances", 1000, "instances in all")
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
	managed := labels.SelectorFromSet(labels.Set{labelManagedBy: managedBy})
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		// managedFields dropped from every cached object, as libkop's cache
		// does (docs/benchmarks.md, "What runs": equal cache settings).
		Cache: cache.Options{DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Namespace{}:          {Label: managed},
				&appsv1.Deployment{}:         {Label: managed},
				&corev1.Pod{}:                {Label: managed},
				&corev1.Service{}:            {Label: managed},
				&discoveryv1.EndpointSlice{}: {Label: managed},
			}},
	})
	if err != nil {
		setupLog.Error(err, "unable to create manager")
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()
	indexer := mgr.GetFieldIndexer()
	if err := indexer.IndexField(ctx, &Challenge{}, "spec.team", func(o client.Object) []string {
		return []string{o.(*Challenge).Spec.Team}
	}); err != nil {
		panic(err)
	}
	if err := indexer.IndexField(ctx, &Challenge{}, "spec.definition", func(o client.Object) []string {
		return []string{o.(*Challenge).Spec.Definition}
	}); err != nil {
		panic(err)
	}
	r := &Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder:    mgr.GetEventRecorderFor("kopc-ctf"),
		NodeAddress: nodeAddress, MaxPerTeam: maxPerTeam, MaxTotal: maxTotal,
		adm:     newAdmission(),
		applied: appliedTable{records: map[types.UID]appliedRecord{}},
	}
	chalInformer, err := mgr.GetCache().GetInformer(ctx, &Challenge{})
	if err != nil {
		panic(err)
	}
	if _, err := chalInformer.AddEventHandler(r.adm.handler()); err != nil {
		panic(err)
	}
	mapLabels := handler.EnqueueRequestsFromMapFunc(byLabels)
	err = ctrl.NewControllerManagedBy(mgr).
		Named("challenge").
		For(&Challenge{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&ChallengeDefinition{}, handler.EnqueueRequestsFromMapFunc(r.byDefinition)).
		Watches(&corev1.Namespace{}, mapLabels).
		Watches(&appsv1.Deployment{}, mapLabels).
		Watches(&corev1.Pod{}, mapLabels).
		Watches(&corev1.Service{}, mapLabels).
		Watches(&discoveryv1.EndpointSlice{}, mapLabels).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
	if err != nil {
		setupLog.Error(err, "unable to create controller")
		os.Exit(1)
	}
	_ = mgr.AddHealthzCheck("healthz", healthz.Ping)
	_ = mgr.AddReadyzCheck("readyz", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("caches not synced")
		}
		return nil
	})
	setupLog.Info("starting manager")
	if err := mgr.Start(ctx); err != nil {
		setupLog.Error(err, "manager stopped")
		os.Exit(1)
	}
}
