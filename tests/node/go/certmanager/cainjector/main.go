// Command cert-manager-cainjector runs cert-manager v1.21's CA injector, for the
// certificates.mode=certManager tests of tests/node.
//
// Why a command of our own: see ../controller/main.go (the binary's own module is not served by
// the Go module proxy). This is the thin wiring, written here, around cert-manager's
// pkg/controller/cainjector: a controller-runtime manager with the schemes the injectors read
// (core, cert-manager, apiextensions, apiregistration), Secrets read from the API rather than a
// cache, a user agent (the injectors' field manager is named after it), leader election on the
// Lease cert-manager-cainjector-leader-election in
// --leader-election-namespace, metrics on :9402, and cainjector.RegisterAllInjectors with every
// injectable kind and the Certificate data source on (the real injector's defaults). It accepts
// the flags cert-manager's chart passes by default and refuses others.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
)

type options struct {
	leaseNamespace string
	leaseDuration  time.Duration
	renewDeadline  time.Duration
	retryPeriod    time.Duration
	metrics        string
}

func parse(arguments []string) (options, error) {
	var o options
	flags := flag.NewFlagSet("cert-manager-cainjector", flag.ContinueOnError)
	verbosity := flags.Int("v", 2, "klog verbosity")
	flags.StringVar(&o.leaseNamespace, "leader-election-namespace", "kube-system", "the Lease's namespace")
	flags.DurationVar(&o.leaseDuration, "leader-election-lease-duration", 60*time.Second, "")
	flags.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", 40*time.Second, "")
	flags.DurationVar(&o.retryPeriod, "leader-election-retry-period", 15*time.Second, "")
	flags.StringVar(&o.metrics, "metrics-listen-address", ":9402", "metrics address; 0: none")
	if err := flags.Parse(arguments); err != nil {
		return o, err
	}
	if flags.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", flags.Args())
	}
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	return o, klogFlags.Set("v", strconv.Itoa(*verbosity))
}

func run(ctx context.Context, o options) error {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	utilruntime.Must(apiregistrationv1.AddToScheme(scheme))
	config, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	// The injectors apply their patches with a field manager named after the user agent.
	config = util.RestConfigWithUserAgent(config, "cainjector")
	manager, err := ctrl.NewManager(config, ctrl.Options{
		Scheme: scheme,
		Client: client.Options{
			Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}},
		},
		LeaderElection:                true,
		LeaderElectionNamespace:       o.leaseNamespace,
		LeaderElectionID:              "cert-manager-cainjector-leader-election",
		LeaderElectionReleaseOnCancel: true,
		LeaderElectionResourceLock:    resourcelock.LeasesResourceLock,
		LeaseDuration:                 &o.leaseDuration,
		RenewDeadline:                 &o.renewDeadline,
		RetryPeriod:                   &o.retryPeriod,
		Metrics:                       metricsserver.Options{BindAddress: o.metrics},
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	err = cainjector.RegisterAllInjectors(ctx, manager, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
			cainjector.APIServiceName:                     true,
			cainjector.CustomResourceDefinitionName:       true,
		},
	})
	if err != nil {
		return fmt.Errorf("injectors: %w", err)
	}
	return manager.Start(ctx)
}

func main() {
	o, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager-cainjector:", err)
		os.Exit(64)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx = logf.NewContext(ctx, klog.Background(), "cert-manager-cainjector")
	ctrl.SetLogger(klog.Background())
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager-cainjector:", err)
		os.Exit(1)
	}
}
