// Command cert-manager-cainjector runs cert-manager's CA injector, built from
// the release pinned in ../go.mod, out of the cluster with a kubeconfig (the
// devcluster's), for kopc's e2e test of the webhook's certificate: it fills
// the caBundle of webhook configurations, APIServices and CRD conversion
// webhooks annotated cert-manager.io/inject-ca-from (a Certificate's
// Secret) or inject-ca-from-secret.
//
// cert-manager's own command (cmd/cainjector of its repository) is a Go
// module the Go proxy does not serve (its path, cainjector-binary, does not
// match its directory). The injectors are in the main module
// (pkg/controller/cainjector): this program makes the controller-runtime
// manager they run in, with the release's defaults (every injectable kind,
// Certificates as a source, Secrets read uncached), registers them and
// runs it. No leader election, metrics or probes: the test runs one replica.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
)

func main() {
	// A flag set of its own: controller-runtime registers --kubeconfig on
	// the global one.
	fs := flag.NewFlagSet("cert-manager-cainjector", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "the cluster's kubeconfig")
	verbosity := fs.Int("v", 2, "log level (cert-manager's: 2 info, 4 debug)")
	version := fs.Bool("version", false, "print the cert-manager release and exit")
	_ = fs.Parse(os.Args[1:])
	if *version {
		fmt.Println(util.AppVersion)
		return
	}
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "cert-manager-cainjector: --kubeconfig is required")
		os.Exit(2)
	}
	logf.InitLogs()
	var kflags flag.FlagSet
	klog.InitFlags(&kflags)
	_ = kflags.Set("v", fmt.Sprint(*verbosity))
	ctrl.SetLogger(logf.Log)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager-cainjector:", err)
		os.Exit(1)
	}
}

// run makes the manager, registers every injector and runs until ctx ends.
func run(ctx context.Context, kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.UserAgent = "cert-manager-cainjector"
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, admissionv1.AddToScheme, apiextv1.AddToScheme,
		apiregv1.AddToScheme, cmapi.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// The injectors watch Secrets' metadata only and read the one
		// they need when they need it, as the release configures them.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	})
	if err != nil {
		return err
	}
	err = cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
			cainjector.APIServiceName:                     true,
			cainjector.CustomResourceDefinitionName:       true,
		},
	})
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
