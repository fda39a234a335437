// Command cert-manager-controller runs cert-manager's controller, built from
// the release pinned in ../go.mod, out of the cluster with a kubeconfig (the
// devcluster's), for kopc's e2e test of the webhook's certificate.
//
// cert-manager's own command (cmd/controller of its repository) is a Go
// module the Go proxy does not serve (its path, controller-binary, does not
// match its directory). Its controllers are in the main module: each
// package registers its constructor with pkg/controller when imported. This
// program imports the ones an install with self-signed and CA issuers needs
// (no ACME, Vault or Venafi, whose clients make the build several times
// larger), builds them on one pkg/controller.ContextFactory, starts the
// shared informers and runs them, as the release's command does with its
// defaults. No leader election: the test runs one replica.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"

	// Each import registers its controllers (init functions).
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"

	// The issuer types the issuers controllers can set up.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

func main() {
	// A flag set of its own: controller-runtime registers --kubeconfig on
	// the global one.
	fs := flag.NewFlagSet("cert-manager-controller", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "the cluster's kubeconfig")
	clusterNS := fs.String("cluster-resource-namespace", "kube-system",
		"where ClusterIssuers' Secrets are read (the release's default)")
	workers := fs.Int("concurrent-workers", 5, "workers per controller (the release's default)")
	verbosity := fs.Int("v", 2, "log level (cert-manager's: 2 info, 4 debug)")
	version := fs.Bool("version", false, "print the cert-manager release and exit")
	_ = fs.Parse(os.Args[1:])
	if *version {
		fmt.Println(util.AppVersion)
		return
	}
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "cert-manager-controller: --kubeconfig is required")
		os.Exit(2)
	}
	logf.InitLogs()
	var kflags flag.FlagSet
	klog.InitFlags(&kflags)
	_ = kflags.Set("v", fmt.Sprint(*verbosity))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, "cert-manager-controller")
	if err := run(ctx, *kubeconfig, *clusterNS, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager-controller:", err)
		os.Exit(1)
	}
}

// run builds every registered controller, starts the shared informers and
// runs the controllers until ctx ends; the options not set here are those
// the release's configuration defaults to.
func run(ctx context.Context, kubeconfig, clusterNS string, workers int) error {
	factory, err := controllerpkg.NewContextFactory(ctx, controllerpkg.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		IssuerOptions: controllerpkg.IssuerOptions{
			ClusterResourceNamespace: clusterNS,
		},
		CertificateOptions: controllerpkg.CertificateOptions{
			CopiedAnnotationPrefixes:                 []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"},
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
		SchedulerOptions: controllerpkg.SchedulerOptions{MaxConcurrentChallenges: 60},
	})
	if err != nil {
		return err
	}
	known := controllerpkg.Known()
	names := make([]string, 0, len(known))
	for name := range known {
		names = append(names, name)
	}
	sort.Strings(names)
	loops := make(map[string]controllerpkg.Interface, len(names))
	for _, name := range names {
		loop, err := known[name](factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
		loops[name] = loop
	}
	// The constructors registered their informers on the shared factories,
	// which every Context built from this factory holds.
	shared, err := factory.Build()
	if err != nil {
		return err
	}
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.SharedInformerFactory.Start(ctx.Done())
	shared.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	logf.FromContext(ctx).Info("starting controllers", "controllers", names)

	var wg sync.WaitGroup
	errs := make(chan error, len(loops))
	for name, loop := range loops {
		wg.Go(func() {
			if err := loop.Run(workers, logf.NewContext(ctx, logf.FromContext(ctx), name)); err != nil {
				errs <- fmt.Errorf("controller %s: %w", name, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}
